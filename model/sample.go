package model

import (
	"math"
	"math/rand/v2"
	"sort"
)

// SamplerConfig selects how the next token is drawn from the logits, with llama.cpp's
// meanings: repetition penalty over the last RepeatLastN tokens, then top-k, top-p,
// min-p, temperature, and a seeded draw. Temp ≤ 0 is greedy (argmax after the penalty).
type SamplerConfig struct {
	Temp          float64
	TopK          int     // ≤ 0: off
	TopP          float64 // ≥ 1: off
	MinP          float64 // ≤ 0: off
	RepeatPenalty float64 // 1: off
	RepeatLastN   int
	Seed          uint64
}

// Sampler draws tokens; it remembers the tokens it was told about for the penalty.
type Sampler struct {
	cfg     SamplerConfig
	rng     *rand.Rand
	history []int32
	cand    []cand
}

type cand struct {
	id int32
	l  float64
}

// NewSampler returns a sampler; equal configs (with the same seed) draw the same tokens.
func NewSampler(cfg SamplerConfig) *Sampler {
	return &Sampler{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed))}
}

// Accept records a token of the sequence (prompt or generated) for the repetition penalty.
func (s *Sampler) Accept(id int32) { s.history = append(s.history, id) }

// Sample picks the next token from logits (which it does not modify).
func (s *Sampler) Sample(logits []float32) int32 {
	c := s.cfg
	pen := map[int32]bool{}
	if c.RepeatPenalty != 1 && c.RepeatPenalty > 0 && c.RepeatLastN != 0 {
		h := s.history
		if c.RepeatLastN > 0 && len(h) > c.RepeatLastN {
			h = h[len(h)-c.RepeatLastN:]
		}
		for _, id := range h {
			pen[id] = true
		}
	}
	logit := func(id int32) float64 {
		l := float64(logits[id])
		if pen[id] {
			// llama.cpp: divide positive logits, multiply negative ones.
			if l > 0 {
				l /= c.RepeatPenalty
			} else {
				l *= c.RepeatPenalty
			}
		}
		return l
	}
	if c.Temp <= 0 {
		best := int32(0)
		bl := math.Inf(-1)
		for i := range logits {
			if l := logit(int32(i)); l > bl {
				best, bl = int32(i), l
			}
		}
		return best
	}
	cs := s.cand[:0]
	better := func(a, b cand) bool { return a.l > b.l || (a.l == b.l && a.id < b.id) }
	if k := c.TopK; k > 0 && k < len(logits) {
		// Keep the k best in a sorted slice; most logits lose to its last entry at once.
		for i := range logits {
			x := cand{int32(i), logit(int32(i))}
			if len(cs) == k && !better(x, cs[k-1]) {
				continue
			}
			if len(cs) < k {
				cs = append(cs, x)
			} else {
				cs[k-1] = x
			}
			for j := len(cs) - 1; j > 0 && better(cs[j], cs[j-1]); j-- {
				cs[j], cs[j-1] = cs[j-1], cs[j]
			}
		}
	} else {
		for i := range logits {
			cs = append(cs, cand{int32(i), logit(int32(i))})
		}
		sort.Slice(cs, func(a, b int) bool { return better(cs[a], cs[b]) })
	}
	s.cand = cs
	cs, probs := c.topPMinP(cs)
	r := s.rng.Float64()
	for i, p := range probs {
		r -= p
		if r < 0 {
			return cs[i].id
		}
	}
	return cs[len(cs)-1].id
}

// topPMinP cuts sorted candidates cs by top-p, then min-p, on their probabilities at
// temperature 1 (llama.cpp applies the temperature after these filters), and returns
// what is left with its probabilities at c.Temp.
func (c SamplerConfig) topPMinP(cs []cand) ([]cand, []float64) {
	probs := softmaxOf(cs, 1)
	if c.TopP < 1 && c.TopP > 0 {
		var cum float64
		for i, p := range probs {
			cum += p
			if cum >= c.TopP {
				cs = cs[:i+1]
				break
			}
		}
	}
	if c.MinP > 0 {
		limit := probs[0] * c.MinP
		n := 1
		for n < len(cs) && probs[n] >= limit {
			n++
		}
		cs = cs[:n]
	}
	probs = softmaxOf(cs, c.Temp)
	return cs, probs
}

// softmaxOf returns the probabilities of sorted candidates at temperature t.
func softmaxOf(cs []cand, t float64) []float64 {
	out := make([]float64, len(cs))
	var sum float64
	for i, c := range cs {
		out[i] = math.Exp((c.l - cs[0].l) / t)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}
