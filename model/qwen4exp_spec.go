package model

import (
	"fmt"
	"math"
	"sort"
)

// SpecStats counts speculative decoding's work: verification passes, tokens drafted by the
// MTP head and drafts the main model accepted.
type SpecStats struct {
	Steps, Drafted, Accepted int
}

// AcceptRate is Accepted / Drafted (0 before any draft).
func (s SpecStats) AcceptRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Speculator generates with the MTP head drafting up to N tokens per step, verified by the
// main model in one pass over N+1 positions. Greedy sampling (Temp ≤ 0) accepts the
// longest prefix of drafts equal to the main model's argmax, so its output is exactly that
// of plain greedy decoding; sampled decoding uses the standard speculative rule (accept a
// draft d with probability min(1, p(d)/q(d)), else draw from norm(max(0, p − q))), whose
// tokens follow the main model's sampling distribution.
//
// Between steps the main model has processed positions 0..p, logits predicts x_{p+1},
// lastR is the pre-mixer stack of position p, and the MTP head has run cells 0..p−1.
type Speculator struct {
	s      *State
	n      int
	samp   *Sampler
	mask   func([]float32)
	logits []float32
	lastR  []float32
	forced int32 // a correction token already drawn for the next position, or -1
	Stats  SpecStats
	// LastDrafts are the tokens the last Next drafted (for inspection and tests).
	LastDrafts []int32
}

// NewSpeculator prefills prompt and prepares drafting of n tokens per step. mask, if not
// nil, is applied to every logit vector before sampling (e.g. to forbid padding ids). The
// sampler must not use a repetition penalty (drafts would need the penalty of tokens not
// yet accepted).
func (s *State) NewSpeculator(prompt []int32, n int, samp *Sampler, mask func([]float32)) (*Speculator, error) {
	if !s.m.HasMTP() {
		return nil, fmt.Errorf("model: %s has no MTP head to draft with (qwen4exp with nextn_predict_layers = 1)", s.m.src.Path())
	}
	if n < 1 {
		return nil, fmt.Errorf("model: draft length %d must be at least 1", n)
	}
	if c := samp.cfg; c.RepeatPenalty != 1 && c.RepeatPenalty > 0 && c.RepeatLastN != 0 {
		return nil, fmt.Errorf("model: speculative decoding does not support a repetition penalty (%g); use --repeat-penalty 1", c.RepeatPenalty)
	}
	if s.pos != 0 {
		return nil, fmt.Errorf("model: NewSpeculator needs a fresh state")
	}
	logits, err := s.ForwardQ4(prompt, false, nil)
	if err != nil {
		return nil, err
	}
	sp := &Speculator{s: s, n: n, samp: samp, mask: mask, logits: logits, forced: -1}
	HH := s.m.q4.cfg.HC * s.m.Cfg.Embd
	R := s.q4.preMixer
	sp.lastR = R[(len(prompt)-1)*HH:]
	if len(prompt) > 1 {
		// MTP cells 0..T-2 pair the stacks of positions 0..T-2 with the next prompt token.
		if _, _, err := s.MTPForward(R[:(len(prompt)-1)*HH], prompt[1:], false, nil); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// Next commits at least one token and returns the committed tokens in order: the token
// the main model's last logits give, then the accepted MTP drafts. Drafting stops where the
// context would overflow.
func (sp *Speculator) Next() ([]int32, error) {
	s := sp.s
	x := sp.first()
	n := min(sp.n, s.MaxCtx-s.pos-1) // verification covers positions p+1..p+1+n
	if n < 1 {
		return sp.verify(x, nil, nil)
	}
	// Draft: cell p pairs the main stacks of position p with x; later cells chain the MTP
	// layer's own stacks and drafts. Only cell p is kept (the rest ran on draft inputs).
	p := s.pos - 1
	drafts := make([]int32, 0, n)
	qs := make([][]float32, 0, n)
	R, tok := sp.lastR, x
	for k := 0; k < n; k++ {
		q, stacks, err := s.MTPForward(R, []int32{tok}, false, nil)
		if err != nil {
			return nil, err
		}
		d := sp.sample(q)
		drafts, qs = append(drafts, d), append(qs, q)
		R, tok = stacks, d
	}
	s.RewindMTP(p)
	sp.LastDrafts = drafts
	return sp.verify(x, drafts, qs)
}

// NextWithDrafts is Next with drafts from another source (prompt lookup, a test): the
// drafter is deterministic, so a sampled draft d is accepted with probability p(d) and a
// rejection draws from p without d. It verifies at most the speculator's draft length.
func (sp *Speculator) NextWithDrafts(drafts []int32) ([]int32, error) {
	x := sp.first()
	n := min(len(drafts), sp.n, sp.s.MaxCtx-sp.s.pos-1)
	return sp.verify(x, drafts[:max(n, 0)], nil)
}

// first is the token at position p+1: a correction drawn by the last rejection, else a
// draw from the main model's logits.
func (sp *Speculator) first() int32 {
	if sp.forced >= 0 {
		x := sp.forced
		sp.forced = -1
		return x
	}
	return sp.sample(sp.logits)
}

// verify runs x and the drafts through the main model in one pass, keeps the longest
// accepted prefix, and restores the invariant (state at the last committed position, MTP
// cells up to the one before it). qs are the draft logits (nil: deterministic drafts).
func (sp *Speculator) verify(x int32, drafts []int32, qs [][]float32) ([]int32, error) {
	s := sp.s
	HH := s.m.q4.cfg.HC * s.m.Cfg.Embd
	V := s.m.Vocab
	n := len(drafts)
	p := s.pos - 1
	snap := s.q4Save()
	L, err := s.ForwardQ4(append([]int32{x}, drafts...), true, nil)
	if err != nil {
		return nil, err
	}
	j := 0
	forced := int32(-1)
	for ; j < n; j++ {
		lj := L[j*V : (j+1)*V]
		if sp.mask != nil {
			sp.mask(lj)
		}
		var q []float32
		if qs != nil {
			q = qs[j]
		}
		if ok, corr := sp.accept(lj, q, drafts[j]); !ok {
			forced = corr
			break
		}
	}
	if n > 0 {
		sp.Stats.Steps++
		sp.Stats.Drafted += n
		sp.Stats.Accepted += j
	}
	out := append([]int32{x}, drafts[:j]...)
	var rows []float32
	if j == n {
		rows = s.q4.preMixer
		sp.logits = L[n*V : (n+1)*V]
	} else {
		// Roll back to position p and run the accepted tokens again (the recurrent states
		// cannot be un-stepped; the caches are truncated by position).
		s.q4Restore(snap)
		logits, err := s.ForwardQ4(out, false, nil)
		if err != nil {
			return nil, err
		}
		rows = s.q4.preMixer
		sp.logits = logits
	}
	sp.forced = forced
	// MTP cells p..p+j: the main stacks of positions p..p+j-1 ... paired with the next
	// committed token; cell p uses the stacks of position p (lastR) and x.
	if s.q4.mtpPos != p {
		s.RewindMTP(p)
	}
	cellR := append(append([]float32(nil), sp.lastR...), rows[:j*HH]...)
	if _, _, err := s.MTPForward(cellR, out, false, nil); err != nil {
		return nil, err
	}
	sp.lastR = append([]float32(nil), rows[j*HH:(j+1)*HH]...)
	return out, nil
}

// sample draws from logits with the sampler's settings.
func (sp *Speculator) sample(logits []float32) int32 {
	if sp.mask != nil {
		sp.mask(logits)
	}
	return sp.samp.Sample(logits)
}

// accept decides on draft d given the main model's logits p and the draft logits q: greedy
// accepts iff d is p's argmax; sampled accepts with probability min(1, p(d)/q(d)) and
// otherwise returns a correction drawn from norm(max(0, p − q)).
func (sp *Speculator) accept(p, q []float32, d int32) (bool, int32) {
	if sp.samp.cfg.Temp <= 0 {
		return sp.samp.Sample(p) == d, -1
	}
	pd := sp.samp.dist(p)
	var qd map[int32]float64
	if q != nil {
		qd = sp.samp.dist(q)
	} else {
		qd = map[int32]float64{d: 1} // a deterministic drafter: q is a point mass at d
	}
	if qd[d] > 0 && sp.samp.rng.Float64() < math.Min(1, pd[d]/qd[d]) {
		return true, -1
	}
	ids := make([]int32, 0, len(pd))
	var sum float64
	for id, pv := range pd {
		if r := pv - qd[id]; r > 0 {
			ids = append(ids, id)
			sum += r
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	if sum == 0 { // p == q on its support: any draw from p is exact
		return false, sp.samp.Sample(p)
	}
	r := sp.samp.rng.Float64() * sum
	for _, id := range ids {
		r -= pd[id] - qd[id]
		if r < 0 {
			return false, id
		}
	}
	return false, ids[len(ids)-1]
}

// dist is the distribution Sample draws from at Temp > 0 (top-k, top-p, min-p at
// temperature 1, then the temperature), as a sparse map of ids to probabilities.
func (s *Sampler) dist(logits []float32) map[int32]float64 {
	c := s.cfg
	cs := make([]cand, len(logits))
	for i, l := range logits {
		cs[i] = cand{int32(i), float64(l)}
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].l > cs[b].l || (cs[a].l == cs[b].l && cs[a].id < cs[b].id) })
	if k := c.TopK; k > 0 && k < len(cs) {
		cs = cs[:k]
	}
	cs, probs := c.topPMinP(cs)
	out := make(map[int32]float64, len(cs))
	for i, cd := range cs {
		out[cd.id] = probs[i]
	}
	return out
}
