package hip

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/strata-hip/strata/runtime/gpu"
)

func TestLibraryNames(t *testing.T) {
	env := map[string]string{"ROCM_PATH": "/opt/rocm-6.2.0"}
	got := libraryNames(func(k string) string { return env[k] })
	want := []string{
		"/opt/rocm-6.2.0/lib/libamdhip64.so.7", "/opt/rocm-6.2.0/lib/libamdhip64.so.6", "/opt/rocm-6.2.0/lib/libamdhip64.so.5",
		"/opt/rocm/lib/libamdhip64.so.7", "/opt/rocm/lib/libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so.5",
		"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMissingLibrary(t *testing.T) {
	_, err := openLib([]string{"/nonexistent/libamdhip64.so.6"})
	if err == nil || !errors.Is(err, gpu.ErrNoLibrary) || !strings.Contains(err.Error(), "/nonexistent/libamdhip64.so.6") {
		t.Fatalf("want an error matching gpu.ErrNoLibrary naming the path, got %v", err)
	}
}

func TestMissingSymbol(t *testing.T) {
	_, err := openLib([]string{"libc.so.6"})
	if err == nil || !strings.Contains(err.Error(), "libc.so.6 has no symbol hipInit") {
		t.Fatalf("want the missing symbol and library named, got %v", err)
	}
}

// propsBuf builds a properties buffer the way the runtime would fill it.
func propsBuf(name string, off int, arch string) []byte {
	b := make([]byte, propsBufSize)
	copy(b, name)
	copy(b[off:], arch)
	return b
}

func TestParseArch(t *testing.T) {
	const name = "AMD Radeon RX 9070 XT"
	const arch = "gfx1201:sramecc-:xnack-"
	for _, tc := range []struct {
		label   string
		buf     []byte
		off     int
		want    string
		wantErr string
	}{
		{"R0600 layout", propsBuf(name, archOffsetR0600, arch), archOffsetR0600, arch, ""},
		{"5.x layout", propsBuf(name, archOffsetR0000, arch), archOffsetR0000, arch, ""},
		// The plain export on ROCm 6 fills the old layout: reading it at the R0600
		// offset finds no arch, and the error says so instead of guessing.
		{"old layout read as R0600", propsBuf(name, archOffsetR0000, arch), archOffsetR0600, "", "not an AMD target id"},
		{"name mismatch", propsBuf("something else", archOffsetR0600, arch), archOffsetR0600, "", "unknown struct layout"},
	} {
		t.Run(tc.label, func(t *testing.T) {
			got, err := parseArch(tc.buf, "sym", tc.off, name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v (%q)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRealLibrary resolves the whole table against the installed HIP runtime (Debian's
// libamdhip64-5 in CI) and, where no AMD GPU is present, expects a clean "no device".
// Without the library it skips, unless STRATA_REQUIRE_HIP_LIBRARY=1 (set in CI).
func TestRealLibrary(t *testing.T) {
	b := &backend{candidates: libraryNames(os.Getenv)}
	if err := b.Load(); err != nil {
		if os.Getenv("STRATA_REQUIRE_HIP_LIBRARY") == "1" {
			t.Fatalf("STRATA_REQUIRE_HIP_LIBRARY=1: %v", err)
		}
		t.Skipf("no HIP runtime installed: %v", err)
	}
	t.Logf("loaded %s; R0600 properties: %v", b.Library(), b.lib.hipGetDevicePropertiesR0600 != 0)
	for _, s := range b.lib.symbols() {
		if *s.addr == 0 && !s.optional {
			t.Errorf("required symbol %s unresolved", s.name)
		}
	}
	devs, err := b.Devices()
	if err != nil {
		if !errors.Is(err, gpu.ErrNoDevice) {
			t.Fatalf("with no AMD GPU the error must match gpu.ErrNoDevice, got %v", err)
		}
		t.Logf("no device, cleanly: %v", err)
		if os.Getenv("STRATA_REQUIRE_GPU") == "1" {
			t.Fatalf("STRATA_REQUIRE_GPU=1 but %v", err)
		}
		return
	}
	for _, d := range devs {
		t.Logf("%+v", d)
		if d.Err == "" && !strings.HasPrefix(d.Arch, "gfx") {
			t.Errorf("device %d: arch %q", d.Ordinal, d.Arch)
		}
	}
}
