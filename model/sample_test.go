package model

import (
	"math"
	"testing"

	"github.com/strata-hip/strata/quant"
)

func TestSamplerGreedyAndFilters(t *testing.T) {
	logits := []float32{1, 5, 3, 4.9, -2}
	if got := NewSampler(SamplerConfig{Temp: 0}).Sample(logits); got != 1 {
		t.Fatalf("greedy picked %d, want 1", got)
	}
	// top-k 1 at any temperature is greedy.
	s := NewSampler(SamplerConfig{Temp: 5, TopK: 1, Seed: 1})
	for i := 0; i < 50; i++ {
		if got := s.Sample(logits); got != 1 {
			t.Fatalf("top-k 1 picked %d", got)
		}
	}
	// min-p 0.5 keeps ids 1 (p1) and 3 (p1·e^-0.1 ≈ 0.9 p1); drops 2 (p1·e^-2 ≈ 0.14 p1).
	s = NewSampler(SamplerConfig{Temp: 1, MinP: 0.5, Seed: 2})
	seen := map[int32]int{}
	for i := 0; i < 400; i++ {
		seen[s.Sample(logits)]++
	}
	if seen[1] == 0 || seen[3] == 0 || len(seen) != 2 {
		t.Fatalf("min-p 0.5 drew %v, want only ids 1 and 3", seen)
	}
	// top-p 0.5: id 1 alone has p ≈ 0.5; cumulative reaches 0.5 at the first or second candidate.
	s = NewSampler(SamplerConfig{Temp: 1, TopP: 0.4, Seed: 3})
	for i := 0; i < 50; i++ {
		if got := s.Sample(logits); got != 1 {
			t.Fatalf("top-p 0.4 picked %d, want only 1", got)
		}
	}
	// Repeat penalty 10 on id 1 (logit 5 → 0.5) makes id 3 the greedy choice.
	s = NewSampler(SamplerConfig{Temp: 0, RepeatPenalty: 10, RepeatLastN: 64})
	s.Accept(1)
	if got := s.Sample(logits); got != 3 {
		t.Fatalf("greedy with penalty on 1 picked %d, want 3", got)
	}
}

// TestSamplerDistribution: with temperature 2 and no filters the empirical frequencies
// of 20000 seeded draws match softmax(l/2) within 5 standard errors (≤ 0.018 here).
func TestSamplerDistribution(t *testing.T) {
	logits := []float32{0, 1, 2, 0.5}
	s := NewSampler(SamplerConfig{Temp: 2, Seed: 42})
	const n = 20000
	count := make([]int, len(logits))
	for i := 0; i < n; i++ {
		count[s.Sample(logits)]++
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) / 2)
	}
	for i, l := range logits {
		p := math.Exp(float64(l)/2) / z
		got := float64(count[i]) / n
		if se := math.Sqrt(p * (1 - p) / n); math.Abs(got-p) > 5*se {
			t.Errorf("id %d: frequency %.4f, softmax %.4f (5σ = %.4f)", i, got, p, 5*se)
		}
	}
	// Same seed, same draws.
	a, b := NewSampler(SamplerConfig{Temp: 1, Seed: 7}), NewSampler(SamplerConfig{Temp: 1, Seed: 7})
	for i := 0; i < 100; i++ {
		if x, y := a.Sample(logits), b.Sample(logits); x != y {
			t.Fatalf("draw %d: %d vs %d with the same seed", i, x, y)
		}
	}
}

// TestFusedDotsMatchDecode: the fused single-row dots equal decode-then-dot up to float32
// rounding order (relative 1e-5 of Σ|w·x|), on rows quantized by the quant package.
func TestFusedDotsMatchDecode(t *testing.T) {
	const k = 512 // two super-blocks of the K formats
	x := make([]float32, k)
	w := make([]float32, k)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 3
		w[i] = float32(math.Cos(float64(i)*0.37)) * 0.1
	}
	for _, c := range []struct {
		typ quant.Type
		dot func([]byte, []float32) float32
	}{{quant.F32, dotF32}, {quant.Q8_0, dotQ8_0}, {quant.Q4_K, dotQ4K}, {quant.Q6_K, dotQ6K}} {
		rb, _ := c.typ.RowBytes(k)
		row := make([]byte, rb)
		if err := quant.Quantize(c.typ, w, row); err != nil {
			t.Fatal(err)
		}
		dec := make([]float32, k)
		if err := quant.DecodeRow(c.typ, row, dec); err != nil {
			t.Fatal(err)
		}
		var want, mag float64
		for i := range dec {
			want += float64(dec[i]) * float64(x[i])
			mag += math.Abs(float64(dec[i]) * float64(x[i]))
		}
		if got := c.dot(row, x); math.Abs(float64(got)-want) > 1e-5*mag {
			t.Errorf("%s: fused dot %g, decode-then-dot %g", c.typ, got, want)
		}
	}
}
