//go:build strata_nodemo

package main

import (
	"io"
	"strings"
	"testing"
)

// TestNoDemoNeedsModel: a strata-run built without the demo model asks for -m instead of
// failing on an empty file.
func TestNoDemoNeedsModel(t *testing.T) {
	_, err := openModel("", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "strata_nodemo") || !strings.Contains(err.Error(), "-m") {
		t.Fatalf("openModel with no path and no embedded model: %v", err)
	}
}
