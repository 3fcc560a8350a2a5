//go:build strata_nodemo

package demo

import "testing"

// TestNoDemo: built with strata_nodemo the package carries no model and says so.
func TestNoDemo(t *testing.T) {
	if Embedded {
		t.Fatal("Embedded is true under strata_nodemo")
	}
	if name, b := Default(); name != FileName || len(b) != 0 || len(Q8_0()) != 0 {
		t.Fatalf("Default() = %q, %d bytes; want %q and no bytes", name, len(b), FileName)
	}
}
