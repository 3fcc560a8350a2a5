package quant

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactByDecoding is an independent exact dot: decode both rows to float64 (exact)
// and sum the products in big.Float, rounding once.
func exactByDecoding(t *testing.T, wt Type, w []byte, at Type, a []byte, k int) float64 {
	t.Helper()
	wd, ad := make([]float64, k), make([]float64, k)
	if err := DecodeRow64(wt, w, wd); err != nil {
		t.Fatal(err)
	}
	if err := DecodeRow64(at, a, ad); err != nil {
		t.Fatal(err)
	}
	acc := new(big.Float).SetPrec(2048)
	for i := range wd {
		p := new(big.Float).SetPrec(2048).SetFloat64(wd[i])
		p.Mul(p, new(big.Float).SetFloat64(ad[i]))
		acc.Add(acc, p)
	}
	f, _ := acc.Float64()
	return f
}

// TestDotExactRandom checks DotCPU and DotGPU's exact values against decoding both
// operands and summing exactly, on random valid blocks of every weight type.
func TestDotExactRandom(t *testing.T) {
	for _, wt := range WeightTypes() {
		t.Run(wt.String(), func(t *testing.T) {
			seed := uint64(wt) * 7919
			rng := rand.New(rand.NewPCG(seed, 1))
			for iter := 0; iter < 6; iter++ {
				k := 256 * (1 + rng.IntN(4))
				w, err := RandomRow(wt, k, rng)
				if err != nil {
					t.Fatal(err)
				}
				x := RandomActivations(k, rng)
				vt := wt.vecDotType()
				act := make([]byte, mustRowBytes(t, vt, k))
				if err := Quantize(vt, x, act); err != nil {
					t.Fatal(err)
				}
				d, err := DotCPU(wt, w, act)
				if err != nil {
					t.Fatal(err)
				}
				want := exactByDecoding(t, wt, w, vt, act, k)
				if d.Exact != want {
					t.Fatalf("seed %d iter %d: DotCPU exact %.17g, by decoding %.17g", seed, iter, d.Exact, want)
				}
				l1 := l1Norm(t, wt, w, vt, act, k)
				if e := math.Abs(float64(d.GGML)-d.Exact) / l1; e > 1e-5 {
					t.Fatalf("seed %d iter %d: DotCPU ggml %g vs exact %g: %.3g of l1", seed, iter, d.GGML, d.Exact, e)
				}
				if wt == F16 || wt == BF16 {
					if _, err := DotGPU(wt, w, act); err == nil {
						t.Fatal("DotGPU accepted a float weight type")
					}
					continue
				}
				q81 := make([]byte, k/32*36)
				if err := QuantizeQ8_1GPU(x, q81); err != nil {
					t.Fatal(err)
				}
				g, err := DotGPU(wt, w, q81)
				if err != nil {
					t.Fatal(err)
				}
				if want := exactByDecoding(t, wt, w, Q8_1, q81, k); g.Exact != want {
					t.Fatalf("seed %d iter %d: DotGPU exact %.17g, by decoding %.17g", seed, iter, g.Exact, want)
				}
				l1 = l1Norm(t, wt, w, Q8_1, q81, k)
				if e := math.Abs(float64(g.GGML)-g.Exact) / l1; e > 1e-4 {
					t.Fatalf("seed %d iter %d: DotGPU ggml %g vs exact %g: %.3g of l1", seed, iter, g.GGML, g.Exact, e)
				}
			}
		})
	}
}

func (t Type) vecDotType() Type { in, _ := Lookup(t); return in.VecDotType }

func mustRowBytes(t *testing.T, typ Type, k int) int {
	t.Helper()
	n, err := typ.RowBytes(k)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func l1Norm(t *testing.T, wt Type, w []byte, at Type, a []byte, k int) float64 {
	wd, ad := make([]float64, k), make([]float64, k)
	if DecodeRow64(wt, w, wd) != nil || DecodeRow64(at, a, ad) != nil {
		t.Fatal("decode failed")
	}
	s := 1e-300
	for i := range wd {
		s += math.Abs(wd[i] * ad[i])
	}
	return s
}

// oneBlockGPU builds a weight row of one 256-element block and a Q8_1 activation with
// d = 1 whose only nonzero quant is q[0] = 1, so every dot reads element 0 alone.
func oneBlockGPUAct() []byte {
	a := make([]byte, 8*36)
	binary.LittleEndian.PutUint16(a[0:], 0x3c00) // d = 1
	a[4] = 1
	return a
}

// TestGPUTruncation checks ggml-cuda's truncating MMVQ arithmetic (quant-formats.md
// §5.7–5.8) on hand-computed cases.
func TestGPUTruncation(t *testing.T) {
	findGrid := func(n int, get func(int) uint64, b byte) int {
		for i := 0; i < n; i++ {
			if byte(get(i)) == b {
				return i
			}
		}
		t.Fatalf("no grid entry with first byte %d", b)
		return 0
	}
	t.Run("iq2_xs", func(t *testing.T) {
		// d = 1, scale nibbles 0 (multiplier 1), element 0 = grid byte 25, sign +.
		// Exact: 1·(2·0+1)/8·25 = 3.125. ggml-cuda: sumi0 = 25, ls = 0:
		// (0 + 0 + 25/2)/4 = 12/4 = 3.
		w := make([]byte, 74)
		binary.LittleEndian.PutUint16(w[0:], 0x3c00)
		idx := findGrid(512, func(i int) uint64 { return iq2xsGrid[i] }, 25)
		binary.LittleEndian.PutUint16(w[2:], uint16(idx))
		d, err := DotGPU(IQ2_XS, w, oneBlockGPUAct())
		if err != nil {
			t.Fatal(err)
		}
		if d.Exact != 3.125 || d.GGML != 3 {
			t.Fatalf("got exact %g ggml %g, want 3.125 and 3", d.Exact, d.GGML)
		}
	})
	t.Run("iq3_xxs", func(t *testing.T) {
		// d = 1, scale 0 (multiplier 1/4), element 0 = grid byte 62, sign +.
		// Exact: 62/4 = 15.5. ggml-cuda: (0·62 + 62/2)/2 = 31/2 = 15.
		w := make([]byte, 98)
		binary.LittleEndian.PutUint16(w[0:], 0x3c00)
		w[2] = byte(findGrid(256, func(i int) uint64 { return uint64(iq3xxsGrid[i]) }, 62))
		d, err := DotGPU(IQ3_XXS, w, oneBlockGPUAct())
		if err != nil {
			t.Fatal(err)
		}
		if d.Exact != 15.5 || d.GGML != 15 {
			t.Fatalf("got exact %g ggml %g, want 15.5 and 15", d.Exact, d.GGML)
		}
	})
}

func TestDotErrors(t *testing.T) {
	w := make([]byte, 144)
	act := make([]byte, 292)
	if _, err := DotCPU(Q4_K, w[:143], act); err == nil {
		t.Error("DotCPU accepted a partial block")
	}
	if _, err := DotCPU(Q4_K, w, act[:291]); err == nil {
		t.Error("DotCPU accepted a short activation")
	}
	if _, err := DotCPU(Q8_K, act, act); err == nil {
		t.Error("DotCPU accepted an activation type as weights")
	}
	if _, err := DotGPU(Q4_K, w, make([]byte, 7*36)); err == nil {
		t.Error("DotGPU accepted 7 q8_1 blocks for 256 weights")
	}
	// Non-finite scales give IEEE results, not a panic.
	binary.LittleEndian.PutUint16(w[0:], 0x7c00) // d = +Inf
	w[16] = 1
	a := make([]byte, 292)
	binary.LittleEndian.PutUint32(a[0:], math.Float32bits(1))
	a[4] = 1
	d, err := DotCPU(Q4_K, w, a)
	if err != nil || !math.IsInf(d.Exact, 0) && !math.IsNaN(d.Exact) {
		t.Errorf("Inf scale: got %+v, %v", d, err)
	}
}

// TestExactAcc compares the accumulator with big.Float on sums built to be hard:
// wide exponent ranges, heavy cancellation and exact ties.
func TestExactAcc(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 3000; iter++ {
		var e exactAcc
		ref := new(big.Float).SetPrec(4096)
		n := 1 + rng.IntN(40)
		var terms []float64
		for i := 0; i < n; i++ {
			a := math.Ldexp(rng.Float64()+0.5, rng.IntN(200)-100)
			b := math.Ldexp(rng.Float64()+0.5, rng.IntN(200)-100)
			if rng.IntN(2) == 0 {
				a = -a
			}
			switch rng.IntN(4) {
			case 0: // cancel an earlier product exactly
				if len(terms) >= 2 {
					j := rng.IntN(len(terms) / 2)
					a, b = -terms[2*j], terms[2*j+1]
				}
			case 1: // a tie: half an ulp of 1 next to 1
				a, b = 1, math.Ldexp(1, -53)
			}
			terms = append(terms, a, b)
			e.addProduct(a, b)
			p := new(big.Float).SetPrec(4096).SetFloat64(a)
			ref.Add(ref, p.Mul(p, new(big.Float).SetFloat64(b)))
		}
		want, _ := ref.Float64()
		if got := e.value(); got != want {
			t.Fatalf("iter %d: exactAcc %.17g, big.Float %.17g (terms %v)", iter, got, want, terms)
		}
	}
	var e exactAcc
	e.addProduct(1, 1)
	e.addProduct(math.Ldexp(1, -53), 1)  // exactly half an ulp of 1: ties to even (1)
	e.addProduct(math.Ldexp(1, -110), 1) // ... unless anything lies beyond
	if got := e.value(); got != 1+math.Ldexp(1, -52) {
		t.Fatalf("tie with a sticky bit: got %.17g", got)
	}
}
