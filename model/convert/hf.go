// Package convert turns a Hugging Face Qwen3-MoE or Qwen3-Next checkpoint (config.json,
// *.safetensors, tokenizer.json, tokenizer_config.json) into a model in llama.cpp's GGUF
// conventions: metadata keys under the architecture name (`qwen3moe.*`, `qwen3next.*`),
// tensors named `blk.N.*`, experts stacked into one tensor per projection, and the
// Qwen3-Next linear-attention tensors transformed as llama.cpp's converter does. The
// result is a Plan: it can be written to a GGUF file (WriteGGUF) or served to the engine
// directly from memory (Source), so both paths share every transform.
package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/safetensors"
	"github.com/strata-hip/strata/model/tokenizer"
)

// hfConfig is the part of config.json the converter reads.
type hfConfig struct {
	Architectures       []string `json:"architectures"`
	ModelType           string   `json:"model_type"`
	VocabSize           int      `json:"vocab_size"`
	HiddenSize          int      `json:"hidden_size"`
	IntermediateSize    int      `json:"intermediate_size"`
	MoEIntermediateSize int      `json:"moe_intermediate_size"`
	NumLayers           int      `json:"num_hidden_layers"`
	NumHeads            int      `json:"num_attention_heads"`
	NumKVHeads          int      `json:"num_key_value_heads"`
	HeadDim             int      `json:"head_dim"`
	NumExperts          int      `json:"num_experts"`
	NumExpertsPerTok    int      `json:"num_experts_per_tok"`
	NormTopKProb        *bool    `json:"norm_topk_prob"`
	DecoderSparseStep   int      `json:"decoder_sparse_step"`
	MLPOnlyLayers       []int    `json:"mlp_only_layers"`
	RMSNormEps          float64  `json:"rms_norm_eps"`
	RopeTheta           float64  `json:"rope_theta"`
	RopeScaling         any      `json:"rope_scaling"`
	MaxPositions        int      `json:"max_position_embeddings"`
	AttentionBias       bool     `json:"attention_bias"`
	TieWordEmbeddings   bool     `json:"tie_word_embeddings"`
	HiddenAct           string   `json:"hidden_act"`
	UseSlidingWindow    bool     `json:"use_sliding_window"`
	LayerTypes          []string `json:"layer_types"`
	FullAttnInterval    int      `json:"full_attention_interval"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	LinNumKeyHeads      int      `json:"linear_num_key_heads"`
	LinNumValueHeads    int      `json:"linear_num_value_heads"`
	LinKeyHeadDim       int      `json:"linear_key_head_dim"`
	LinValueHeadDim     int      `json:"linear_value_head_dim"`
	LinConvKernelDim    int      `json:"linear_conv_kernel_dim"`
	SharedExpertInterSz int      `json:"shared_expert_intermediate_size"`
	RopeParameters      *struct {
		RopeTheta float64 `json:"rope_theta"`
		RopeType  string  `json:"rope_type"`
	} `json:"rope_parameters"`
}

// Tensor is one output tensor of a plan: its GGUF name, ggml dims, whether it must stay
// F32 whatever the requested output type, and how to compute its values.
type Tensor struct {
	Name    string
	Dims    []int // ggml order: Dims[0] is the row length
	KeepF32 bool
	Load    func() ([]float32, error)
	// LoadRows, when set, loads rows [r0, r0+n) alone; WriteGGUF then streams the tensor
	// in slices (the qwen4exp n-gram table is too large to hold).
	LoadRows func(r0, n int) ([]float32, error)
}

// Plan is a converted model before it is written: metadata and tensors in GGUF conventions.
type Plan struct {
	Dir     string
	Arch    string
	Meta    model.MapMeta
	Tensors []*Tensor
	ckpt    *safetensors.Checkpoint
	tokKVs  []tokenizer.KV
	// Notes are remarks for the user (parts of the checkpoint skipped, and why).
	Notes []string
	// SplitMaxBytes > 0 makes WriteGGUF write llama.cpp-style shards of at most this much
	// tensor data (PATH without .gguf + -0000k-of-0000N.gguf).
	SplitMaxBytes uint64
}

// Close releases the checkpoint files.
func (p *Plan) Close() error { return p.ckpt.Close() }

// FromHF reads config.json and the safetensors headers in dir and plans the conversion.
// Every tensor the architecture needs is checked for presence and shape before anything
// large is read. The tokenizer metadata is added separately (AddTokenizer).
func FromHF(dir string) (*Plan, error) {
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("convert: %w (a Hugging Face model directory needs config.json)", err)
	}
	var c hfConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", cfgPath, err)
	}
	arch := ""
	switch c.ModelType {
	case "qwen3_moe":
		arch = model.ArchQwen3MoE
	case "qwen3_next":
		arch = model.ArchQwen3Next
	case "qwen4_exp", "qwen4_exp_text":
		return fromHFQwen4Exp(dir, raw)
	default:
		return nil, fmt.Errorf("convert: %s: model_type %q is not supported (qwen3_moe, qwen3_next, qwen4_exp, qwen4_exp_text)", cfgPath, c.ModelType)
	}
	if err := checkHF(&c, cfgPath); err != nil {
		return nil, err
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	p := &Plan{Dir: dir, Arch: arch, Meta: model.MapMeta{}, ckpt: ck}
	if err := p.plan(&c, cfgPath); err != nil {
		ck.Close()
		return nil, err
	}
	return p, nil
}

func checkHF(c *hfConfig, where string) error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("convert: %s: %s = %v: %s", where, key, v, why)
	}
	for _, f := range []struct {
		k string
		v int
	}{{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers}, {"num_attention_heads", c.NumHeads},
		{"num_key_value_heads", c.NumKVHeads}, {"num_experts", c.NumExperts}, {"num_experts_per_tok", c.NumExpertsPerTok},
		{"moe_intermediate_size", c.MoEIntermediateSize}, {"max_position_embeddings", c.MaxPositions}, {"vocab_size", c.VocabSize}} {
		if f.v <= 0 {
			return bad(f.k, f.v, "must be positive")
		}
	}
	if c.HeadDim == 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if len(c.MLPOnlyLayers) > 0 {
		return bad("mlp_only_layers", c.MLPOnlyLayers, "dense layers are not supported")
	}
	if c.DecoderSparseStep > 1 {
		return bad("decoder_sparse_step", c.DecoderSparseStep, "only every-layer MoE (1) is supported")
	}
	if c.AttentionBias {
		return bad("attention_bias", true, "attention biases are not supported")
	}
	if c.RopeScaling != nil {
		return bad("rope_scaling", c.RopeScaling, "RoPE scaling is not supported")
	}
	if c.UseSlidingWindow {
		return bad("use_sliding_window", true, "sliding-window attention is not supported")
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return bad("hidden_act", c.HiddenAct, "only silu is supported")
	}
	if c.RopeTheta == 0 && c.RopeParameters != nil {
		c.RopeTheta = c.RopeParameters.RopeTheta
	}
	if !(c.RopeTheta > 0) {
		return bad("rope_theta", c.RopeTheta, "must be positive")
	}
	if !(c.RMSNormEps > 0) {
		return bad("rms_norm_eps", c.RMSNormEps, "must be positive")
	}
	if c.ModelType == "qwen3_next" {
		if c.FullAttnInterval == 0 {
			c.FullAttnInterval = 4
		}
		for i, lt := range c.LayerTypes {
			want := "linear_attention"
			if (i+1)%c.FullAttnInterval == 0 {
				want = "full_attention"
			}
			if lt != want {
				return bad("layer_types["+strconv.Itoa(i)+"]", lt, fmt.Sprintf("GGUF (qwen3next.full_attention_interval = %d) can only express %q here", c.FullAttnInterval, want))
			}
		}
		if c.LinNumKeyHeads <= 0 || c.LinNumValueHeads <= 0 || c.LinNumValueHeads%c.LinNumKeyHeads != 0 {
			return bad("linear_num_value_heads", c.LinNumValueHeads, fmt.Sprintf("must be a positive multiple of linear_num_key_heads %d", c.LinNumKeyHeads))
		}
		if c.LinKeyHeadDim <= 0 || c.LinValueHeadDim <= 0 || c.LinConvKernelDim <= 1 || c.SharedExpertInterSz <= 0 {
			return bad("linear_*_head_dim/linear_conv_kernel_dim/shared_expert_intermediate_size", []int{c.LinKeyHeadDim, c.LinValueHeadDim, c.LinConvKernelDim, c.SharedExpertInterSz}, "must be positive (conv kernel > 1)")
		}
	}
	return nil
}

func (p *Plan) plan(c *hfConfig, where string) error {
	a := p.Arch
	m := p.Meta
	m["general.architecture"] = a
	m["general.name"] = filepath.Base(filepath.Clean(p.Dir))
	m[a+".context_length"] = uint32(c.MaxPositions)
	m[a+".embedding_length"] = uint32(c.HiddenSize)
	m[a+".block_count"] = uint32(c.NumLayers)
	if c.IntermediateSize > 0 {
		m[a+".feed_forward_length"] = uint32(c.IntermediateSize)
	}
	m[a+".attention.head_count"] = uint32(c.NumHeads)
	m[a+".attention.head_count_kv"] = uint32(c.NumKVHeads)
	m[a+".attention.key_length"] = uint32(c.HeadDim)
	m[a+".attention.value_length"] = uint32(c.HeadDim)
	m[a+".rope.freq_base"] = float32(c.RopeTheta)
	m[a+".attention.layer_norm_rms_epsilon"] = float32(c.RMSNormEps)
	m[a+".expert_count"] = uint32(c.NumExperts)
	m[a+".expert_used_count"] = uint32(c.NumExpertsPerTok)
	m[a+".expert_feed_forward_length"] = uint32(c.MoEIntermediateSize)
	norm := true
	if c.NormTopKProb != nil {
		norm = *c.NormTopKProb
	}
	m[a+".expert_weights_norm"] = norm
	H, L, E, F := c.HiddenSize, c.NumLayers, c.NumExperts, c.MoEIntermediateSize
	nh, nkv, hd := c.NumHeads, c.NumKVHeads, c.HeadDim
	next := a == model.ArchQwen3Next
	if next {
		m[a+".expert_shared_feed_forward_length"] = uint32(c.SharedExpertInterSz)
		m[a+".ssm.conv_kernel"] = uint32(c.LinConvKernelDim)
		m[a+".ssm.state_size"] = uint32(c.LinKeyHeadDim)
		m[a+".ssm.group_count"] = uint32(c.LinNumKeyHeads)
		m[a+".ssm.time_step_rank"] = uint32(c.LinNumValueHeads)
		m[a+".ssm.inner_size"] = uint32(c.LinValueHeadDim * c.LinNumValueHeads)
		m[a+".full_attention_interval"] = uint32(c.FullAttnInterval)
		prf := 0.25 // transformers' default for Qwen3-Next
		if c.PartialRotaryFactor != nil {
			prf = *c.PartialRotaryFactor
		}
		m[a+".rope.dimension_count"] = uint32(float64(hd) * prf)
	}

	var errs []error
	// need checks a source tensor's presence and PyTorch shape now, so that a bad
	// checkpoint fails before any data is read.
	need := func(name string, shape ...int) string {
		if err := checkSource(name, p.ckpt.Info(name), shape); err != nil {
			errs = append(errs, err)
		}
		return name
	}
	// plain copies a 2-D or 1-D tensor; PyTorch [rows, cols] is ggml [cols, rows].
	plain := func(dst, src string, shape ...int) {
		need(src, shape...)
		p.add(dst, reverse(shape), len(shape) == 1, func() ([]float32, error) { return p.read(src) })
	}
	// norm copies a norm weight. Qwen3-Next's RMSNorms compute (1 + w)·norm(x); llama.cpp
	// stores 1 + w so that every RMSNorm in the engine is a plain multiply. (The gated
	// norm of the linear-attention block is a plain w·norm(x) and is not shifted.)
	norm1p := func(dst, src string, n int) {
		need(src, n)
		p.add(dst, []int{n}, true, func() ([]float32, error) {
			v, err := p.read(src)
			if next {
				for i := range v {
					v[i] += 1
				}
			}
			return v, err
		})
	}

	need("model.embed_tokens.weight", c.VocabSize, H)
	p.add("token_embd.weight", []int{H, c.VocabSize}, false, func() ([]float32, error) { return p.read("model.embed_tokens.weight") })
	norm1p("output_norm.weight", "model.norm.weight", H)
	if !c.TieWordEmbeddings {
		plain("output.weight", "lm_head.weight", c.VocabSize, H)
	}
	for i := 0; i < L; i++ {
		hp := fmt.Sprintf("model.layers.%d.", i)
		gp := fmt.Sprintf("blk.%d.", i)
		norm1p(gp+"attn_norm.weight", hp+"input_layernorm.weight", H)
		if next {
			norm1p(gp+"post_attention_norm.weight", hp+"post_attention_layernorm.weight", H)
		} else {
			norm1p(gp+"ffn_norm.weight", hp+"post_attention_layernorm.weight", H)
		}
		if !next || (i+1)%c.FullAttnInterval == 0 {
			qrows := nh * hd
			if next {
				// Qwen3-Next's q_proj emits, per head, the query then its output gate;
				// llama.cpp keeps that interleaved layout, so it is copied unchanged.
				qrows *= 2
			}
			plain(gp+"attn_q.weight", hp+"self_attn.q_proj.weight", qrows, H)
			plain(gp+"attn_k.weight", hp+"self_attn.k_proj.weight", nkv*hd, H)
			plain(gp+"attn_v.weight", hp+"self_attn.v_proj.weight", nkv*hd, H)
			plain(gp+"attn_output.weight", hp+"self_attn.o_proj.weight", H, nh*hd)
			norm1p(gp+"attn_q_norm.weight", hp+"self_attn.q_norm.weight", hd)
			norm1p(gp+"attn_k_norm.weight", hp+"self_attn.k_norm.weight", hd)
		} else {
			p.planLinearAttn(c, hp, gp, need)
		}
		// Router: kept F32 at every output type, as llama.cpp does (small, and its
		// top-k choice is sensitive to rounding).
		need(hp+"mlp.gate.weight", E, H)
		p.add(gp+"ffn_gate_inp.weight", []int{H, E}, true, func() ([]float32, error) { return p.read(hp + "mlp.gate.weight") })
		// Experts: the checkpoint has one [F, H] (gate, up) or [H, F] (down) tensor per
		// expert; GGUF stacks them into one [E, rows, cols] tensor per projection (ggml
		// [cols, rows, E]) so an expert is a contiguous slice of rows.
		for _, pr := range []struct {
			gguf, hf   string
			rows, cols int
		}{{"ffn_gate_exps", "gate_proj", F, H}, {"ffn_up_exps", "up_proj", F, H}, {"ffn_down_exps", "down_proj", H, F}} {
			names := make([]string, E)
			for e := 0; e < E; e++ {
				names[e] = need(fmt.Sprintf("%smlp.experts.%d.%s.weight", hp, e, pr.hf), pr.rows, pr.cols)
			}
			p.add(gp+pr.gguf+".weight", []int{pr.cols, pr.rows, E}, false, func() ([]float32, error) {
				out := make([]float32, 0, E*pr.rows*pr.cols)
				for _, n := range names {
					v, err := p.read(n)
					if err != nil {
						return nil, err
					}
					out = append(out, v...)
				}
				return out, nil
			})
		}
		if next {
			SF := c.SharedExpertInterSz
			plain(gp+"ffn_gate_shexp.weight", hp+"mlp.shared_expert.gate_proj.weight", SF, H)
			plain(gp+"ffn_up_shexp.weight", hp+"mlp.shared_expert.up_proj.weight", SF, H)
			plain(gp+"ffn_down_shexp.weight", hp+"mlp.shared_expert.down_proj.weight", H, SF)
			// The shared expert's gate is a [1, H] row; it is a router-like scalar gate, kept F32.
			need(hp+"mlp.shared_expert_gate.weight", 1, H)
			p.add(gp+"ffn_gate_inp_shexp.weight", []int{H}, true, func() ([]float32, error) { return p.read(hp + "mlp.shared_expert_gate.weight") })
		}
		if len(errs) > 0 {
			break
		}
	}
	if len(errs) > 0 {
		msg := ""
		for i, e := range errs {
			if i == 5 {
				msg += fmt.Sprintf("; (and %d more)", len(errs)-5)
				break
			}
			if i > 0 {
				msg += "; "
			}
			msg += e.Error()
		}
		return fmt.Errorf("convert: %s: %s", p.Dir, msg)
	}
	return nil
}

// planLinearAttn maps one Qwen3-Next gated delta-net layer.
func (p *Plan) planLinearAttn(c *hfConfig, hp, gp string, need func(string, ...int) string) {
	H := c.HiddenSize
	nk, nv, dk, dv, K := c.LinNumKeyHeads, c.LinNumValueHeads, c.LinKeyHeadDim, c.LinValueHeadDim, c.LinConvKernelDim
	kd, vd := nk*dk, nv*dv
	r := nv / nk
	qkvz := need(hp+"linear_attn.in_proj_qkvz.weight", 2*kd+2*vd, H)
	// in_proj_qkvz stores its output rows grouped per key head: for each of the nk groups,
	// [q dk | k dk | v r·dv | z r·dv]. llama.cpp splits it into attn_qkv, rows ordered
	// [all q | all k | all v] (the channel order of conv1d, so q, k, v become contiguous
	// slices of the conv output), and attn_gate (all z), both in head order.
	regroup := func(part int) func() ([]float32, error) {
		return func() ([]float32, error) {
			w, err := p.read(qkvz)
			if err != nil {
				return nil, err
			}
			grp := 2*dk + 2*r*dv
			sizes := []int{dk, dk, r * dv, r * dv}
			offs := []int{0, dk, 2 * dk, 2*dk + r*dv}
			var out []float32
			for _, s := range partsOf(part) {
				for g := 0; g < nk; g++ {
					row0 := g*grp + offs[s]
					out = append(out, w[row0*H:(row0+sizes[s])*H]...)
				}
			}
			return out, nil
		}
	}
	p.add(gp+"attn_qkv.weight", []int{H, 2*kd + vd}, false, regroup(0))
	p.add(gp+"attn_gate.weight", []int{H, vd}, false, regroup(1))
	// in_proj_ba ([b r | a r] per key-head group) is kept as is: ssm_ba.
	ba := need(hp+"linear_attn.in_proj_ba.weight", 2*nv, H)
	p.add(gp+"ssm_ba.weight", []int{H, 2 * nv}, false, func() ([]float32, error) { return p.read(ba) })
	// conv1d.weight [channels, 1, K]: the singleton middle dim is dropped (ggml [K, channels]).
	// Kept F32: its rows (K = 4 taps) are shorter than any quant block, as in llama.cpp.
	conv := need(hp+"linear_attn.conv1d.weight", 2*kd+vd, 1, K)
	p.add(gp+"ssm_conv1d.weight", []int{K, 2*kd + vd}, true, func() ([]float32, error) { return p.read(conv) })
	// dt_bias is renamed to ssm_dt.bias (llama.cpp's name for the time-step bias).
	dt := need(hp+"linear_attn.dt_bias", nv)
	p.add(gp+"ssm_dt.bias", []int{nv}, true, func() ([]float32, error) { return p.read(dt) })
	// A_log becomes ssm_a = -exp(A_log): the decay is g = -exp(A_log)·softplus(a + dt_bias),
	// so storing the factor saves an exp per head per token (llama.cpp's convention).
	alog := need(hp+"linear_attn.A_log", nv)
	p.add(gp+"ssm_a", []int{nv}, true, func() ([]float32, error) {
		v, err := p.read(alog)
		for i := range v {
			v[i] = float32(-math.Exp(float64(v[i])))
		}
		return v, err
	})
	// The gated RMSNorm weight (plain w·norm(x)·silu(z)) is copied unchanged.
	nw := need(hp+"linear_attn.norm.weight", dv)
	p.add(gp+"ssm_norm.weight", []int{dv}, true, func() ([]float32, error) { return p.read(nw) })
	out := need(hp+"linear_attn.out_proj.weight", H, vd)
	p.add(gp+"ssm_out.weight", []int{vd, H}, false, func() ([]float32, error) { return p.read(out) })
}

// partsOf lists the qkvz parts (0 q, 1 k, 2 v, 3 z) of attn_qkv (0) or attn_gate (1).
func partsOf(which int) []int {
	if which == 0 {
		return []int{0, 1, 2}
	}
	return []int{3}
}

func (p *Plan) add(name string, dims []int, keepF32 bool, load func() ([]float32, error)) {
	p.Tensors = append(p.Tensors, &Tensor{Name: name, Dims: dims, KeepF32: keepF32, Load: load})
}

func (p *Plan) read(name string) ([]float32, error) {
	v, _, err := p.ckpt.Float32(name)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return v, nil
}

// checkSource says what is wrong with the checkpoint's tensor name (in; nil when it is
// absent) for the PyTorch shape config.json implies, or returns nil.
func checkSource(name string, in *safetensors.Info, shape []int) error {
	switch {
	case in == nil:
		return fmt.Errorf("tensor %s is missing", name)
	case !slices.Equal(in.Shape, shape):
		return fmt.Errorf("tensor %s has shape %v, config.json implies %v", name, in.Shape, shape)
	case in.DType != "BF16" && in.DType != "F16" && in.DType != "F32":
		return fmt.Errorf("tensor %s has dtype %s; only BF16, F16 and F32 checkpoints are supported", name, in.DType)
	}
	return nil
}

func reverse(s []int) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// memSource serves a plan's tensors from memory as F32.
type memSource struct {
	path    string
	meta    model.MapMeta
	tensors map[string]*model.Tensor
	names   []string
}

func (s *memSource) Path() string                             { return s.path }
func (s *memSource) Meta() model.Meta                         { return s.meta }
func (s *memSource) Tensor(name string) (*model.Tensor, bool) { t, ok := s.tensors[name]; return t, ok }
func (s *memSource) Names() []string                          { return s.names }

// Source computes every tensor of the plan in float32 and serves them to the engine
// without writing a file (the F32 conversion, in memory).
func (p *Plan) Source() (model.Source, error) {
	s := &memSource{path: p.Dir, meta: p.Meta, tensors: map[string]*model.Tensor{}}
	for _, t := range p.Tensors {
		v, err := t.Load()
		if err != nil {
			return nil, err
		}
		s.tensors[t.Name] = model.NewF32Tensor(t.Name, t.Dims, v)
		s.names = append(s.names, t.Name)
	}
	return s, nil
}
