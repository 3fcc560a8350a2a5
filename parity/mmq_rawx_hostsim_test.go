package parity

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
)

// TestMmqRawXSameBits runs mmq8x4n and mmq8x4v (mmq8x4n with raw activation steps:
// kernels/prefill.go mmqRawX) in the host simulation on the same inputs and requires every
// written output and every hooked group sum to be the same bits: mmq8x4v claims mmq8x4n's
// staged integers, d and fold order (and so its bounds), which the bounds alone would not
// catch a departure from (a fragment one token or one word off would still be near for
// smooth data only by chance, but a swapped d of another token in the same segment could
// pass). 70 rows (a partial row tile), 130 tokens (a partial token tile: tokens past the
// tile stage token 0's step), K = 512 (4 segments); the activation stride is padded by 4
// blocks or not (both families read it; mmq8x4v needs a multiple of 4: kernels.MmqXAlign).
func TestMmqRawXSameBits(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	const fa, fb = "mmq8x4n", "mmq8x4v"
	dims := []int{70, 130, 512}
	bins := map[string]string{}
	for _, fam := range []string{fa, fb} {
		bins[fam] = buildHostSim(t, cxx, root, target, fam, prelude, "-O0")
	}
	for _, typ := range []string{"iq2xs", "iq1m"} {
		t.Run(typ, func(t *testing.T) {
			seed := runSeed(t)
			out := map[string][2][]byte{}
			var rows, tokens, ldy int
			for _, fam := range []string{fa, fb} {
				co, ok := abi.Find(target, fam)
				if !ok {
					t.Fatalf("no %s code object for %s", fam, target)
				}
				spec, _ := kernels.LookupSpec(fam)
				sym := ""
				for _, v := range co.Variants {
					if variantValues(spec, v.Name)["type"] == typ {
						sym = v.Symbol
					}
				}
				if sym == "" {
					t.Fatalf("%s has no %s variant on %s", fam, typ, target)
				}
				h := simHarness(t, bins[fam], fam, sym)
				qt, bm, bn, err := mmqVariant(fam, sym)
				if err != nil {
					t.Fatal(err)
				}
				in, err := newMmqInputsSeg(qt, dims, kernels.MmqXSeg(fam), kernels.MmqXAlign(fb), rand.New(rand.NewPCG(seed, 7)))
				if err != nil {
					t.Fatal(err)
				}
				fn, err := h.Mod.Func(sym)
				if err != nil {
					t.Fatal(err)
				}
				var r [2][]byte
				for i, hook := range []int{-1, in.hook} {
					r[i], _, err = in.launch(h, fn, bm, bn, mmqFamilyThreads(fam), hook)
					if err != nil {
						t.Fatalf("%s hook %d: %v", fam, hook, err)
					}
				}
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
				out[fam] = r
				rows, tokens, ldy = in.rows, in.tokens, in.ldy
			}
			for i, what := range []string{"y", "isum"} {
				a, b := out[fa][i], out[fb][i]
				diff := 0
				for tk := 0; tk < tokens; tk++ {
					for r := 0; r < rows; r++ {
						o := 4 * (tk*ldy + r)
						if string(a[o:o+4]) != string(b[o:o+4]) {
							if diff == 0 {
								t.Errorf("%s token %d row %d: %s % x, %s % x", what, tk, r, fa, a[o:o+4], fb, b[o:o+4])
							}
							diff++
						}
					}
				}
				if diff > 0 {
					t.Errorf("%s: %d of %d outputs differ (seed %d)", what, diff, rows*tokens, seed)
				}
			}
		})
	}
}
