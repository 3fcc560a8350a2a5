package parity

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
)

// TestMmqBOnceSameBits runs mmq8x4n and mmq8x4g (mmq8x4n with each group's token fragments
// loaded once a warp: kernels/prefill.go mmqBOnce) in the host simulation on the same inputs
// and requires every written output and every hooked group sum of mmq8x4g to be mmq8x4n's
// bits: it claims mmq8x4n's staged integers, segment sums and fold
// order (and so its bounds), which the bounds alone would not catch a departure from (a
// fragment of the other row fragment's tokens, or a fold by mul + add, stays within them
// for smooth data). 70 rows (a partial row tile), 130 tokens (a partial token tile), K = 512
// (4 segments).
func TestMmqBOnceSameBits(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	fams := []string{"mmq8x4n", "mmq8x4g"}
	dims := []int{70, 130, 512}
	bins := map[string]string{}
	for _, fam := range fams {
		bins[fam] = buildHostSim(t, cxx, root, target, fam, prelude, "-O0")
	}
	for _, typ := range []string{"iq2xs", "iq1m"} {
		t.Run(typ, func(t *testing.T) {
			seed := runSeed(t)
			out := map[string][2][]byte{}
			var rows, tokens, ldy int
			for _, fam := range fams {
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
				in, err := newMmqInputsSeg(qt, dims, kernels.MmqXSeg(fam), rand.New(rand.NewPCG(seed, 7)))
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
			for _, fb := range fams[1:] {
				fa := fams[0]
				for i, what := range []string{"y", "isum"} {
					a, b := out[fa][i], out[fb][i]
					diff := 0
					for tk := 0; tk < tokens; tk++ {
						for r := 0; r < rows; r++ {
							o := 4 * (tk*ldy + r)
							if string(a[o:o+4]) != string(b[o:o+4]) {
								if diff == 0 {
									t.Errorf("%s %s token %d row %d: %s % x, %s % x", fb, what, tk, r, fa, a[o:o+4], fb, b[o:o+4])
								}
								diff++
							}
						}
					}
					if diff > 0 {
						t.Errorf("%s %s: %d of %d outputs differ (seed %d)", fb, what, diff, rows*tokens, seed)
					}
				}
			}
		})
	}
}
