package model

import (
	"fmt"
	"math"
	"runtime/debug"
	"sort"
)

// q4Cache is the cache of one QSA layer: keys and values of every position, the raw
// indexer key of every position, and the pooled indexer key of every completed block
// (pooled keys depend only on the raw keys and the block start, so each is made once).
type q4Cache struct {
	k, v   []float32 // [pos][HeadsKV·HeadDim]
	ik     []float32 // [pos][IdxDim]
	pooled []float32 // [block][IdxDim]
}

// q4State is what a qwen4exp sequence keeps beyond State.pos.
type q4State struct {
	conv, ssm [][]float32 // per trunk layer (DeltaNet layers only): conv inputs, recurrent state
	attn      []q4Cache   // per trunk layer (QSA layers only)
	pleHist   []float32   // the last (PLEConv-1)·Ngram normalised PLE vectors N, oldest first, [n][HC·H]
	pleToks   []int32     // the last Ngram-1 token ids (EOS before the sequence start)
	preMixer  []float32   // pre-mixer stacks of the last Forward call, [T][HC·H]
	mtp       q4Cache     // the MTP layer's cache, one cell per position
	mtpPos    int         // MTP cells processed
}

// Q4Trace receives qwen4exp's intermediate values for the T tokens of one call, in the
// oracle's layouts: Layers [L+1][T·HC·H] (the 4-stream residual after the embedding and
// after each layer), BlockIO [L][4][T·H] (attention input and output, MoE input and output),
// Inject [L][2][T·HC], PLEOut [T·HC·H], PLERows [T][hash heads], Selected (QSA layer →
// per query the sorted key positions the indexer kept), Experts [L][T][k], FinalHidden
// [T·H] (the final mixer output).
type Q4Trace struct {
	Layers      [][]float32
	BlockIO     [][4][]float32
	Inject      [][2][]float32
	PLEOut      []float32
	PLERows     [][]uint64
	Selected    map[int][][]int
	Experts     [][][]int
	FinalHidden []float32
}

type q4LayerTrace struct {
	io       [4][]float32
	inject   [2][]float32
	selected [][]int
	experts  [][]int
}

func newQ4State(m *Model) *q4State {
	c, q := &m.Cfg, &m.q4.cfg
	st := &q4State{conv: make([][]float32, c.Layers), ssm: make([][]float32, c.Layers), attn: make([]q4Cache, c.Layers)}
	ch := 2*c.LinKHeads*c.LinKDim + c.LinVHeads*c.LinVDim
	for i := 0; i < c.Layers; i++ {
		if !q.QSA[i] {
			st.conv[i] = make([]float32, (c.ConvKernel-1)*ch)
			st.ssm[i] = make([]float32, c.LinVHeads*c.LinKDim*c.LinVDim)
		}
	}
	if q.PLELayer >= 0 {
		st.pleHist = make([]float32, (q.PLEConv-1)*q.Ngram*q.HC*c.Embd)
		st.pleToks = make([]int32, q.Ngram-1)
		for i := range st.pleToks {
			st.pleToks[i] = q.EOS
		}
	}
	return st
}

// ForwardQ4 is Forward for a qwen4exp model with its own trace (nil: none).
func (s *State) ForwardQ4(tokens []int32, all bool, tr *Q4Trace) (_ []float32, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.faultGuard(&err)
	m := s.m
	if m.q4 == nil {
		return nil, fmt.Errorf("model: ForwardQ4 on a %s model", m.Cfg.Arch)
	}
	c, q := &m.Cfg, &m.q4.cfg
	T, H, HC := len(tokens), c.Embd, q.HC
	HH := HC * H
	if T == 0 {
		return nil, fmt.Errorf("model: no tokens to process")
	}
	if s.pos+T > s.MaxCtx {
		return nil, fmt.Errorf("model: %d tokens after %d would exceed the context of %d (raise -c/--ctx-size, at most %s.context_length %d)", T, s.pos, s.MaxCtx, c.Arch, c.CtxLen)
	}
	R := make([]float32, T*HH)
	for t, id := range tokens {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("model: token id %d is outside the vocabulary of %d", id, m.Vocab)
		}
		m.tokEmbd.Row(R[t*HH:], int(id))
		for ch := 1; ch < HC; ch++ {
			copy(R[t*HH+ch*H:t*HH+(ch+1)*H], R[t*HH:t*HH+H])
		}
	}
	snap := func(v []float32) []float32 { return append([]float32(nil), v...) }
	if tr != nil {
		*tr = Q4Trace{Layers: [][]float32{snap(R)}, Selected: map[int][][]int{}}
	}
	for i := range m.q4.layers {
		l := &m.q4.layers[i]
		var lt *q4LayerTrace
		if tr != nil {
			lt = &q4LayerTrace{}
		}
		if l.ple != nil {
			var rows [][]uint64
			if tr != nil {
				rows = make([][]uint64, T)
			}
			add := s.q4PLE(l.ple, R, tokens, T, rows)
			addTo(R, add)
			if tr != nil {
				tr.PLEOut, tr.PLERows = add, rows
			}
		}
		var cache *q4Cache
		if l.qsa {
			cache = &s.q4.attn[i]
		}
		s.q4Decoder(l, i, cache, R, T, s.pos, lt)
		if tr != nil {
			tr.Layers = append(tr.Layers, snap(R))
			tr.BlockIO = append(tr.BlockIO, lt.io)
			tr.Inject = append(tr.Inject, lt.inject)
			tr.Experts = append(tr.Experts, lt.experts)
			if l.qsa {
				tr.Selected[i] = lt.selected
			}
		}
	}
	s.q4.preMixer = R
	h := make([]float32, T*H)
	s.q4HCRead(&m.q4.mixer, R, T, h, nil)
	if tr != nil {
		tr.FinalHidden = snap(h)
	}
	s.pos += T
	V := m.Vocab
	if all {
		logits := make([]float32, T*V)
		matmul(logits, m.output, 0, V, h, T)
		return logits, nil
	}
	logits := make([]float32, V)
	matmul(logits, m.output, 0, V, h[(T-1)*H:], 1)
	return logits, nil
}

// forwardQ4Generic serves Forward's Trace for qwen4exp: Layers are the 4-stream residuals,
// FinalNorm the final mixer output (there is no final norm), Experts the router choices.
func (s *State) forwardQ4Generic(tokens []int32, all bool, tr *Trace) ([]float32, error) {
	if tr == nil {
		return s.ForwardQ4(tokens, all, nil)
	}
	var qt Q4Trace
	logits, err := s.ForwardQ4(tokens, all, &qt)
	if err == nil {
		tr.Layers, tr.FinalNorm, tr.Experts = qt.Layers, qt.FinalHidden, qt.Experts
	}
	return logits, err
}

// q4Decoder runs one decoder layer on the stacks R in place:
// m, w = attn_HC.read(R); R += w ⊗ mixer(m); m, w = ffn_HC.read(R); R += w ⊗ MoE(m).
func (s *State) q4Decoder(l *q4Layer, li int, cache *q4Cache, R []float32, T, pos0 int, lt *q4LayerTrace) {
	c, q := &s.m.Cfg, &s.m.q4.cfg
	H, HC := c.Embd, q.HC
	m := make([]float32, T*H)
	w := make([]float32, T*HC)
	s.q4HCRead(&l.attnHC, R, T, m, w)
	var y []float32
	var sel [][]int
	if l.qsa {
		if lt != nil {
			sel = make([][]int, T)
		}
		y = s.q4Attention(l, cache, m, T, pos0, sel)
	} else {
		y = s.q4DeltaNet(l, li, m, T)
	}
	if lt != nil {
		lt.io[0], lt.io[1], lt.inject[0], lt.selected = append([]float32(nil), m...), y, append([]float32(nil), w...), sel
	}
	q4HCWrite(R, w, y, T, HC, H)
	m2 := make([]float32, T*H)
	w2 := make([]float32, T*HC)
	s.q4HCRead(&l.ffnHC, R, T, m2, w2)
	var picks [][]int
	if lt != nil {
		picks = make([][]int, T)
	}
	y2 := s.moe(&l.moe, m2, T, picks)
	if lt != nil {
		lt.io[2], lt.io[3], lt.inject[1], lt.experts = m2, y2, w2, picks
	}
	q4HCWrite(R, w2, y2, T, HC, H)
}

// q4HCRead is a hyper-connection read of the stacks R [T][HC·H] (spec §3): xn = per-stream
// RMS norm of R; u = silu(down·xn / HC); a = sigmoid(up·u); m = mean over streams of a ⊙ xn.
// With w non-nil (and an inject matrix) it also gives the write weights
// w_c = 2·sigmoid((inject·xn)_c / HC).
func (s *State) q4HCRead(h *q4HC, R []float32, T int, m, w []float32) {
	c, q := &s.m.Cfg, &s.m.q4.cfg
	H, HC, LR := c.Embd, q.HC, q.LowRank
	HH := HC * H
	xn := make([]float32, T*HH)
	for t := 0; t < T; t++ {
		for ch := 0; ch < HC; ch++ {
			o := t*HH + ch*H
			rmsNorm(xn[o:o+H], R[o:o+H], h.norm[ch*H:(ch+1)*H], c.Eps)
		}
	}
	u := make([]float32, T*LR)
	matmul(u, h.down, 0, LR, xn, T)
	inv := 1 / float32(HC)
	for i := range u {
		u[i] = silu(u[i] * inv)
	}
	a := make([]float32, T*HH)
	matmul(a, h.up, 0, HH, u, T)
	for t := 0; t < T; t++ {
		dst := m[t*H : (t+1)*H]
		clear(dst)
		for ch := 0; ch < HC; ch++ {
			o := t*HH + ch*H
			for d := 0; d < H; d++ {
				dst[d] += sigmoid(a[o+d]) * xn[o+d]
			}
		}
		for d := range dst {
			dst[d] *= inv
		}
	}
	if w != nil && h.inject != nil {
		matmul(w, h.inject, 0, HC, xn, T)
		for i := range w[:T*HC] {
			w[i] = 2 * sigmoid(w[i]*inv)
		}
	}
}

// q4HCWrite adds w_c·y to stream c of every stack.
func q4HCWrite(R, w, y []float32, T, HC, H int) {
	for t := 0; t < T; t++ {
		for ch := 0; ch < HC; ch++ {
			wc := w[t*HC+ch]
			dst := R[t*HC*H+ch*H : t*HC*H+(ch+1)*H]
			for d, v := range y[t*H : (t+1)*H] {
				dst[d] += wc * v
			}
		}
	}
}

// q4DeltaNet is the gated DeltaNet layer (spec §5) with value heads in GGUF's tiled order
// (value head j reads key head j mod nk), separate β and α projections, and the output
// gate act(z) = sigmoid(z) for qwen4exp (SiLU when the metadata says so). The recurrence
// runs token by token, which is the computation the reference's chunked prefill reorders.
func (s *State) q4DeltaNet(l *q4Layer, li int, xn []float32, T int) []float32 {
	c := &s.m.Cfg
	nk, nv, dk, dv := c.LinKHeads, c.LinVHeads, c.LinKDim, c.LinVDim
	kd, vd := nk*dk, nv*dv
	C := 2*kd + vd
	KC := c.ConvKernel
	qkv := make([]float32, T*C)
	z := make([]float32, T*vd)
	b := make([]float32, T*nv)
	a := make([]float32, T*nv)
	matmul(qkv, l.wqkv, 0, C, xn, T)
	matmul(z, l.wz, 0, vd, xn, T)
	matmul(b, l.wbeta, 0, nv, xn, T)
	matmul(a, l.walpha, 0, nv, xn, T)

	cv := causalConv(qkv, s.q4.conv[li], l.conv, T, C, KC)
	normQK(cv, T, C, nk, dk)
	act := silu
	if s.m.q4.cfg.GateSigmoid {
		act = sigmoid
	}
	o := deltaRecurrence(c, cv, z, s.q4.ssm[li], l.ssmA, l.dtBias, l.ssmNorm, T,
		func(h int) int { return h % nk }, // tiled value-head order
		func(t, h int) (float32, float32) { return b[t*nv+h], a[t*nv+h] }, act)
	res := make([]float32, T*c.Embd)
	matmul(res, l.ssmOut, 0, c.Embd, o, T)
	return res
}

// q4Attention is QSA (spec §6): gated GQA attention with q/k RMS norms and partial RoPE,
// whose keys are, per query p, the positions of the indexer's top blocks plus the open
// tail block. sel, when non-nil, receives each query's sorted key positions.
func (s *State) q4Attention(l *q4Layer, cache *q4Cache, xn []float32, T, pos0 int, sel [][]int) []float32 {
	c, q := &s.m.Cfg, &s.m.q4.cfg
	hd, nh, nkv := c.HeadDim, c.Heads, c.HeadsKV
	qd, kvd := nh*hd, nkv*hd
	nih, ihd, blk := q.IdxHeads, q.IdxDim, q.Compress
	qraw := make([]float32, T*2*qd)
	matmul(qraw, l.wq, 0, 2*qd, xn, T)
	k := make([]float32, T*kvd)
	v := make([]float32, T*kvd)
	matmul(k, l.wk, 0, kvd, xn, T)
	matmul(v, l.wv, 0, kvd, xn, T)
	iq := make([]float32, T*nih*ihd)
	ik := make([]float32, T*ihd)
	matmul(iq, l.idxQ, 0, nih*ihd, xn, T)
	matmul(ik, l.idxK, 0, ihd, xn, T)
	qv := make([]float32, T*qd)
	gate := make([]float32, T*qd)
	for t := 0; t < T; t++ {
		pos := pos0 + t
		for h := 0; h < nh; h++ {
			dst := qv[t*qd+h*hd : t*qd+(h+1)*hd]
			src := qraw[t*2*qd+2*h*hd:]
			copy(dst, src[:hd])
			copy(gate[t*qd+h*hd:], src[hd:2*hd])
			rmsNorm(dst, dst, l.qNorm, c.Eps)
			ropeNeoX(dst, pos, c.RopeDim, c.RopeBase)
		}
		for h := 0; h < nkv; h++ {
			kh := k[t*kvd+h*hd : t*kvd+(h+1)*hd]
			rmsNorm(kh, kh, l.kNorm, c.Eps)
			ropeNeoX(kh, pos, c.RopeDim, c.RopeBase)
		}
		for h := 0; h < nih; h++ {
			x := iq[t*nih*ihd+h*ihd : t*nih*ihd+(h+1)*ihd]
			rmsNorm(x, x, l.idxQNorm, c.Eps)
			ropeNeoX(x, pos, c.RopeDim, c.RopeBase)
		}
	}
	cache.k = append(cache.k[:pos0*kvd], k...)
	cache.v = append(cache.v[:pos0*kvd], v...)
	cache.ik = append(cache.ik[:pos0*ihd], ik...)
	// Pool every block completed so far: P_b = RoPE_{b·blk}(rms0(mean of its raw keys)).
	n := pos0 + T
	done := len(cache.pooled) / ihd
	if done > pos0/blk {
		done = pos0 / blk // after a rollback: blocks that reach into rewritten positions are redone
		cache.pooled = cache.pooled[:done*ihd]
	}
	for b := done; b < n/blk; b++ {
		p := make([]float32, ihd)
		for i := 0; i < ihd; i++ {
			var sum float64
			for j := 0; j < blk; j++ {
				sum += float64(cache.ik[(b*blk+j)*ihd+i])
			}
			p[i] = float32(sum / float64(blk))
		}
		rmsNorm(p, p, l.idxKNorm, c.Eps)
		ropeNeoX(p, b*blk, c.RopeDim, c.RopeBase)
		cache.pooled = append(cache.pooled, p...)
	}
	keep := q.IdxTopK / blk
	positions := make([][]int, T)
	iscale := 1 / math.Sqrt(float64(ihd))
	for t := 0; t < T; t++ {
		p := pos0 + t
		nb := (p + 1) / blk
		var blocks []int
		if nb <= keep {
			blocks = make([]int, nb)
			for b := range blocks {
				blocks[b] = b
			}
		} else {
			blocks = topBlocks(iq[t*nih*ihd:(t+1)*nih*ihd], cache.pooled, nb, keep, nih, ihd, iscale)
		}
		pos := make([]int, 0, len(blocks)*blk+blk)
		for _, b := range blocks {
			for j := 0; j < blk; j++ {
				pos = append(pos, b*blk+j)
			}
		}
		for j := nb * blk; j <= p; j++ {
			pos = append(pos, j)
		}
		positions[t] = pos
		if sel != nil {
			sel[t] = pos
		}
	}
	K, Vc := cache.k, cache.v
	o := make([]float32, T*qd)
	scale := 1 / math.Sqrt(float64(hd))
	group := nh / nkv
	parallelFor(T*nh, (pos0+T)*hd*2, func(lo, hi int) {
		sc := make([]float64, q.IdxTopK+blk)
		acc := make([]float64, hd)
		for job := lo; job < hi; job++ {
			t, h := job/nh, job%nh
			pos := positions[t]
			if cap(sc) < len(pos) {
				sc = make([]float64, len(pos))
			}
			sc = sc[:len(pos)]
			qh := qv[t*qd+h*hd : t*qd+(h+1)*hd]
			off := (h / group) * hd
			mx := math.Inf(-1)
			for i, j := range pos {
				kv := K[j*kvd+off : j*kvd+off+hd]
				var d float64
				for x := range qh {
					d += float64(qh[x]) * float64(kv[x])
				}
				sc[i] = d * scale
				mx = math.Max(mx, sc[i])
			}
			var sum float64
			for i := range sc {
				sc[i] = math.Exp(sc[i] - mx)
				sum += sc[i]
			}
			clear(acc)
			for i, j := range pos {
				pr := sc[i] / sum
				vv := Vc[j*kvd+off : j*kvd+off+hd]
				for x := range acc {
					acc[x] += pr * float64(vv[x])
				}
			}
			dst := o[t*qd+h*hd:]
			for x := range acc {
				dst[x] = float32(acc[x]) * sigmoid(gate[t*qd+h*hd+x])
			}
		}
	})
	out := make([]float32, T*c.Embd)
	matmul(out, l.wo, 0, c.Embd, o, T)
	return out
}

// topBlocks scores the nb complete blocks for one query, score_b = (1/√d)·Σ_h relu(q_h·P_b),
// and returns the keep best in ascending block order. Ties are broken towards the lower
// block index (a block whose dot products are all negative scores exactly 0, so ties are
// real): the order is (score descending, index ascending), a total order, so the choice is
// deterministic and independent of the sort algorithm.
func topBlocks(iq, pooled []float32, nb, keep, nih, ihd int, iscale float64) []int {
	type bs struct {
		b int
		s float32
	}
	scores := make([]bs, nb)
	for b := 0; b < nb; b++ {
		pb := pooled[b*ihd : (b+1)*ihd]
		var s float64
		for h := 0; h < nih; h++ {
			qh := iq[h*ihd : (h+1)*ihd]
			var d float64
			for i := range pb {
				d += float64(qh[i]) * float64(pb[i])
			}
			s += math.Max(d, 0)
		}
		scores[b] = bs{b, float32(s * iscale)}
	}
	sort.Slice(scores, func(i, j int) bool {
		if scores[i].s != scores[j].s {
			return scores[i].s > scores[j].s
		}
		return scores[i].b < scores[j].b
	})
	out := make([]int, keep)
	for i := range out {
		out[i] = scores[i].b
	}
	sort.Ints(out)
	return out
}

// q4PLE computes what the PLE block adds to the stacks R (spec §7) for T new tokens, and
// advances its state (the last Ngram-1 ids and the last normalised vectors of the dilated
// conv). Only the table rows the hashes address are read. rows, when non-nil, receives
// each token's table rows.
func (s *State) q4PLE(pl *q4PLE, R []float32, tokens []int32, T int, rows [][]uint64) []float32 {
	c, q := &s.m.Cfg, &s.m.q4.cfg
	H, HC := c.Embd, q.HC
	HH := HC * H
	P := q.PLEHeads * q.PLEDim
	n := q.Ngram
	// Context: history ids (EOS-initialised) then the new ones.
	hist := append(append([]int32(nil), s.q4.pleToks...), tokens...)
	e := make([]float32, T*P)
	ctx := make([]uint64, n)
	for t := 0; t < T; t++ {
		at := n - 1 + t // index of this token in hist
		ctx[0] = uint64(hist[at])
		cut := false
		for i := 1; i < n; i++ {
			id := hist[at-i]
			if cut || id == q.EOS {
				cut = true
				id = q.EOS
			}
			ctx[i] = uint64(id)
		}
		r := make([]uint64, q.PLEHeads)
		var hash uint64
		for g := 0; g < n-1; g++ {
			// n-gram of size g+2: XOR of ctx_i·m_i for i ≤ g+1 (products < 2^63, no overflow).
			if g == 0 {
				hash = ctx[0]*q.Mult[0] ^ ctx[1]*q.Mult[1]
			} else {
				hash ^= ctx[g+1] * q.Mult[g+1]
			}
			for j := 0; j < q.HeadsPerNgram; j++ {
				h := g*q.HeadsPerNgram + j
				r[h] = hash%q.Sizes[h] + q.Offsets[h]
				pl.table.Row(e[t*P+h*q.PLEDim:], int(r[h]))
			}
		}
		if rows != nil {
			rows[t] = r
		}
	}
	s.q4.pleToks = append(s.q4.pleToks[:0], hist[len(hist)-(n-1):]...)

	K := make([]float32, T*HH)
	matmul(K, pl.key, 0, HH, e, T)
	V := make([]float32, T*H)
	matmul(V, pl.value, 0, H, e, T)
	G := make([]float32, T*HH)
	N := make([]float32, T*HH)
	qn := make([]float32, H)
	rs := 1 / math.Sqrt(float64(H))
	for t := 0; t < T; t++ {
		for ch := 0; ch < HC; ch++ {
			o := t*HH + ch*H
			rmsNorm(K[o:o+H], K[o:o+H], pl.normKey[ch*H:(ch+1)*H], c.Eps)
			rmsNorm(qn, R[o:o+H], pl.normQuery[ch*H:(ch+1)*H], c.Eps)
			var d float64
			for i := range qn {
				d += float64(K[o+i]) * float64(qn[i])
			}
			sc := d * rs
			sq := math.Sqrt(math.Max(math.Abs(sc), 1e-6))
			if sc < 0 {
				sq = -sq
			} else if sc == 0 {
				sq = 0
			}
			g := sigmoid(float32(sq))
			for i := 0; i < H; i++ {
				G[o+i] = g * V[t*H+i]
			}
			rmsNorm(N[o:o+H], G[o:o+H], pl.normConv[ch*H:(ch+1)*H], c.Eps)
		}
	}
	// Dilated causal depthwise conv over N: taps t − dil·(K−1−k), zero before the start.
	KC, dil := q.PLEConv, q.Ngram
	nh := (KC - 1) * dil
	old := s.q4.pleHist
	at := func(t int) []float32 { // N at time t relative to this call (t ≥ -nh)
		if t >= 0 {
			return N[t*HH : (t+1)*HH]
		}
		return old[(nh+t)*HH : (nh+t+1)*HH]
	}
	out := make([]float32, T*HH)
	for t := 0; t < T; t++ {
		dst := out[t*HH : (t+1)*HH]
		for k := 0; k < KC; k++ {
			x := at(t - dil*(KC-1-k))
			for ch := range dst {
				dst[ch] += pl.conv[ch*KC+k] * x[ch]
			}
		}
		for ch := range dst {
			dst[ch] = silu(dst[ch]) + G[t*HH+ch]
		}
	}
	next := make([]float32, len(old))
	for i := 0; i < nh; i++ {
		copy(next[i*HH:(i+1)*HH], at(T-nh+i))
	}
	s.q4.pleHist = next
	return out
}
