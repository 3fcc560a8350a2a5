//go:build !strata_nodemo

package demo

import _ "embed" // for go:embed

//go:embed strata-demo-go-18m-q8_0.gguf
var q8_0 []byte

// Embedded reports whether this binary carries the demo model (built without strata_nodemo).
const Embedded = true
