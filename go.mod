module github.com/strata-hip/strata

go 1.26

require (
	github.com/dave/jennifer v1.7.1
	github.com/ebitengine/purego v0.11.3
	github.com/google/go-cmp v0.7.0
)
