package parity

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"

	_ "github.com/strata-hip/strata/runtime/cuda"
	_ "github.com/strata-hip/strata/runtime/hip"
)

var write = flag.Bool("write", false, "rewrite testdata/bounds.txt from the declared bounds")

// ledgerPath is the ledger's path: go test runs in parity/, a cross-built test binary
// usually from the repository root.
func ledgerPath() string {
	p := filepath.Join("testdata", "bounds.txt")
	if _, err := os.Stat(p); err != nil {
		p = filepath.Join(moduleRoot(), "parity", "testdata", "bounds.txt")
	}
	return p
}

// TestBoundsLedger fails when the declared bounds and the committed ledger differ.
func TestBoundsLedger(t *testing.T) {
	ledgerPath := ledgerPath()
	got := renderLedger(Families())
	if *write {
		if err := os.WriteFile(ledgerPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(ledgerPath)
	if err != nil {
		t.Fatalf("%v: run go test ./parity -run TestBoundsLedger -write", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Fatalf("%s differs from the declared bounds (-ledger +declared):\n%s\nIf the change is intended, run go test ./parity -run TestBoundsLedger -write and commit the diff with its derivation.", ledgerPath, d)
	}
}

// TestBoundsDeclared: every variant of every registered family that some target's code
// object has carries bounds, each with a derivation and a usable threshold.
func TestBoundsDeclared(t *testing.T) {
	for _, f := range Families() {
		seen := false
		for _, co := range abi.CodeObjects {
			if co.Family != f.Name {
				continue
			}
			seen = true
			for _, v := range co.Variants {
				if len(f.Bounds[v.Name]) == 0 {
					t.Errorf("%s/%s (%s): no bounds declared", f.Name, v.Name, co.Target)
				}
			}
		}
		if !seen {
			t.Errorf("family %s has no code object in kernels/abi", f.Name)
		}
		for v, bs := range f.Bounds {
			for _, b := range bs {
				if strings.TrimSpace(b.Why) == "" || (!b.Exact && !(b.MaxRowRel > 0)) {
					t.Errorf("%s/%s/%s: a bound needs a derivation and a positive threshold: %+v", f.Name, v, b.Name, b)
				}
			}
		}
	}
}

// TestReferences holds each reference to its own float64 bounds on fresh inputs (CPU).
func TestReferences(t *testing.T) {
	seed := runSeed(t)
	for _, f := range Families() {
		if f.SelfCheck == nil {
			continue
		}
		for _, c := range f.Cases {
			t.Run(f.Name+"/"+c.Name, func(t *testing.T) {
				if err := f.SelfCheck(c, caseRNG(seed, t.Name())); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			})
		}
	}
}

// TestParity runs every registered family's variants on the selected GPU:
// TestParity/<target>/<family>/<variant>/<shape>.
func TestParity(t *testing.T) {
	dir, have := codeObjects(t)
	dev, target := openDevice(t, have)
	seed := runSeed(t)
	var table []string
	t.Run(target, func(t *testing.T) {
		for _, f := range Families() {
			t.Run(f.Name, func(t *testing.T) {
				co, ok := abi.Find(target, f.Name)
				if !ok {
					t.Fatalf("kernels/abi has no %s code object for %s", f.Name, target)
				}
				image, err := os.ReadFile(filepath.Join(dir, co.Path))
				if err != nil {
					t.Fatalf("%v: run `just co`", err)
				}
				mod, err := dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: image})
				if err != nil {
					t.Fatal(err)
				}
				defer mod.Unload()
				for _, v := range co.Variants {
					t.Run(v.Name, func(t *testing.T) {
						bounds := f.Bounds[v.Name]
						if len(bounds) == 0 {
							t.Fatalf("no bounds declared for %s/%s: declare them in parity/%s.go first", f.Name, v.Name, f.Name)
						}
						for _, c := range f.Cases {
							if f.Applies != nil && !f.Applies(v.Name, c) {
								continue
							}
							t.Run(c.Name, func(t *testing.T) {
								h := &Harness{Dev: dev, Mod: mod}
								defer func() {
									if err := h.Close(); err != nil {
										t.Error(err)
									}
								}()
								o, err := f.Run(h, v.Symbol, c, bounds, caseRNG(seed, t.Name()))
								if err != nil {
									t.Fatalf("%s on %s (%s), seed %d (replay: STRATA_SEED=%d go test ./parity -run '%s'): %v",
										v.Symbol, dev.Info().Name, target, seed, seed, t.Name(), err)
								}
								table = append(table, summarize(t.Name(), o))
							})
						}
					})
				}
			})
		}
	})
	fmt.Printf("\nparity on %s (%s), seed %d\n%-70s %10s %9s  %s\n", dev.Info().Name, target, seed, "case", "kernel µs", "GB/s", "worst errors")
	for _, l := range table {
		fmt.Println(l)
	}
}

func summarize(name string, o Outcome) string {
	gbs := float64(o.Bytes) / (o.Kernel * 1e-6) / 1e9
	var errs []string
	for k, r := range o.Reports {
		if r.Mismatch > 0 || r.MaxRowRel > 0 {
			errs = append(errs, fmt.Sprintf("%s:%d/%.3g", k, r.Mismatch, r.MaxRowRel))
		} else {
			errs = append(errs, k+":0")
		}
	}
	sortStrings(errs)
	return fmt.Sprintf("%-70s %10.2f %9.1f  %s", strings.TrimPrefix(name, "TestParity/"), o.Kernel, gbs, strings.Join(errs, " "))
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// skipOrFail skips with the reason, or fails under STRATA_REQUIRE_GPU=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("STRATA_REQUIRE_GPU") == "1" {
		t.Fatalf("STRATA_REQUIRE_GPU=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// codeObjects finds the code-object directory and the targets it has files for.
func codeObjects(t *testing.T) (string, []string) {
	t.Helper()
	dir := os.Getenv("STRATA_CO_DIR")
	if dir == "" {
		dir = filepath.Join(moduleRoot(), "build", "co")
	}
	var have []string
	for _, target := range abi.TargetNames() {
		for _, co := range abi.CodeObjects {
			if co.Target != target {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, co.Path)); err == nil {
				have = append(have, target)
				break
			}
		}
	}
	if len(have) == 0 {
		skipOrFail(t, "no code objects under %s (set STRATA_CO_DIR or run `just co`)", dir)
	}
	return dir, have
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() string {
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// openDevice selects a device (STRATA_DEVICE, like --device) among those with code
// objects, or skips naming why none is usable.
func openDevice(t *testing.T, have []string) (*gpu.Device, string) {
	t.Helper()
	req := gpu.Request{Device: os.Getenv("STRATA_DEVICE"), Have: have}
	l, err := gpu.Enumerate()
	if err != nil {
		skipOrFail(t, "%v", err)
	}
	ch, err := gpu.Select(l.Devices, req)
	if err != nil {
		skipOrFail(t, "%v (%v)", err, errors.Join(l.Problems()...))
	}
	dev, err := gpu.Open(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	t.Logf("device %s: %s, %s, %s", dev.Info().ID(), dev.Info().Name, dev.Info().Arch, dev.Info().PCIBusID)
	return dev, ch.Target
}

// runSeed is STRATA_SEED or a fresh seed, logged either way.
func runSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_SEED=%q is not an unsigned integer", s)
		}
		t.Logf("seed %d (from STRATA_SEED)", v)
		return v
	}
	v := rand.Uint64()
	t.Logf("seed %d (replay: STRATA_SEED=%d)", v, v)
	return v
}

// caseRNG derives a subtest's generator from the run seed and the subtest name, so
// one subtest replays alone under -run with the same inputs.
func caseRNG(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
