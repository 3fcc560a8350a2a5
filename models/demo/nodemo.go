//go:build strata_nodemo

package demo

// q8_0 is empty: this binary was built with the tag strata_nodemo.
var q8_0 []byte

// Embedded reports whether this binary carries the demo model (built without strata_nodemo).
const Embedded = false
