package parity

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestMmvqRmsMatchesRowHostSim: the norm an mmvq _rms kernel folds in gives rmsnorm_row
// addq81's bits — x + r, the normed row and its Q8_1 bytes, bit for bit — when both
// generated sources run in the host simulation (one compiler, one set of flags for both:
// what differs can only be the order of the operations, which the fold must keep). The GPU
// counterpart is model/gpu TestGPUNormFuse (whole decode tokens, with and without the fold).
func TestMmvqRmsMatchesRowHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	src, err := os.ReadFile(filepath.Join(root, "kernels", "out", target, "mmvq.cu"))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := mmvqHostSimSource(src)
	if err != nil {
		t.Fatal(err)
	}
	mbin := buildHostSimSource(t, cxx, root, "mmvq", sim, prelude, "-O1", "-DHOSTSIM_TRANSLATE_MEMORY")
	rowPrelude := []byte(strings.Replace(string(prelude), "#define __shared__\n", "#define __shared__ static\n", 1))
	rbin := buildHostSim(t, cxx, root, target, "rmsnorm_row", rowPrelude, "-O1")
	for _, n := range []int{2048, 4096, 256} {
		for _, typ := range []string{"f16_g4", "bf16_g4", "q80_g3"} {
			sym := "strata_mmvq_" + typ + "_rms"
			if co, _ := abi.Find(target, "mmvq"); !hasSymbol(co, sym) {
				t.Fatalf("%s: no %s", target, sym)
			}
			rng := rand.New(rand.NewPCG(uint64(n), 11))
			x, r, w := rmsnormInputs(rng, 1, n, n)
			const eps = 1e-6
			// rmsnorm_row addq81, one row.
			hr := simHarness(t, rbin, "rmsnorm_row", "strata_rmsnorm_row_addq81")
			rowOut := func(h *Harness, launch func(in []Buf, outs []Buf) ([][]byte, error)) [][]byte {
				in, err := h.moInputs(f32Bytes(x), f32Bytes(r), f32Bytes(w))
				if err != nil {
					t.Fatal(err)
				}
				outs := make([]Buf, 3)
				for i, nb := range []int{4 * n, 4 * n, n / 32 * 36} {
					if outs[i], err = h.Output(nb); err != nil {
						t.Fatal(err)
					}
				}
				got, err := launch(in, outs)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			want := rowOut(hr, func(in, outs []Buf) ([][]byte, error) {
				fn, err := hr.Mod.Func("strata_rmsnorm_row_addq81")
				if err != nil {
					return nil, err
				}
				a := abi.RmsnormRowArgs{X: in[0].Ptr(), R: in[1].Ptr(), W: in[2].Ptr(), Xo: outs[0].Ptr(), Y: outs[1].Ptr(), Q: outs[2].Ptr(),
					N: int32(n), Rows: 1, Heads: 1, TokStride: int32(n), HeadStride: int32(n), Eps: eps}
				got, _, err := hr.Run(fn, gpu.Dim3{X: 1, Y: 1, Z: 1}, moBlock(abi.RmsnormRowThreads), a.Bytes(), outs...)
				return got, err
			})
			hr.Close()
			hm := simHarness(t, mbin, "mmvq", sym)
			const rows = 24 // the lead block and others that keep their row in LDS only
			got := rowOut(hm, func(in, outs []Buf) ([][]byte, error) {
				fn, err := hm.Mod.Func(sym)
				if err != nil {
					return nil, err
				}
				dw, err := hm.Input(make([]byte, rows*2*n)) // zero weights (≥ any type's row bytes)
				if err != nil {
					return nil, err
				}
				dy, err := hm.Output(4 * rows)
				if err != nil {
					return nil, err
				}
				a := abi.MmvqArgs{W: dw.Ptr(), Y: dy.Ptr(), Rows: rows, K: int32(n), Ncols: 1, XColStride: int32(n), YColStride: rows, Prefetch: 2,
					NormN: int32(n), NormEps: eps, NormX: in[0].Ptr(), NormR: in[1].Ptr(), NormW: in[2].Ptr(), NormXo: outs[0].Ptr(), NormY: outs[1].Ptr(), NormQ: outs[2].Ptr()}
				got, _, err := hm.Run(fn, gpu.Dim3{X: 2, Y: 1, Z: 1}, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, a.Bytes(), append(outs, dy)...)
				return got, err
			})
			hm.Close()
			for i, what := range []string{"x + r", "y", "q"} {
				if rep := CompareExact(got[i], want[i]); rep.Mismatch > 0 {
					t.Errorf("%s n=%d: %s: %d of %d bytes differ from rmsnorm_row addq81's, first %s", sym, n, what, rep.Mismatch, rep.N, rep.Worst)
				}
			}
		}
	}
}

// hasSymbol reports whether code object co has a kernel named sym.
func hasSymbol(co abi.CodeObject, sym string) bool {
	_, ok := co.Symbol(strings.TrimPrefix(sym, "strata_"+co.Family+"_"))
	return ok
}
