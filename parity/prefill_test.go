package parity

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// Host-side tests of the prefill parity code: the declared bounds against their stated
// derivations, and the whole Run path of mmq and moe_prefill (argument structs, buffers,
// phases, references, comparisons) against Go emulations of the kernels on the memDriver —
// faithful ones must pass, ones wrong in a known way must fail with the right check.

// The bounds are the γ_n their derivations name (n roundings of 2⁻²⁴), rounded up.
func TestPrefillBoundsDerivations(t *testing.T) {
	for _, c := range []struct {
		b     Bound
		n     int
		slack float64
	}{
		{mmqY1, mmqMaxK / 32, 1}, {mmqY2, 2 * mmqMaxK / 32, 1},
		{mpY1, mpMaxHidden / 32, 1}, {mpY2, 2 * mpMaxHidden / 32, 1},
		{mpH, 2 * mpMaxHidden / 32, 1.05}, {mpOut, 8, 1},
	} {
		if want := c.slack * gammaN(c.n); c.b.MaxRowRel < want || c.b.MaxRowRel > 1.03*want {
			t.Errorf("%s bound %.4g: derivation gives %.4g·γ_%d = %.4g", c.b.Name, c.b.MaxRowRel, c.slack, c.n, want)
		}
	}
}

func le32i(a []byte, o int) int    { return int(int32(binary.LittleEndian.Uint32(a[o:]))) }
func le64u(a []byte, o int) uint64 { return binary.LittleEndian.Uint64(a[o:]) }

// fmaf is an f32 fma (the float64 fma is exact before its rounding; the second rounding
// to f32 can differ from a true f32 fma by one unit in rare ties, far inside the bounds).
func fmaf(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// emuDot is the kernel's f32 fold of one output: per group one fma of the exact integer
// main sum, plus the Q4_K min term.
func emuDot(w *intRows, r int, x *q81Rows, tk int, spoilMin bool) float32 {
	var acc float32
	for g := 0; g < w.ng; g++ {
		lo, hi := groupInt(w, r, x, tk, g)
		dx := float32(x.d[tk*x.k/32+g])
		acc = fmaf(float32(w.base[r*w.ng+g])*dx, float32(lo+hi), acc)
		if om := w.offMult[r*w.ng+g]; om != 0 && !spoilMin {
			acc = fmaf(float32(w.offBase[r*w.ng+g])*dx, float32(int64(om)*x.sum[tk*x.k/32+g]), acc)
		}
	}
	return acc
}

// emuMmq emulates strata_mmq_<type>_*; spoil 1 adds one to the hooked integer sum of
// output 0, 2 drops the Q4_K min term, 3 leaves the last output unwritten.
func emuMmq(t quant.Type, spoil int) func(*memDriver, []byte) {
	return func(d *memDriver, a []byte) {
		rows, k, tokens, xrb, ldy, hook := le32i(a, 24), le32i(a, 28), le32i(a, 32), le32i(a, 36), le32i(a, 40), le32i(a, 44)
		rb, _ := t.RowBytes(k)
		wi, err := newIntRows(t, d.mem(le64u(a, 0), rows*rb), rows, k)
		if err != nil {
			panic(err)
		}
		xi := newQ81Rows(d.mem(le64u(a, 8), tokens*xrb*36), tokens, k, xrb)
		y := d.mem(le64u(a, 16), 4*((tokens-1)*ldy+rows))
		for tk := 0; tk < tokens; tk++ {
			for r := 0; r < rows; r++ {
				if spoil == 3 && tk == tokens-1 && r == rows-1 {
					continue
				}
				var bits uint32
				if hook >= 0 {
					lo, hi := groupInt(wi, r, xi, tk, hook)
					v := int32(lo + hi)
					if spoil == 1 && tk == 0 && r == 0 {
						v++
					}
					bits = uint32(v)
				} else {
					bits = math.Float32bits(emuDot(wi, r, xi, tk, spoil == 2))
				}
				binary.LittleEndian.PutUint32(y[4*(tk*ldy+r):], bits)
			}
		}
	}
}

func TestMmqEmulated(t *testing.T) {
	spec, _ := kernels.LookupSpec("mmq")
	fam := families["mmq"]
	for _, tc := range []struct {
		typ   quant.Type
		spoil int
		want  string
	}{
		{quant.Q8_0, 0, ""}, {quant.Q4_K, 0, ""}, {quant.IQ3_S, 0, ""}, {quant.Q6_K, 0, ""}, {quant.IQ1_M, 0, ""},
		{quant.Q2_0, 0, ""}, {quant.IQ2_XS, 0, ""}, {quant.IQ3_XXS, 0, ""},
		{quant.Q8_0, 1, "isum: 1 of"}, {quant.Q4_K, 2, "y: max row relative error"}, {quant.IQ3_S, 3, "did not write it|y: max row relative error"},
	} {
		var v kernels.Variant
		for _, x := range spec.AllVariants() {
			if mmqTypes[x.Values["type"]] == tc.typ && x.Values["op"] == "mma" && x.Values["tile"] == "r64t64" {
				v = x
			}
		}
		sym := spec.Symbol(v)
		for _, c := range []Case{{"rows=70,tokens=17,k=1120", []int{70, 17, 1120}}, {"rows=5,tokens=1,k=256", []int{5, 1, 256}}} {
			t.Run(v.Name+"/"+c.Name+"/spoil="+string(rune('0'+tc.spoil)), func(t *testing.T) {
				drv := newMemDriver(map[string]func(*memDriver, []byte){sym: emuMmq(tc.typ, tc.spoil)})
				dev := gpu.NewDevice(drv)
				mod, err := dev.LoadModule(gpu.CodeObject{Name: "mem/mmq", Target: "mem_1", Image: []byte{1}})
				if err != nil {
					t.Fatal(err)
				}
				h := &Harness{Dev: dev, Mod: mod}
				defer h.Close()
				_, err = runMmq(h, sym, c, fam.Bounds[v.Name], rand.New(rand.NewPCG(3, uint64(tc.typ))))
				switch {
				case tc.want == "" && err != nil:
					t.Fatalf("faithful emulation rejected: %v", err)
				case tc.want != "" && (err == nil || !containsAny(err.Error(), tc.want)):
					t.Fatalf("want an error containing %q, got %v", tc.want, err)
				}
			})
		}
	}
}

// containsAny reports whether s contains one of the |-separated alternatives.
func containsAny(s, alts string) bool {
	for _, a := range strings.Split(alts, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// emuMoe emulates strata_moe_prefill_<type>_*: spoil 1 swaps the first two list entries of
// expert 0, 2 flips the sign of one h, 3 skips a pair's weight in the combine, 4 reads the
// next expert's slot table entries (tables cases; the dense cases then pass).
func emuMoe(t quant.Type, spoil int) func(*memDriver, []byte) {
	return func(d *memDriver, a []byte) {
		phase, tokens, k, E := le32i(a, 120), le32i(a, 124), le32i(a, 128), le32i(a, 132)
		H, F, xrb, ldo := le32i(a, 136), le32i(a, 140), le32i(a, 144), le32i(a, 148)
		np := tokens * k
		switch phase {
		case 0:
			ids := bytesInt32(d.mem(le64u(a, 8), 4*np))
			sched, list := mpRouteRef(ids, E, 64, (np+63)/64+E)
			if spoil == 1 && sched[0] >= 2 {
				o := sched[E]
				list[o], list[o+1] = list[o+1], list[o]
			}
			n := 2*E + 1 + 2*int(sched[2*E]) // the kernel writes nothing past its tiles
			copy(d.mem(le64u(a, 56), 4*n), int32Bytes(sched[:n]))
			copy(d.mem(le64u(a, 64), 4*np), int32Bytes(list))
		case 1, 2:
			K, rows, matB := H, F, int(int64(le64u(a, 104)))
			if phase == 2 {
				K, rows, matB = F, H, int(int64(le64u(a, 112)))
			}
			rb, _ := t.RowBytes(K)
			sched := bytesInt32(d.mem(le64u(a, 56), 4*(2*E+1)))
			list := bytesInt32(d.mem(le64u(a, 64), 4*np))
			var xi *q81Rows
			if phase == 1 {
				xi = newQ81Rows(d.mem(le64u(a, 0), tokens*xrb*36), tokens, H, xrb)
			} else {
				xi = newQ81Rows(d.mem(le64u(a, 72), np*F/32*36), np, F, F/32)
			}
			for e := 0; e < E; e++ {
				if sched[e] == 0 {
					continue
				}
				mats := []uint64{le64u(a, 24), le64u(a, 32)}
				if phase == 2 {
					mats = []uint64{le64u(a, 40)}
				}
				var ws []*intRows
				for m, base := range mats {
					addr := base + uint64(e*matB)
					if tabs := le64u(a, 48); tabs != 0 { // slot tables [3][E]
						x := e
						if spoil == 4 { // the next expert's table entry
							x = (e + 1) % E
						}
						addr = le64u(d.mem(tabs+uint64(8*((m+2*(phase-1))*E+x)), 8), 0)
					}
					w, err := newIntRows(t, d.mem(addr, rows*rb), rows, K)
					if err != nil {
						panic(err)
					}
					ws = append(ws, w)
				}
				for i := sched[E+e]; i < sched[E+e]+sched[e]; i++ {
					p := int(list[i])
					if phase == 2 {
						yp := d.mem(le64u(a, 88)+uint64(4*p*H), 4*H)
						for r := 0; r < H; r++ {
							binary.LittleEndian.PutUint32(yp[4*r:], math.Float32bits(emuDot(ws[0], r, xi, p, false)))
						}
						continue
					}
					hf := make([]float32, F)
					for f := 0; f < F; f++ {
						g, u := emuDot(ws[0], f, xi, p/k, false), emuDot(ws[1], f, xi, p/k, false)
						ex := float32(math.Exp(float64(-g)))
						hf[f] = g / (1 + ex) * u
					}
					if spoil == 2 && p == 0 {
						hf[0] = -hf[0] + 1
					}
					copy(d.mem(le64u(a, 80)+uint64(4*p*F), 4*F), f32Bytes(hf))
					if err := quant.QuantizeQ8_1GPU(hf, d.mem(le64u(a, 72)+uint64(p*F/32*36), F/32*36)); err != nil {
						panic(err)
					}
				}
			}
		case 3:
			wts := bytesF32(d.mem(le64u(a, 16), 4*np))
			yp := bytesF32(d.mem(le64u(a, 88), 4*np*H))
			out := d.mem(le64u(a, 96), 4*((tokens-1)*ldo+H))
			for tk := 0; tk < tokens; tk++ {
				for c := 0; c < H; c++ {
					acc := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(tk*ldo+c):]))
					for s := 0; s < k; s++ {
						if spoil == 3 && tk == 0 && s == 0 {
							continue
						}
						acc = fmaf(wts[tk*k+s], yp[(tk*k+s)*H+c], acc)
					}
					binary.LittleEndian.PutUint32(out[4*(tk*ldo+c):], math.Float32bits(acc))
				}
			}
		}
	}
}

func TestMoePrefillEmulated(t *testing.T) {
	spec, _ := kernels.LookupSpec("moe_prefill")
	fam := families["moe_prefill"]
	for _, tc := range []struct {
		typ   quant.Type
		spoil int
		want  string
	}{
		{quant.Q8_0, 0, ""}, {quant.Q4_K, 0, ""}, {quant.IQ1_M, 0, ""},
		{quant.Q8_0, 1, "list: "}, {quant.Q8_0, 2, "h: max row relative error"}, {quant.Q4_K, 3, "out: max row relative error"},
		{quant.Q4_K, 4, "h: max row relative error"},
	} {
		var v kernels.Variant
		for _, x := range spec.AllVariants() {
			if mmqTypes[x.Values["type"]] == tc.typ && x.Values["op"] == "dp4a" {
				v = x
			}
		}
		sym := spec.Symbol(v)
		for _, c := range []Case{
			{"tokens=9,k=2,experts=6,hidden=256,ff=256,all-to-0", []int{9, 2, 6, 256, 256, 1}},
			{"tokens=3,k=3,experts=5,hidden=288,ff=288", []int{3, 3, 5, 288, 288, 0}},
			{"tokens=8,k=3,experts=7,hidden=256,ff=256,tables", []int{8, 3, 7, 256, 256, 0, 1}},
		} {
			t.Run(v.Name+"/"+c.Name+"/spoil="+string(rune('0'+tc.spoil)), func(t *testing.T) {
				drv := newMemDriver(map[string]func(*memDriver, []byte){sym: emuMoe(tc.typ, tc.spoil)})
				dev := gpu.NewDevice(drv)
				mod, err := dev.LoadModule(gpu.CodeObject{Name: "mem/moe", Target: "mem_1", Image: []byte{1}})
				if err != nil {
					t.Fatal(err)
				}
				h := &Harness{Dev: dev, Mod: mod}
				defer h.Close()
				_, err = runMoePrefill(h, sym, c, fam.Bounds[v.Name], rand.New(rand.NewPCG(5, uint64(tc.typ))))
				if tc.spoil == 4 && len(c.Dims) < 7 { // no tables: the spoil has nothing to spoil
					if err != nil {
						t.Fatalf("faithful emulation rejected: %v", err)
					}
					return
				}
				switch {
				case tc.want == "" && err != nil:
					t.Fatalf("faithful emulation rejected: %v", err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Fatalf("want an error containing %q, got %v", tc.want, err)
				}
			})
		}
	}
}
