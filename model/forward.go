package model

import (
	"fmt"
	"math"
	"runtime/debug"
)

// State is one sequence being processed: the position, the attention KV cache of the
// full-attention layers and the conv and recurrent state of the delta-net layers.
// Feeding tokens in several calls gives the same result as one call with all of them.
type State struct {
	m      *Model
	MaxCtx int
	pos    int
	k, v   [][]float32 // per layer: [pos][HeadsKV·HeadDim], grown as tokens arrive
	conv   [][]float32 // per recurrent layer: the last ConvKernel-1 conv inputs, [K-1][channels]
	ssm    [][]float32 // per recurrent layer: [value heads][LinKDim][LinVDim]
	q4     *q4State    // qwen4exp (qwen4exp_forward.go)
}

// Trace receives the residual stream after the embedding ([0]) and after each layer
// ([i+1]), and the final-norm output, each [T][Embd] for the tokens of one Forward call.
type Trace struct {
	Layers    [][]float32
	FinalNorm []float32
	Experts   [][][]int // [layer][t]: the experts chosen, in descending router weight
}

// NewState starts a sequence of at most maxCtx tokens (≤ 0: the model's context length).
func (m *Model) NewState(maxCtx int) (*State, error) {
	if maxCtx <= 0 {
		maxCtx = m.Cfg.CtxLen
	}
	if maxCtx > m.Cfg.CtxLen {
		return nil, fmt.Errorf("%s: context %d is longer than the model's %s.context_length %d", m.src.Path(), maxCtx, m.Cfg.Arch, m.Cfg.CtxLen)
	}
	c := &m.Cfg
	s := &State{m: m, MaxCtx: maxCtx, k: make([][]float32, c.Layers), v: make([][]float32, c.Layers),
		conv: make([][]float32, c.Layers), ssm: make([][]float32, c.Layers)}
	for i := 0; i < c.Layers; i++ {
		if c.IsRecurrent(i) {
			ch := 2*c.LinKHeads*c.LinKDim + c.LinVHeads*c.LinVDim
			s.conv[i] = make([]float32, (c.ConvKernel-1)*ch)
			s.ssm[i] = make([]float32, c.LinVHeads*c.LinKDim*c.LinVDim)
		}
	}
	if m.q4 != nil {
		s.q4 = newQ4State(m)
	}
	return s, nil
}

// Pos is the number of tokens processed so far.
func (s *State) Pos() int { return s.pos }

// Model returns the model the state belongs to.
func (s *State) Model() *Model { return s.m }

// Forward processes tokens after those already in the state and returns logits: for
// every new position ([T][Vocab]) when all is set, else for the last one only.
func (s *State) Forward(tokens []int32, all bool, tr *Trace) (logits []float32, err error) {
	if s.m.q4 != nil {
		return s.forwardQ4Generic(tokens, all, tr) // ForwardQ4 sets up its own fault guard
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.faultGuard(&err)
	m, c := s.m, &s.m.Cfg
	T, H := len(tokens), c.Embd
	if T == 0 {
		return nil, fmt.Errorf("model: no tokens to process")
	}
	if s.pos+T > s.MaxCtx {
		return nil, fmt.Errorf("model: %d tokens after %d would exceed the context of %d (raise -c/--ctx-size, at most %s.context_length %d)", T, s.pos, s.MaxCtx, c.Arch, c.CtxLen)
	}
	x := make([]float32, T*H)
	for t, id := range tokens {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("model: token id %d is outside the vocabulary of %d", id, m.Vocab)
		}
		m.tokEmbd.Row(x[t*H:], int(id))
	}
	snap := func(v []float32) []float32 { return append([]float32(nil), v...) }
	if tr != nil {
		tr.Layers = append(tr.Layers[:0], snap(x))
		tr.Experts = tr.Experts[:0]
	}
	xn := make([]float32, T*H)
	for i := range m.layers {
		l := &m.layers[i]
		rmsNormRows(xn, x, l.attnNorm, c.Eps, T, H)
		var out []float32
		if c.IsRecurrent(i) {
			out = s.deltaNet(i, l, xn, T)
		} else {
			out = s.attention(i, l, xn, T)
		}
		addTo(x, out)
		rmsNormRows(xn, x, l.postNorm, c.Eps, T, H)
		var picks [][]int
		if tr != nil {
			picks = make([][]int, T)
		}
		addTo(x, s.moe(l, xn, T, picks))
		if tr != nil {
			tr.Experts = append(tr.Experts, picks)
		}
		if tr != nil {
			tr.Layers = append(tr.Layers, snap(x))
		}
	}
	rmsNormRows(xn, x, m.outNorm, c.Eps, T, H)
	if tr != nil {
		tr.FinalNorm = snap(xn)
	}
	s.pos += T
	V := m.Vocab
	if all {
		logits = make([]float32, T*V)
		matmul(logits, m.output, 0, V, xn, T)
		return logits, nil
	}
	logits = make([]float32, V)
	matmul(logits, m.output, 0, V, xn[(T-1)*H:], 1)
	return logits, nil
}

// faultGuard, deferred, turns a fault reading the mapped model (a file truncated or
// replaced while in use) into an error. The state may hold a partial update, so it is
// marked full: it must not be used further.
func (s *State) faultGuard(err *error) {
	if r := recover(); r != nil {
		*err = faultError(s.m.src.Path(), r)
		s.pos = s.MaxCtx
	}
}

// faultError turns r, recovered under debug.SetPanicOnFault, into an error naming the
// model file path; a panic other than a memory fault is re-raised.
func faultError(path string, r any) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		panic(r)
	}
	return fmt.Errorf("%s: memory fault reading the model at %#x (was the file truncated or replaced while in use?): %v", path, f.Addr(), r)
}

func addTo(x, y []float32) {
	for i := range x {
		x[i] += y[i]
	}
}

// rmsNormRows: dst[t] = x[t] / sqrt(mean(x[t]²) + eps) · w, per row of n values.
func rmsNormRows(dst, x, w []float32, eps float32, T, n int) {
	for t := 0; t < T; t++ {
		rmsNorm(dst[t*n:(t+1)*n], x[t*n:(t+1)*n], w, eps)
	}
}

func rmsNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		dst[i] = v * inv * w[i]
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu(x float32) float32 { return x * sigmoid(x) }

// softplus as torch computes it (beta 1, threshold 20: linear above).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// ropeNeoX rotates the first rd values of x at position pos, pairing i with i+rd/2
// (GPT-NeoX/"rotate_half" convention). Frequencies and angles are rounded to float32 as
// transformers computes them, so long positions agree with the reference.
func ropeNeoX(x []float32, pos, rd int, base float64) {
	half := rd / 2
	for i := 0; i < half; i++ {
		inv := float32(1 / math.Pow(base, float64(float32(2*i)/float32(rd))))
		ang := float64(float32(pos) * inv)
		cos, sin := float32(math.Cos(ang)), float32(math.Sin(ang))
		x0, x1 := x[i], x[i+half]
		x[i] = x0*cos - x1*sin
		x[i+half] = x1*cos + x0*sin
	}
}

// attention is grouped-query attention with q/k RMSNorm and NeoX RoPE; for qwen3next the
// query projection also yields a per-head output gate, applied as sigmoid(gate)·out.
func (s *State) attention(li int, l *layer, xn []float32, T int) []float32 {
	c := &s.m.Cfg
	hd, nh, nkv := c.HeadDim, c.Heads, c.HeadsKV
	qd, kvd := nh*hd, nkv*hd
	gated := c.Arch == ArchQwen3Next
	qrows := l.wq.Rows()
	qraw := make([]float32, T*qrows)
	matmul(qraw, l.wq, 0, qrows, xn, T)
	k := make([]float32, T*kvd)
	v := make([]float32, T*kvd)
	matmul(k, l.wk, 0, kvd, xn, T)
	matmul(v, l.wv, 0, kvd, xn, T)
	q := make([]float32, T*qd)
	var gate []float32
	if gated {
		gate = make([]float32, T*qd)
	}
	for t := 0; t < T; t++ {
		pos := s.pos + t
		for h := 0; h < nh; h++ {
			dst := q[t*qd+h*hd : t*qd+(h+1)*hd]
			if gated {
				src := qraw[t*qrows+2*h*hd:]
				copy(dst, src[:hd])
				copy(gate[t*qd+h*hd:], src[hd:2*hd])
			} else {
				copy(dst, qraw[t*qrows+h*hd:])
			}
			rmsNorm(dst, dst, l.qNorm, c.Eps)
			ropeNeoX(dst, pos, c.RopeDim, c.RopeBase)
		}
		for h := 0; h < nkv; h++ {
			kh := k[t*kvd+h*hd : t*kvd+(h+1)*hd]
			rmsNorm(kh, kh, l.kNorm, c.Eps)
			ropeNeoX(kh, pos, c.RopeDim, c.RopeBase)
		}
	}
	s.k[li] = append(s.k[li], k...)
	s.v[li] = append(s.v[li], v...)
	K, V := s.k[li], s.v[li]
	o := make([]float32, T*qd)
	scale := 1 / math.Sqrt(float64(hd))
	group := nh / nkv
	parallelFor(T*nh, (s.pos+T)*hd*2, func(lo, hi int) {
		sc := make([]float64, s.pos+T)
		acc := make([]float64, hd)
		for job := lo; job < hi; job++ {
			t, h := job/nh, job%nh
			n := s.pos + t + 1 // causal: positions 0..pos+t
			qv := q[t*qd+h*hd : t*qd+(h+1)*hd]
			off := (h / group) * hd
			mx := math.Inf(-1)
			for j := 0; j < n; j++ {
				kv := K[j*kvd+off : j*kvd+off+hd]
				var d float64
				for i := range qv {
					d += float64(qv[i]) * float64(kv[i])
				}
				sc[j] = d * scale
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := 0; j < n; j++ {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			clear(acc)
			for j := 0; j < n; j++ {
				p := sc[j] / sum
				vv := V[j*kvd+off : j*kvd+off+hd]
				for i := range acc {
					acc[i] += p * float64(vv[i])
				}
			}
			dst := o[t*qd+h*hd:]
			for i := range acc {
				dst[i] = float32(acc[i])
				if gated {
					dst[i] *= sigmoid(gate[t*qd+h*hd+i])
				}
			}
		}
	})
	out := make([]float32, T*c.Embd)
	matmul(out, l.wo, 0, c.Embd, o, T)
	return out
}

// moe is the sparse MoE block: softmax router, top-k experts (renormalised when
// NormTopK), SwiGLU experts, and for qwen3next a shared expert scaled by
// sigmoid(shared gate · x).
func (s *State) moe(l *layer, xn []float32, T int, picks [][]int) []float32 {
	c := &s.m.Cfg
	H, E, K, F := c.Embd, c.Experts, c.ExpertsUsed, c.ExpertFF
	logits := make([]float32, T*E)
	matmul(logits, l.router, 0, E, xn, T)
	type pick struct {
		t int
		w float32
	}
	byExpert := make([][]pick, E)
	probs := make([]float64, E)
	chosen := make([]int, 0, K)
	for t := 0; t < T; t++ {
		row := logits[t*E : (t+1)*E]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for e, v := range row {
			probs[e] = math.Exp(float64(v) - mx)
			sum += probs[e]
		}
		chosen = chosen[:0]
		var wsum float64
		for k := 0; k < K; k++ {
			best := -1
			for e := 0; e < E; e++ {
				if contains(chosen, e) {
					continue
				}
				if best < 0 || probs[e] > probs[best] {
					best = e
				}
			}
			chosen = append(chosen, best)
			wsum += probs[best] / sum
		}
		if picks != nil {
			picks[t] = append([]int(nil), chosen...)
		}
		for _, e := range chosen {
			w := probs[e] / sum
			if c.NormTopK {
				w /= wsum
			}
			byExpert[e] = append(byExpert[e], pick{t, float32(w)})
		}
	}
	out := make([]float32, T*H)
	for e, picks := range byExpert {
		n := len(picks)
		if n == 0 {
			continue
		}
		xs := make([]float32, n*H)
		for i, p := range picks {
			copy(xs[i*H:(i+1)*H], xn[p.t*H:])
		}
		y := s.ffn(l.gateExps, l.upExps, l.downExps, e, F, xs, n)
		for i, p := range picks {
			dst := out[p.t*H : (p.t+1)*H]
			for j := range dst {
				dst[j] += p.w * y[i*H+j]
			}
		}
	}
	if l.shGate != nil {
		y := s.ffn(l.shGate, l.shUp, l.shDown, 0, c.SharedFF, xn, T)
		for t := 0; t < T; t++ {
			g := sigmoid(dot(l.shGateInp, xn[t*H:(t+1)*H]))
			for j := 0; j < H; j++ {
				out[t*H+j] += g * y[t*H+j]
			}
		}
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ffn is a SwiGLU feed-forward, down(silu(gate·x) ⊙ (up·x)), using expert e of stacked
// [.., F, E] tensors (e = 0 for unstacked ones).
func (s *State) ffn(gate, up, down *Tensor, e, F int, xs []float32, n int) []float32 {
	H := s.m.Cfg.Embd
	g := make([]float32, n*F)
	u := make([]float32, n*F)
	matmul(g, gate, e*F, F, xs, n)
	matmul(u, up, e*F, F, xs, n)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	y := make([]float32, n*H)
	matmul(y, down, e*H, H, g, n)
	return y
}

// deltaNet is Qwen3-Next's gated delta-net layer: projections to q,k,v (through a causal
// depthwise conv + SiLU), the output gate z and per-value-head b, a; then per value head
// the recurrence S ← S·exp(g); S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq with L2-normalised q, k
// (q scaled by 1/√d_k), g = ssm_a·softplus(a + dt_bias), β = sigmoid(b); then a gated
// RMSNorm (norm(o)·w·silu(z)) and the output projection. Prefill runs the same
// recurrence token by token, which is the exact computation the chunked form reorders.
func (s *State) deltaNet(li int, l *layer, xn []float32, T int) []float32 {
	c := &s.m.Cfg
	nk, nv, dk, dv := c.LinKHeads, c.LinVHeads, c.LinKDim, c.LinVDim
	kd, vd := nk*dk, nv*dv
	C := 2*kd + vd
	KC := c.ConvKernel
	qkv := make([]float32, T*C)
	z := make([]float32, T*vd)
	ba := make([]float32, T*2*nv)
	matmul(qkv, l.wqkv, 0, C, xn, T)
	matmul(z, l.wz, 0, vd, xn, T)
	matmul(ba, l.wba, 0, 2*nv, xn, T)

	cv := causalConv(qkv, s.conv[li], l.conv, T, C, KC)
	normQK(cv, T, C, nk, dk)
	r := nv / nk
	// in_proj_ba is grouped per key head: [b (r) | a (r)] for each of the nk groups.
	gates := func(t, h int) (b, a float32) {
		row := ba[t*2*nv+(h/r)*2*r:]
		return row[h%r], row[r+h%r]
	}
	o := deltaRecurrence(c, cv, z, s.ssm[li], l.ssmA, l.dtBias, l.ssmNorm, T,
		func(h int) int { return h / r }, gates, silu)
	res := make([]float32, T*c.Embd)
	matmul(res, l.wssmOut, 0, c.Embd, o, T)
	return res
}

// causalConv is the DeltaNet's causal depthwise conv over time, with SiLU: x holds T
// steps of C channels, w each channel's KC taps, and st the last KC−1 inputs before this
// call, which it updates to the last KC−1 inputs of x (and st) for the next call.
func causalConv(x, st, w []float32, T, C, KC int) []float32 {
	in := func(t, ch int) float32 { // input at time t relative to this call (t may be negative)
		if t >= 0 {
			return x[t*C+ch]
		}
		return st[(KC-1+t)*C+ch]
	}
	cv := make([]float32, T*C)
	for t := 0; t < T; t++ {
		for ch := 0; ch < C; ch++ {
			var sum float32
			taps := w[ch*KC : (ch+1)*KC]
			for j := 0; j < KC; j++ {
				sum += taps[j] * in(t-(KC-1)+j, ch)
			}
			cv[t*C+ch] = silu(sum)
		}
	}
	next := make([]float32, len(st))
	for r := 0; r < KC-1; r++ {
		tt := T - (KC - 1) + r
		for ch := 0; ch < C; ch++ {
			next[r*C+ch] = in(tt, ch)
		}
	}
	copy(st, next)
	return cv
}

// normQK L2-normalises each of the 2·nk q and k heads of dk values in cv's T rows of C
// (eps 1e-6 inside the root, as the reference) and scales q by 1/√dk.
func normQK(cv []float32, T, C, nk, dk int) {
	qscale := float32(1 / math.Sqrt(float64(dk)))
	for t := 0; t < T; t++ {
		for h := 0; h < 2*nk; h++ {
			x := cv[t*C+h*dk : t*C+(h+1)*dk]
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			inv := float32(1 / math.Sqrt(ss+1e-6))
			if h < nk {
				inv *= qscale
			}
			for i := range x {
				x[i] *= inv
			}
		}
	}
}

// deltaRecurrence runs the gated delta rule of every value head over T tokens, in order:
// decay = exp(ssm_a·softplus(a + dt_bias)), β = sigmoid(b), the state step (deltaStep), then
// the gated RMSNorm norm(o)·w·act(z). cv holds the conv outputs [q | k | v] per token
// (q, k already L2-normalised), keyHead maps a value head to the key head it reads, gates
// returns its b and a at token t. S (nv·dk·dv) carries over between calls. The layers differ
// only in keyHead, gates and act (qwen3next: grouped heads, SiLU; qwen4exp: tiled, sigmoid).
func deltaRecurrence(c *Config, cv, z, S, ssmA, dtBias, ssmNorm []float32, T int,
	keyHead func(h int) int, gates func(t, h int) (b, a float32), act func(float32) float32) []float32 {
	nk, nv, dk, dv := c.LinKHeads, c.LinVHeads, c.LinKDim, c.LinVDim
	kd, vd := nk*dk, nv*dv
	C := 2*kd + vd
	o := make([]float32, T*vd)
	parallelFor(nv, T*dk*dv*4, func(lo, hi int) {
		mem := make([]float32, dv)
		for h := lo; h < hi; h++ {
			kh := keyHead(h)
			Sh := S[h*dk*dv : (h+1)*dk*dv]
			for t := 0; t < T; t++ {
				b, a := gates(t, h)
				decay := float32(math.Exp(float64(ssmA[h] * softplus(a+dtBias[h]))))
				beta := sigmoid(b)
				qv := cv[t*C+kh*dk : t*C+(kh+1)*dk]
				kv := cv[t*C+kd+kh*dk : t*C+kd+(kh+1)*dk]
				vv := cv[t*C+2*kd+h*dv : t*C+2*kd+(h+1)*dv]
				out := o[t*vd+h*dv : t*vd+(h+1)*dv]
				deltaStep(Sh, mem, out, qv, kv, vv, decay, beta)
				rmsNorm(out, out, ssmNorm, c.Eps)
				zz := z[t*vd+h*dv : t*vd+(h+1)*dv]
				for j := range out {
					out[j] *= act(zz[j])
				}
			}
		}
	})
	return o
}

// deltaStep is one time step of the gated delta rule for one value head: it decays the
// head's state Sh (dk rows of dv) by decay, writes the delta β·(v − Sᵀk) into mem, adds
// k ⊗ delta to the state and reads out = Sᵀq.
func deltaStep(Sh, mem, out, qv, kv, vv []float32, decay, beta float32) {
	dk, dv := len(kv), len(vv)
	clear(mem)
	for i := 0; i < dk; i++ {
		row := Sh[i*dv : (i+1)*dv]
		ki := kv[i]
		for j := range row {
			row[j] *= decay
			mem[j] += row[j] * ki
		}
	}
	for j := range mem {
		mem[j] = (vv[j] - mem[j]) * beta // delta
	}
	clear(out)
	for i := 0; i < dk; i++ {
		row := Sh[i*dv : (i+1)*dv]
		ki, qi := kv[i], qv[i]
		for j := range row {
			row[j] += ki * mem[j]
			out[j] += row[j] * qi
		}
	}
}
