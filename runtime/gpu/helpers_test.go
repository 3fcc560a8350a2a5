package gpu

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A few require-style helpers: testify v1.12.1 needs go.sum entries (go.yaml.in/yaml/v3
// and friends) this module does not have yet, so these tests use the standard library.
type requireT struct{}

var require requireT

func msg(args []any) string {
	if len(args) == 0 {
		return ""
	}
	if f, ok := args[0].(string); ok {
		return ": " + fmt.Sprintf(f, args[1:]...)
	}
	return ": " + fmt.Sprint(args...)
}

func (requireT) NoError(t testing.TB, err error, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error %v%s", err, msg(args))
	}
}

func (requireT) Error(t testing.TB, err error, args ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error%s", msg(args))
	}
}

func (requireT) ErrorContains(t testing.TB, err error, sub string, args ...any) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v does not contain %q%s", err, sub, msg(args))
	}
}

func (requireT) True(t testing.TB, v bool, args ...any) {
	t.Helper()
	if !v {
		t.Fatalf("expected true%s", msg(args))
	}
}

func (requireT) Equal(t testing.TB, want, got any, args ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("got %#v, want %#v%s", got, want, msg(args))
	}
}

func (requireT) Contains(t testing.TB, s, sub string, args ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q%s", s, sub, msg(args))
	}
}

func (requireT) Len(t testing.TB, v any, n int, args ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Fatalf("length %d, want %d%s", l, n, msg(args))
	}
}
