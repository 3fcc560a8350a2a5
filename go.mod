module github.com/strata-hip/strata

go 1.26

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
