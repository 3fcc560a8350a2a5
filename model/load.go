package model

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
)

// Source is where a model's weights and metadata come from: a mapped GGUF file, or the
// converter's in-memory output for a Hugging Face checkpoint.
type Source interface {
	Path() string // names the file or directory in messages
	Meta() Meta
	Tensor(name string) (*Tensor, bool)
	Names() []string
}

// Model is a loaded, validated model: weights still in their stored formats, small vectors widened.
type Model struct {
	Cfg     Config
	Vocab   int
	src     Source
	tokEmbd *Tensor
	outNorm []float32
	output  *Tensor // token_embd when the embeddings are tied
	layers  []layer
	q4      *q4Model // qwen4exp (qwen4exp.go); nil for the other architectures
}

type layer struct {
	attnNorm, postNorm []float32

	// full attention (qwen3moe; every FullAttnInterval-th qwen3next layer)
	wq, wk, wv, wo *Tensor
	qNorm, kNorm   []float32

	// gated delta-net (qwen3next)
	wqkv, wz, wba, wssmOut *Tensor
	conv                   []float32 // [channels][ConvKernel]
	ssmA, dtBias, ssmNorm  []float32

	// MoE
	router, gateExps, upExps, downExps *Tensor
	shGateInp                          []float32 // [Embd] (qwen3next)
	shGate, shUp, shDown               *Tensor
}

// Load validates every tensor against the metadata and returns the model. Errors name the
// file and the tensor or key; nothing large is read before all checks pass.
func Load(src Source) (m *Model, err error) {
	// Load widens the small vectors from the mapping; a fault there is an error too.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, faultError(src.Path(), r)
		}
	}()
	if arch, _ := src.Meta().String("general.architecture"); arch == ArchQwen4Exp {
		return loadQwen4Exp(src)
	}
	cfg, err := ParseConfig(src.Meta(), src.Path())
	if err != nil {
		return nil, err
	}
	m = &Model{Cfg: *cfg, src: src}
	c := cfg
	b := &binder{src: src, used: map[string]bool{}}
	get, vec := b.get, b.vec
	H := c.Embd
	emb, ok := src.Tensor("token_embd.weight")
	b.used["token_embd.weight"] = true
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: tensor token_embd.weight is missing", src.Path())
	case len(emb.Dims) != 2 || emb.Dims[0] != H || emb.Dims[1] <= 0:
		return nil, fmt.Errorf("%s: tensor token_embd.weight has shape %v, want [%d, vocab]", src.Path(), emb.Dims, H)
	}
	m.tokEmbd, m.Vocab = emb, emb.Dims[1]
	m.outNorm = vec("output_norm.weight", H)
	if _, ok := src.Tensor("output.weight"); ok {
		m.output = get("output.weight", H, m.Vocab)
	} else {
		m.output = emb
	}
	qd, kvd := c.Heads*c.HeadDim, c.HeadsKV*c.HeadDim
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		var l layer
		l.attnNorm = vec(p+"attn_norm.weight", H)
		if c.Arch == ArchQwen3MoE {
			l.postNorm = vec(p+"ffn_norm.weight", H)
		} else {
			l.postNorm = vec(p+"post_attention_norm.weight", H)
		}
		if c.IsRecurrent(i) {
			kd, vd := c.LinKHeads*c.LinKDim, c.LinVHeads*c.LinVDim
			if _, old := src.Tensor(p + "ssm_in.weight"); old {
				b.fail(fmt.Sprintf("tensor %sssm_in.weight is the older fused qkvz layout; reconvert with `strata-run convert` (attn_qkv + attn_gate)", p))
				b.used[p+"ssm_in.weight"] = true
			}
			l.wqkv = get(p+"attn_qkv.weight", H, 2*kd+vd)
			l.wz = get(p+"attn_gate.weight", H, vd)
			l.wba = get(p+"ssm_ba.weight", H, 2*c.LinVHeads)
			if t := get(p+"ssm_conv1d.weight", c.ConvKernel, 2*kd+vd); t != nil {
				l.conv = t.Float32s()
			}
			l.dtBias = vec(p+"ssm_dt.bias", c.LinVHeads)
			l.ssmA = vec(p+"ssm_a", c.LinVHeads)
			l.ssmNorm = vec(p+"ssm_norm.weight", c.LinVDim)
			l.wssmOut = get(p+"ssm_out.weight", vd, H)
		} else {
			qrows := qd
			if c.Arch == ArchQwen3Next {
				qrows = 2 * qd // each head's query followed by its output gate
			}
			l.wq = get(p+"attn_q.weight", H, qrows)
			l.wk = get(p+"attn_k.weight", H, kvd)
			l.wv = get(p+"attn_v.weight", H, kvd)
			l.wo = get(p+"attn_output.weight", qd, H)
			l.qNorm = vec(p+"attn_q_norm.weight", c.HeadDim)
			l.kNorm = vec(p+"attn_k_norm.weight", c.HeadDim)
		}
		l.router = get(p+"ffn_gate_inp.weight", H, c.Experts)
		l.gateExps = get(p+"ffn_gate_exps.weight", H, c.ExpertFF, c.Experts)
		l.upExps = get(p+"ffn_up_exps.weight", H, c.ExpertFF, c.Experts)
		l.downExps = get(p+"ffn_down_exps.weight", c.ExpertFF, H, c.Experts)
		if c.Arch == ArchQwen3Next {
			l.shGateInp = vec(p+"ffn_gate_inp_shexp.weight", H)
			l.shGate = get(p+"ffn_gate_shexp.weight", H, c.SharedFF)
			l.shUp = get(p+"ffn_up_shexp.weight", H, c.SharedFF)
			l.shDown = get(p+"ffn_down_shexp.weight", c.SharedFF, H)
		}
		m.layers = append(m.layers, l)
		if len(b.errs) > 0 {
			break
		}
	}
	if err := b.finish(c.Arch, c.Layers, "rope_freqs.weight"); err != nil {
		return nil, err
	}
	return m, nil
}

// sameDims compares ggml shapes, treating trailing 1s as absent ([64] == [64 1]).
func sameDims(got, want []int) bool {
	n := len(got)
	if len(want) > n {
		n = len(want)
	}
	for i := 0; i < n; i++ {
		g, w := 1, 1
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return false
		}
	}
	return true
}

// binder binds a loader's tensors by name, checking each shape against the one the
// metadata implies, and collects every problem so that Load reports them together.
type binder struct {
	src  Source
	used map[string]bool // every name bound (or consumed on purpose); the rest are unexpected
	errs []string
}

// get returns the tensor name with shape dims, or nil after noting why not.
func (b *binder) get(name string, dims ...int) *Tensor {
	b.used[name] = true
	t, ok := b.src.Tensor(name)
	if !ok {
		b.fail(fmt.Sprintf("tensor %s is missing", name))
		return nil
	}
	if !sameDims(t.Dims, dims) {
		b.fail(fmt.Sprintf("tensor %s has shape %v, the metadata implies %v", name, t.Dims, dims))
		return nil
	}
	return t
}

// vec returns the 1-D tensor name of n elements as float32s, or nil after noting why not.
func (b *binder) vec(name string, n int) []float32 {
	if t := b.get(name, n); t != nil {
		return t.Float32s()
	}
	return nil
}

func (b *binder) fail(msg string) { b.errs = append(b.errs, msg) }

// finish notes the source's tensors that nothing bound (other than ignore) as unexpected
// for arch with layers layers, then returns the problems (the first five) as one error,
// or nil when there are none.
func (b *binder) finish(arch string, layers int, ignore ...string) error {
	if len(b.errs) == 0 {
		var extra []string
		for _, n := range b.src.Names() {
			if !b.used[n] && !slices.Contains(ignore, n) {
				extra = append(extra, n)
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			if len(extra) > 5 {
				extra = append(extra[:5], "...")
			}
			b.fail(fmt.Sprintf("unexpected tensors for %s with %d layers: %s", arch, layers, strings.Join(extra, ", ")))
		}
	}
	if len(b.errs) == 0 {
		return nil
	}
	errs := b.errs
	if len(errs) > 5 {
		errs = append(errs[:5:5], fmt.Sprintf("(and %d more)", len(errs)-5))
	}
	return fmt.Errorf("%s: %s", b.src.Path(), strings.Join(errs, "; "))
}
