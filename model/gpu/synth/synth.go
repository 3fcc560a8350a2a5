// Package synth writes GGUF models with random weights at a chosen architecture shape,
// for benchmarks and tests of the engines at sizes no small real model has. The router
// is skewed so that expert popularity follows a Zipf law, which is what makes an expert
// cache worth having (real routers are skewed too, though less regularly).
//
// How the skew works: every embedding row carries one "massive" coordinate (index 0)
// holding half the row's energy, as real LLMs' residual streams do. After RMSNorm that
// coordinate is nearly the same for every token (≈ √(H/2)), so router row e's weight
// there acts as a per-expert bias b_e = ln p_e, while its other weights, N(0, σ²) with
// σ = 1.28·√(2/(H−1)), add token-dependent noise of standard deviation ≈ 1.28 (that of a
// Gumbel variable). Choosing the top logit of ln p_e + noise then picks expert e with
// probability close to p_e (exactly, for Gumbel noise), with p_e ∝ 1/(rank_e+1)^s and a
// random ranking per layer. Output projections are scaled down (0.1/√k) so the layers
// perturb rather than replace that coordinate.
//
// Weights are drawn per (type, row length, scale) into a pool of distinct rows that
// tensors index pseudo-randomly, so a 15 GB model writes at disk speed; types the quant
// package can quantize (F16, BF16, Q8_0, Q2_0, Q4_K, Q6_K) get N(0, σ²) values
// quantized, the IQ types random valid blocks (quant.RandomRow).
package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tokenizer"
	"github.com/strata-hip/strata/quant"
)

// Shape is the architecture to write.
type Shape struct {
	Arch        string // model.ArchQwen3MoE
	Layers      int
	Embd        int
	Heads       int
	HeadsKV     int
	HeadDim     int
	Experts     int
	ExpertsUsed int
	ExpertFF    int
	Vocab       int
	CtxLen      int

	// qwen3next only: shared expert, hybrid layers (every FullAttnInterval-th is full
	// attention, the others gated delta-net), partial RoPE.
	SharedFF         int
	FullAttnInterval int
	ConvKernel       int
	LinKHeads        int // ssm.group_count
	LinVHeads        int // ssm.time_step_rank
	LinKDim          int // ssm.state_size
	LinVDim          int // ssm.inner_size / LinVHeads
	RopeDim          int // 0: HeadDim
}

// Presets are named shapes for the command line.
var Presets = map[string]Shape{
	// Qwen3-30B-A3B: 48 layers, 128 experts, top-8, hidden 2048, expert width 768.
	"qwen3-30b-a3b": {Arch: model.ArchQwen3MoE, Layers: 48, Embd: 2048, Heads: 32, HeadsKV: 4, HeadDim: 128,
		Experts: 128, ExpertsUsed: 8, ExpertFF: 768, Vocab: 151936, CtxLen: 40960},
	// Qwen3-Next-80B-A3B: 48 layers (every 4th full attention, gated), 512 experts, top-10,
	// expert width 512 plus a shared expert, 16/2 heads of 256 with a quarter rotated.
	"qwen3-next-80b-a3b": {Arch: model.ArchQwen3Next, Layers: 48, Embd: 2048, Heads: 16, HeadsKV: 2, HeadDim: 256,
		Experts: 512, ExpertsUsed: 10, ExpertFF: 512, Vocab: 151936, CtxLen: 262144, SharedFF: 512, FullAttnInterval: 4,
		ConvKernel: 4, LinKHeads: 16, LinVHeads: 32, LinKDim: 128, LinVDim: 128, RopeDim: 64},
	// tiny-next: the tiny qwen3next shape.
	"tiny-next": {Arch: model.ArchQwen3Next, Layers: 4, Embd: 512, Heads: 4, HeadsKV: 2, HeadDim: 64,
		Experts: 16, ExpertsUsed: 4, ExpertFF: 256, Vocab: 512, CtxLen: 4096, SharedFF: 256, FullAttnInterval: 4,
		ConvKernel: 4, LinKHeads: 2, LinVHeads: 4, LinKDim: 64, LinVDim: 64, RopeDim: 16},
	// tiny: the smallest shape every GPU kernel accepts (head dim 64, rows of 256 for the
	// K-quants), for engine equality tests.
	"tiny": {Arch: model.ArchQwen3MoE, Layers: 3, Embd: 512, Heads: 4, HeadsKV: 2, HeadDim: 64,
		Experts: 16, ExpertsUsed: 4, ExpertFF: 256, Vocab: 512, CtxLen: 4096},
}

// Options choose the weight types, the skew and the seed.
type Options struct {
	ExpertType quant.Type // experts' gate, up and down
	DenseType  quant.Type // attention, embeddings, output head (default Q8_0)
	ZipfS      float64    // expert popularity exponent (default 1)
	Seed       uint64
	PoolRows   int // distinct rows per pool (default 512)
}

// sigmaGumbel is the standard deviation of a standard Gumbel variable, π/√6.
const sigmaGumbel = 1.2825498301618641

func (s Shape) validate() error {
	if s.Arch != model.ArchQwen3MoE && s.Arch != model.ArchQwen3Next {
		return fmt.Errorf("synth: architecture %q is not supported (%s or %s)", s.Arch, model.ArchQwen3MoE, model.ArchQwen3Next)
	}
	if s.Arch == model.ArchQwen3Next {
		for _, v := range []struct {
			n string
			v int
		}{{"shared-ff", s.SharedFF}, {"full-attn-interval", s.FullAttnInterval}, {"conv-kernel", s.ConvKernel},
			{"lin-k-heads", s.LinKHeads}, {"lin-v-heads", s.LinVHeads}, {"lin-k-dim", s.LinKDim}, {"lin-v-dim", s.LinVDim}} {
			if v.v <= 0 {
				return fmt.Errorf("synth: qwen3next needs %s > 0, got %d", v.n, v.v)
			}
		}
		if s.LinVHeads%s.LinKHeads != 0 {
			return fmt.Errorf("synth: lin-v-heads %d is not a multiple of lin-k-heads %d", s.LinVHeads, s.LinKHeads)
		}
	}
	if s.RopeDim < 0 || s.RopeDim > s.HeadDim || s.RopeDim%2 != 0 {
		return fmt.Errorf("synth: rope dims %d must be even and at most head-dim %d", s.RopeDim, s.HeadDim)
	}
	for _, v := range []struct {
		n string
		v int
	}{{"layers", s.Layers}, {"embd", s.Embd}, {"heads", s.Heads}, {"heads-kv", s.HeadsKV}, {"head-dim", s.HeadDim},
		{"experts", s.Experts}, {"experts-used", s.ExpertsUsed}, {"expert-ff", s.ExpertFF}, {"vocab", s.Vocab}, {"ctx", s.CtxLen}} {
		if v.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", v.n, v.v)
		}
	}
	switch {
	case s.Heads%s.HeadsKV != 0:
		return fmt.Errorf("synth: heads %d is not a multiple of heads-kv %d", s.Heads, s.HeadsKV)
	case s.ExpertsUsed > s.Experts:
		return fmt.Errorf("synth: experts-used %d exceeds experts %d", s.ExpertsUsed, s.Experts)
	case s.Vocab < 259:
		return fmt.Errorf("synth: vocab %d is below the 259 tokens of the byte-level tokenizer (256 bytes + 3 specials)", s.Vocab)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("synth: head-dim %d must be even", s.HeadDim)
	}
	return nil
}

// Write writes the model to path.
func Write(path string, s Shape, o Options) error {
	w, err := Build(s, o)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// Build prepares the GGUF writer (tensors are produced while it writes).
func Build(s Shape, o Options) (*gguf.Writer, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if o.DenseType == 0 {
		o.DenseType = quant.Q8_0
	}
	if o.ZipfS == 0 {
		o.ZipfS = 1
	}
	if o.PoolRows <= 0 {
		o.PoolRows = 512
	}
	for _, c := range []struct {
		what string
		t    quant.Type
		ks   []int
	}{{"expert type", o.ExpertType, []int{s.Embd, s.ExpertFF}}, {"dense type", o.DenseType, []int{s.Embd, s.Heads * s.HeadDim}}} {
		in, ok := quant.Lookup(c.t)
		if !ok || !in.Weight {
			return nil, fmt.Errorf("synth: %s %s is not a weight type", c.what, c.t)
		}
		for _, k := range c.ks {
			if _, err := c.t.RowBytes(k); err != nil {
				return nil, fmt.Errorf("synth: %s %s cannot hold rows of %d: %v", c.what, c.t, k, err)
			}
		}
	}
	if o.DenseType != quant.Q8_0 && o.DenseType != quant.F16 && o.DenseType != quant.BF16 {
		return nil, fmt.Errorf("synth: dense type %s: the embedding must be q8_0, f16 or bf16 (what the GPU gather reads)", o.DenseType)
	}
	g := &gen{s: s, o: o, pools: map[poolKey][][]byte{}}
	w := gguf.NewWriter()
	a := s.Arch
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", a},
		{"general.name", fmt.Sprintf("synth %s L%d E%d/%d H%d %s", a, s.Layers, s.ExpertsUsed, s.Experts, s.Embd, o.ExpertType)},
		{"general.quantization_version", uint32(2)},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".context_length", uint32(s.CtxLen)},
		{a + ".embedding_length", uint32(s.Embd)},
		{a + ".feed_forward_length", uint32(s.ExpertFF * s.ExpertsUsed)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.HeadsKV)},
		{a + ".attention.key_length", uint32(s.HeadDim)},
		{a + ".attention.value_length", uint32(s.HeadDim)},
		{a + ".rope.freq_base", float32(1e6)},
		{a + ".attention.layer_norm_rms_epsilon", float32(1e-6)},
		{a + ".expert_count", uint32(s.Experts)},
		{a + ".expert_used_count", uint32(s.ExpertsUsed)},
		{a + ".expert_feed_forward_length", uint32(s.ExpertFF)},
		{a + ".expert_weights_norm", true},
		{"strata.synth.zipf_s", float32(o.ZipfS)},
		{"strata.synth.seed", uint64(o.Seed)},
	}
	next := a == model.ArchQwen3Next
	if next {
		kvs = append(kvs, []struct {
			k string
			v any
		}{
			{a + ".expert_shared_feed_forward_length", uint32(s.SharedFF)},
			{a + ".full_attention_interval", uint32(s.FullAttnInterval)},
			{a + ".ssm.conv_kernel", uint32(s.ConvKernel)},
			{a + ".ssm.group_count", uint32(s.LinKHeads)},
			{a + ".ssm.time_step_rank", uint32(s.LinVHeads)},
			{a + ".ssm.state_size", uint32(s.LinKDim)},
			{a + ".ssm.inner_size", uint32(s.LinVHeads * s.LinVDim)},
		}...)
	}
	if s.RopeDim > 0 {
		kvs = append(kvs, struct {
			k string
			v any
		}{a + ".rope.dimension_count", uint32(s.RopeDim)})
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	for _, kv := range tokenizerKVs(s.Vocab) {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	H, F, E := s.Embd, s.ExpertFF, s.Experts
	qd, kvd := s.Heads*s.HeadDim, s.HeadsKV*s.HeadDim
	add := func(name string, t quant.Type, dims []int, fill func(out io.Writer) error) error {
		d := make([]uint64, len(dims))
		for i, v := range dims {
			d[i] = uint64(v)
		}
		return w.AddTensorFunc(name, gguf.Type(t), d, fill)
	}
	ones := func(n int) func(io.Writer) error {
		return func(out io.Writer) error { return writeF32(out, n, func(int) float32 { return 1 }) }
	}
	mat := func(name string, t quant.Type, k, rows int, sigma float64) error {
		return add(name, t, []int{k, rows}, g.rows(name, t, k, rows, sigma))
	}
	if err := add("token_embd.weight", o.DenseType, []int{H, s.Vocab}, g.embeddings()); err != nil {
		return nil, err
	}
	if err := add("output_norm.weight", quant.F32, []int{H}, ones(H)); err != nil {
		return nil, err
	}
	if err := mat("output.weight", o.DenseType, H, s.Vocab, 1/math.Sqrt(float64(H))); err != nil {
		return nil, err
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		post := "ffn_norm.weight"
		if next {
			post = "post_attention_norm.weight"
		}
		for _, n := range []string{"attn_norm.weight", post} {
			if err := add(p+n, quant.F32, []int{H}, ones(H)); err != nil {
				return nil, err
			}
		}
		in := 1 / math.Sqrt(float64(H))
		type mspec struct {
			n       string
			k, rows int
			sigma   float64
		}
		var mats []mspec
		if next && (i+1)%s.FullAttnInterval != 0 { // gated delta-net layer
			kd, vd, nv := s.LinKHeads*s.LinKDim, s.LinVHeads*s.LinVDim, s.LinVHeads
			mats = []mspec{{"attn_qkv.weight", H, 2*kd + vd, in}, {"attn_gate.weight", H, vd, in}, {"ssm_ba.weight", H, 2 * nv, in},
				{"ssm_out.weight", vd, H, outScale / math.Sqrt(float64(vd))}}
			vecs := []struct {
				n    string
				dims []int
				f    func(int) float32
			}{
				{"ssm_conv1d.weight", []int{s.ConvKernel, 2*kd + vd}, func(j int) float32 { return float32(0.5 * math.Cos(float64(j))) }},
				{"ssm_dt.bias", []int{nv}, func(int) float32 { return 0 }},
				{"ssm_a", []int{nv}, func(j int) float32 { return -float32(1+j%4) / 4 }}, // −exp(A_log): decays in (0, 1)
				{"ssm_norm.weight", []int{s.LinVDim}, func(int) float32 { return 1 }},
			}
			for _, v := range vecs {
				n, f := v.dims[0]*max(1, prod(v.dims[1:])), v.f
				if err := add(p+v.n, quant.F32, v.dims, func(out io.Writer) error { return writeF32(out, n, f) }); err != nil {
					return nil, err
				}
			}
		} else {
			qrows := qd
			if next {
				qrows = 2 * qd // each head's query, then its output gate
			}
			mats = []mspec{{"attn_q.weight", H, qrows, in}, {"attn_k.weight", H, kvd, in}, {"attn_v.weight", H, kvd, in},
				{"attn_output.weight", qd, H, outScale / math.Sqrt(float64(qd))}}
			for _, n := range []string{"attn_q_norm.weight", "attn_k_norm.weight"} {
				if err := add(p+n, quant.F32, []int{s.HeadDim}, ones(s.HeadDim)); err != nil {
					return nil, err
				}
			}
		}
		for _, m := range mats {
			if err := mat(p+m.n, o.DenseType, m.k, m.rows, m.sigma); err != nil {
				return nil, err
			}
		}
		if next {
			sf := s.SharedFF
			// The shared expert's gate input avoids the massive coordinate too.
			if err := add(p+"ffn_gate_inp_shexp.weight", quant.F32, []int{H}, func(out io.Writer) error {
				return writeF32(out, H, func(j int) float32 {
					if j == 0 {
						return 0
					}
					return float32(0.02 * math.Sin(float64(j)))
				})
			}); err != nil {
				return nil, err
			}
			for _, m := range []mspec{{"ffn_gate_shexp.weight", H, sf, in}, {"ffn_up_shexp.weight", H, sf, in},
				{"ffn_down_shexp.weight", sf, H, outScale / math.Sqrt(float64(sf))}} {
				if err := mat(p+m.n, o.DenseType, m.k, m.rows, m.sigma); err != nil {
					return nil, err
				}
			}
		}
		if err := add(p+"ffn_gate_inp.weight", quant.F16, []int{H, E}, g.router(i)); err != nil {
			return nil, err
		}
		for _, m := range []struct {
			n       string
			k, rows int
			sigma   float64
		}{{"ffn_gate_exps.weight", H, F, in}, {"ffn_up_exps.weight", H, F, in}, {"ffn_down_exps.weight", F, H, outScale / math.Sqrt(float64(F))}} {
			dims := []int{m.k, m.rows, E}
			if err := add(p+m.n, o.ExpertType, dims, g.rows(p+m.n, o.ExpertType, m.k, m.rows*E, m.sigma)); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

type poolKey struct {
	t     quant.Type
	k     int
	sigma float64
	input bool // reads the residual stream: no weight on the massive coordinate
}

type gen struct {
	s     Shape
	o     Options
	pools map[poolKey][][]byte
}

func seedOf(seed uint64, name string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, name)
	return h.Sum64() ^ seed
}

// pool returns PoolRows distinct rows of type t and length k with values N(0, σ²). Rows
// of matrices that read the residual stream (input) put no weight on the massive
// coordinate 0 — otherwise every projection would carry a token-independent component
// that swamps the router's noise — by zeroing element 0 (types with a quantizer) or the
// first block (IQ types, whose random blocks cannot set one element).
func (g *gen) pool(t quant.Type, k int, sigma float64, input bool) ([][]byte, error) {
	key := poolKey{t, k, sigma, input}
	if p, ok := g.pools[key]; ok {
		return p, nil
	}
	rng := rand.New(rand.NewPCG(seedOf(g.o.Seed, fmt.Sprintf("pool %d %d %g", t, k, sigma)), 7))
	rb, err := t.RowBytes(k)
	if err != nil {
		return nil, err
	}
	x := make([]float32, k)
	p := make([][]byte, g.o.PoolRows)
	for i := range p {
		p[i] = make([]byte, rb)
		for j := range x {
			x[j] = float32(rng.NormFloat64() * sigma)
		}
		if input {
			x[0] = 0
		}
		if err := quant.Quantize(t, x, p[i]); err != nil {
			if p[i], err = iqRow(t, k, sigma, input, rng); err != nil {
				return nil, err
			}
		}
	}
	g.pools[key] = p
	return p, nil
}

// iqRow is a random valid row of an IQ type whose block scales are set so each block's
// values have RMS σ (quant.RandomRow's scales span 2⁻¹⁸..2⁻⁴, too wild for a model).
// Only types whose block starts with its fp16 scale d are supported.
func iqRow(t quant.Type, k int, sigma float64, input bool, rng *rand.Rand) ([]byte, error) {
	switch t {
	case quant.IQ2_XS, quant.IQ3_XXS, quant.IQ3_S:
	default:
		return nil, fmt.Errorf("synth: no generator for %s rows (have f16, bf16, q8_0, q2_0, q4_K, q6_K, iq2_xs, iq3_xxs, iq3_s)", t)
	}
	r, err := quant.RandomRow(t, k, rng)
	if err != nil {
		return nil, err
	}
	bb, be := t.BlockBytes(), t.BlockElems()
	vals := make([]float32, k)
	for b := 0; b < k/be; b++ {
		blk := r[b*bb : (b+1)*bb]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		if d == 0 || (input && b == 0) {
			binary.LittleEndian.PutUint16(blk, 0)
			continue
		}
		if err := quant.DecodeRow(t, blk, vals[:be]); err != nil {
			return nil, err
		}
		var ss float64
		for _, v := range vals[:be] {
			ss += float64(v) * float64(v)
		}
		if rms := math.Sqrt(ss / float64(be)); rms > 0 {
			binary.LittleEndian.PutUint16(blk, quant.F32ToF16(float32(float64(d)*sigma/rms)))
		}
	}
	return r, nil
}

// rows writes rows rows of a matrix from the pool, picked by a hash of the tensor name.
func (g *gen) rows(name string, t quant.Type, k, rows int, sigma float64) func(io.Writer) error {
	return func(out io.Writer) error {
		p, err := g.pool(t, k, sigma, k == g.s.Embd)
		if err != nil {
			return fmt.Errorf("synth: %s: %w", name, err)
		}
		rng := rand.New(rand.NewPCG(seedOf(g.o.Seed, name), 3))
		// The first len(p) rows are a permutation of the pool, so a matrix with no more
		// rows than the pool has no two equal rows (equal output-head rows would make equal
		// logits: exact ties that no two engines need to break alike); later rows repeat.
		perm := rng.Perm(len(p))
		buf := make([]byte, 0, 1<<20)
		for r := 0; r < rows; r++ {
			row := p[rng.IntN(len(p))]
			if r < len(perm) {
				row = p[perm[r]]
			}
			if len(buf)+len(row) > cap(buf) {
				if _, err := out.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			buf = append(buf, row...)
		}
		_, err = out.Write(buf)
		return err
	}
}

// embeddings: N(0,1) rows whose coordinate 0 holds half the row's energy (see the package doc).
func (g *gen) embeddings() func(io.Writer) error {
	return func(out io.Writer) error {
		H, t := g.s.Embd, g.o.DenseType
		rng := rand.New(rand.NewPCG(seedOf(g.o.Seed, "token_embd"), 5))
		rb, err := t.RowBytes(H)
		if err != nil {
			return err
		}
		x := make([]float32, H)
		row := make([]byte, rb)
		const sigma = 0.05
		for r := 0; r < g.s.Vocab; r++ {
			for j := range x {
				x[j] = float32(rng.NormFloat64() * sigma)
			}
			x[0] = float32(sigma * math.Sqrt(float64(H-1)))
			if err := quant.Quantize(t, x, row); err != nil {
				return err
			}
			if _, err := out.Write(row); err != nil {
				return err
			}
		}
		return nil
	}
}

// router: F16 rows, weight 0 = ln p_e / √(H/2), the rest N(0, (1.28)²·2/(H−1)).
func (g *gen) router(layer int) func(io.Writer) error {
	return func(out io.Writer) error {
		H, E := g.s.Embd, g.s.Experts
		rng := rand.New(rand.NewPCG(seedOf(g.o.Seed, fmt.Sprintf("router %d", layer)), 9))
		rank := rng.Perm(E)
		sigma := sigmaGumbel * math.Sqrt(2/float64(H-1))
		x := make([]float32, H)
		row := make([]byte, 2*H)
		for e := 0; e < E; e++ {
			for j := range x {
				x[j] = float32(rng.NormFloat64() * sigma)
			}
			x[0] = float32(-g.o.ZipfS * math.Log(float64(rank[e]+1)) / math.Sqrt(float64(H)/2))
			if err := quant.Quantize(quant.F16, x, row); err != nil {
				return err
			}
			if _, err := out.Write(row); err != nil {
				return err
			}
		}
		return nil
	}
}

// Popularity returns the Zipf probabilities the router of layer was built for, by expert.
func Popularity(s Shape, o Options, layer int) []float64 {
	if o.ZipfS == 0 {
		o.ZipfS = 1
	}
	rng := rand.New(rand.NewPCG(seedOf(o.Seed, fmt.Sprintf("router %d", layer)), 9))
	rank := rng.Perm(s.Experts)
	p := make([]float64, s.Experts)
	var sum float64
	for e := range p {
		p[e] = math.Pow(float64(rank[e]+1), -o.ZipfS)
		sum += p[e]
	}
	for e := range p {
		p[e] /= sum
	}
	return p
}

func writeF32(out io.Writer, n int, f func(int) float32) error {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i)))
	}
	_, err := out.Write(b)
	return err
}

// tokenizerKVs is a byte-level BPE vocabulary with no merges: the 256 byte tokens, then
// <|endoftext|>, <|im_start|>, <|im_end|> (control), padded to vocab. Text round-trips
// one token per byte, which is all a synthetic model needs.
func tokenizerKVs(vocab int) []tokenizer.KV {
	d := tokenizer.Data{Model: "gpt2", Pre: "qwen2", BOS: -1, PAD: -1}
	for b := 0; b < 256; b++ {
		d.Tokens = append(d.Tokens, string(byteRune(byte(b))))
		d.Types = append(d.Types, tokenizer.TypeNormal)
	}
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		d.Tokens = append(d.Tokens, s)
		d.Types = append(d.Types, tokenizer.TypeControl)
	}
	d.EOS = 256
	d.PadTo(vocab)
	return d.GGUFKVs()
}

// byteRune is GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves,
// the rest map to U+0100 onwards in byte order.
func byteRune(b byte) rune {
	switch {
	case b >= '!' && b <= '~', b >= 0xA1 && b <= 0xAC, b >= 0xAE:
		return rune(b)
	}
	n := 0
	for c := 0; c < int(b); c++ {
		cb := byte(c)
		if !(cb >= '!' && cb <= '~' || cb >= 0xA1 && cb <= 0xAC || cb >= 0xAE) {
			n++
		}
	}
	return rune(256 + n)
}

// outScale scales the output projections (attn_output, ffn_down): layers nudge the
// residual stream instead of replacing it, so the massive coordinate keeps the router's
// bias (and its token-dependent noise) alive through every layer.
const outScale = 0.03

func prod(d []int) int {
	n := 1
	for _, v := range d {
		n *= v
	}
	return n
}
