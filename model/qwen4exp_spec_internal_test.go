package model

import (
	"math"
	"testing"
)

// TestSpeculativeRuleKeepsDistribution: drawing d from the draft distribution q, then
// accepting it with probability min(1, p(d)/q(d)) or else emitting a draw from
// norm(max(0, p − q)), must emit tokens distributed as p (the standard rule's guarantee).
// 200k seeded draws over 5 ids: each frequency is checked within 5 standard errors.
func TestSpeculativeRuleKeepsDistribution(t *testing.T) {
	p := []float32{2.0, 1.0, 0.5, -1.0, 0.0}
	q := []float32{0.0, 1.5, 1.5, 0.5, -2.0}
	for _, cfg := range []SamplerConfig{
		{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: 1},
		{Temp: 0.7, TopK: 3, TopP: 1, RepeatPenalty: 1, Seed: 2}, // filters: p and q differ in support
	} {
		sp := &Speculator{samp: NewSampler(cfg)}
		want := sp.samp.dist(p)
		const n = 200000
		count := make([]int, len(p))
		accepted := 0
		for i := 0; i < n; i++ {
			d := sp.samp.Sample(q)
			ok, corr := sp.accept(p, q, d)
			if ok {
				accepted++
				count[d]++
			} else {
				count[corr]++
			}
		}
		for id := range p {
			pw := want[int32(id)]
			got := float64(count[id]) / n
			se := math.Sqrt(pw*(1-pw)/n) + 1e-9
			if math.Abs(got-pw) > 5*se {
				t.Errorf("%+v: id %d emitted with frequency %.4f, p = %.4f (5 s.e. = %.4f)", cfg, id, got, pw, 5*se)
			}
		}
		t.Logf("%+v: acceptance %.3f, emitted %v", cfg, float64(accepted)/n, count)
	}
}
