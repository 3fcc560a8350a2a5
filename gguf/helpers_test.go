package gguf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testify's require cannot be used: go.sum lacks its yaml/spew/difflib entries and this
// package may not edit go.mod/go.sum. These three helpers stand in for it.

func noErr(t testing.TB, err error, ctx ...any) {
	t.Helper()
	if err != nil {
		t.Fatal(append([]any{"unexpected error:", err}, ctx...)...)
	}
}

func equal(t testing.TB, want, got any, ctx ...any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(append([]any{"mismatch (-want +got):\n" + d}, ctx...)...)
	}
}

func isTrue(t testing.TB, cond bool, ctx ...any) {
	t.Helper()
	if !cond {
		t.Fatal(append([]any{"condition failed:"}, ctx...)...)
	}
}
