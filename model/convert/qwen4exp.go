package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/safetensors"
)

// qwen4exp (Qwen3.8-Flash-Next, docs: qwen4exp.md) conversion. The text model is mapped to
// GGUF in llama.cpp's qwen4exp conventions (§11 of the spec); the vision tower is skipped
// with a note. GGUF names the spec could not confirm are all in Qwen4ExpChosenNames.

// Qwen4ExpChosenNames lists every GGUF name (metadata key or tensor) this converter writes
// that the spec marks unverified or could not find, with the choice made. The engine reads
// the same strings (they are repeated in model/qwen4exp_load.go); change both together.
var Qwen4ExpChosenNames = []struct{ Name, Note string }{
	{"qwen4exp.embedding_length_per_layer_input", "PLE table row width (160); key string taken from the loader's LLM_KV name, unverified"},
	{"blk.{L}.nextn.enorm.weight", "mtp.pre_fc_norm_embedding (+1); the Qwen3-Next MTP name, assumed inherited"},
	{"blk.{L}.nextn.hnorm.weight", "mtp.pre_fc_norm_hidden (+1), [4H], one RMS over all 4H values; assumed inherited name"},
	{"blk.{L}.nextn.output_hc_norm.weight", "mtp.hyper_connection_mixer.hc_norm (+1); no published name, chosen to mirror output_hc_norm"},
	{"blk.{L}.nextn.output_hc_down.weight", "mtp.hyper_connection_mixer.input_mix_weight_down; chosen"},
	{"blk.{L}.nextn.output_hc_up.weight", "mtp.hyper_connection_mixer.input_mix_weight_up; chosen"},
	{"qwen4exp.ssm.output_gate_type", "Strata's own key: \"sigmoid\" or \"silu\" (config output_gate_type); absent means sigmoid"},
}

type q4HFConfig struct {
	ModelType        string   `json:"model_type"`
	VocabSize        int      `json:"vocab_size"`
	HiddenSize       int      `json:"hidden_size"`
	NumLayers        int      `json:"num_hidden_layers"`
	LayerTypes       []string `json:"layer_types"`
	FullAttnInterval int      `json:"full_attention_interval"`
	NumHeads         int      `json:"num_attention_heads"`
	NumKVHeads       int      `json:"num_key_value_heads"`
	HeadDim          int      `json:"head_dim"`
	PartialRotary    *float64 `json:"partial_rotary_factor"`
	RopeTheta        float64  `json:"rope_theta"`
	RopeParameters   *struct {
		RopeType      string   `json:"rope_type"`
		RopeTheta     float64  `json:"rope_theta"`
		PartialRotary *float64 `json:"partial_rotary_factor"`
		MRopeSection  []int    `json:"mrope_section"`
	} `json:"rope_parameters"`
	RopeScaling     any     `json:"rope_scaling"`
	LinKeyHeads     int     `json:"linear_num_key_heads"`
	LinValueHeads   int     `json:"linear_num_value_heads"`
	LinKeyDim       int     `json:"linear_key_head_dim"`
	LinValueDim     int     `json:"linear_value_head_dim"`
	LinConv         int     `json:"linear_conv_kernel_dim"`
	OutputGateType  *string `json:"output_gate_type"`
	IdxHeads        int     `json:"indexer_n_heads"`
	IdxKVHeads      int     `json:"indexer_kv_heads"`
	IdxHeadDim      int     `json:"indexer_head_dim"`
	IdxBudget       int     `json:"indexer_budget"`
	IdxCompress     int     `json:"indexer_compress_ratio"`
	NumExperts      int     `json:"num_experts"`
	ExpertsPerTok   int     `json:"num_experts_per_tok"`
	NormTopK        *bool   `json:"norm_topk_prob"`
	MoEInter        int     `json:"moe_intermediate_size"`
	SharedInter     int     `json:"shared_expert_intermediate_size"`
	HCCount         int     `json:"hc_count"`
	HCLowRank       int     `json:"hc_lowrank"`
	PLELayerIDs     []int   `json:"ple_layer_ids"`
	PLEEmbedDim     int     `json:"ple_embed_dim"`
	PLEConvKernel   int     `json:"ple_conv_kernel_size"`
	NgramSize       int     `json:"ngram_size"`
	HeadsPerNgram   int     `json:"heads_per_ngram"`
	NgramVocabBase  int64   `json:"ngram_vocab_size_base"`
	NgramDivisible  int64   `json:"make_ngram_vocab_size_divisible_by"`
	SplitNgramParts int     `json:"split_ngram_parts"`
	Seed            *int64  `json:"seed"`
	EOS             any     `json:"eos_token_id"`
	RMSNormEps      float64 `json:"rms_norm_eps"`
	TieEmbeddings   bool    `json:"tie_word_embeddings"`
	MaxPositions    int     `json:"max_position_embeddings"`
	MTPLayers       int     `json:"mtp_num_hidden_layers"`
	HiddenAct       string  `json:"hidden_act"`
	AttentionBias   bool    `json:"attention_bias"`
	ImageTokenID    *int64  `json:"image_token_id"`
	rot, eos        int
	theta           float64
	gate            string
	sections        []uint32
	ple             *q4PLEGeom
	qsa             []bool
	hasVision       bool
}

// q4PLEGeom is the n-gram table geometry (spec §7), derived from the config.
type q4PLEGeom struct {
	layer, nHeads, headDim int
	sizes, offsets, mult   []int64
	used, rows             int64
}

// qwen4ExpConfig parses config.json of a qwen4_exp (text_config nested) or qwen4_exp_text model.
func qwen4ExpConfig(raw []byte, where string) (*q4HFConfig, error) {
	var top struct {
		ModelType    string          `json:"model_type"`
		TextConfig   json.RawMessage `json:"text_config"`
		VisionConfig json.RawMessage `json:"vision_config"`
		Tie          *bool           `json:"tie_word_embeddings"`
		ImageTokenID *int64          `json:"image_token_id"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", where, err)
	}
	body := raw
	if top.ModelType == "qwen4_exp" {
		if len(top.TextConfig) == 0 {
			return nil, fmt.Errorf("convert: %s: model_type qwen4_exp without text_config", where)
		}
		body = top.TextConfig
	}
	c := &q4HFConfig{}
	if err := json.Unmarshal(body, c); err != nil {
		return nil, fmt.Errorf("convert: %s: text config: %w", where, err)
	}
	if top.ModelType == "qwen4_exp" {
		if top.Tie != nil {
			c.TieEmbeddings = *top.Tie
		}
		if top.ImageTokenID != nil {
			c.ImageTokenID = top.ImageTokenID
		}
		c.hasVision = len(top.VisionConfig) > 0
	}
	return c, c.check(where)
}

func (c *q4HFConfig) check(where string) error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("convert: %s: %s = %v: %s", where, key, v, why)
	}
	for _, f := range []struct {
		k string
		v int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
		{"linear_num_key_heads", c.LinKeyHeads}, {"linear_num_value_heads", c.LinValueHeads},
		{"linear_key_head_dim", c.LinKeyDim}, {"linear_value_head_dim", c.LinValueDim}, {"linear_conv_kernel_dim", c.LinConv},
		{"indexer_n_heads", c.IdxHeads}, {"indexer_kv_heads", c.IdxKVHeads}, {"indexer_head_dim", c.IdxHeadDim},
		{"indexer_budget", c.IdxBudget}, {"indexer_compress_ratio", c.IdxCompress},
		{"num_experts", c.NumExperts}, {"num_experts_per_tok", c.ExpertsPerTok}, {"moe_intermediate_size", c.MoEInter},
		{"shared_expert_intermediate_size", c.SharedInter}, {"hc_count", c.HCCount}, {"hc_lowrank", c.HCLowRank},
		{"max_position_embeddings", c.MaxPositions}} {
		if f.v <= 0 {
			return bad(f.k, f.v, "must be positive")
		}
	}
	switch {
	case c.HCCount < 2:
		return bad("hc_count", c.HCCount, "must be > 1 (transformers' rule)")
	case c.IdxKVHeads != 1:
		return bad("indexer_kv_heads", c.IdxKVHeads, "must be 1 (transformers' rule)")
	case c.IdxBudget%c.IdxCompress != 0:
		return bad("indexer_budget", c.IdxBudget, fmt.Sprintf("must be a multiple of indexer_compress_ratio %d", c.IdxCompress))
	case c.LinValueHeads%c.LinKeyHeads != 0:
		return bad("linear_num_value_heads", c.LinValueHeads, fmt.Sprintf("must be a multiple of linear_num_key_heads %d", c.LinKeyHeads))
	case c.NumHeads%c.NumKVHeads != 0:
		return bad("num_attention_heads", c.NumHeads, fmt.Sprintf("must be a multiple of num_key_value_heads %d", c.NumKVHeads))
	case c.ExpertsPerTok > c.NumExperts:
		return bad("num_experts_per_tok", c.ExpertsPerTok, "exceeds num_experts")
	case c.HiddenAct != "" && c.HiddenAct != "silu":
		return bad("hidden_act", c.HiddenAct, "only silu is supported")
	case c.AttentionBias:
		return bad("attention_bias", true, "attention biases are not supported")
	case c.RopeScaling != nil:
		return bad("rope_scaling", c.RopeScaling, "RoPE scaling is not supported")
	case !(c.RMSNormEps > 0):
		return bad("rms_norm_eps", c.RMSNormEps, "must be positive")
	case c.MTPLayers > 1:
		return bad("mtp_num_hidden_layers", c.MTPLayers, "at most one MTP layer is supported")
	}
	c.gate = "sigmoid"
	if c.OutputGateType != nil {
		c.gate = *c.OutputGateType
	}
	if c.gate != "sigmoid" && c.gate != "silu" {
		return bad("output_gate_type", c.gate, "must be sigmoid or silu")
	}
	c.theta = c.RopeTheta
	prf := 1.0
	if c.PartialRotary != nil {
		prf = *c.PartialRotary
	}
	if rp := c.RopeParameters; rp != nil {
		if rp.RopeType != "" && rp.RopeType != "default" {
			return bad("rope_parameters.rope_type", rp.RopeType, "only default RoPE is supported")
		}
		if rp.RopeTheta > 0 {
			c.theta = rp.RopeTheta
		}
		if rp.PartialRotary != nil {
			prf = *rp.PartialRotary
		}
		for _, s := range rp.MRopeSection {
			c.sections = append(c.sections, uint32(s))
		}
		for len(c.sections) > 0 && len(c.sections) < 4 {
			c.sections = append(c.sections, 0)
		}
	}
	if !(c.theta > 0) {
		return bad("rope_theta", c.theta, "must be positive")
	}
	c.rot = int(float64(c.HeadDim) * prf)
	if c.rot <= 0 || c.rot%2 != 0 || c.rot > c.HeadDim || c.rot > c.IdxHeadDim {
		return bad("partial_rotary_factor", prf, fmt.Sprintf("gives rotary dim %d; it must be even, positive and at most head_dim %d and indexer_head_dim %d", c.rot, c.HeadDim, c.IdxHeadDim))
	}
	// Layer types: transformers accepts linear_attention and (qwen_sparse_)full_attention;
	// without the list, every full_attention_interval-th layer is attention.
	if c.FullAttnInterval == 0 {
		c.FullAttnInterval = 4
	}
	if len(c.LayerTypes) != 0 && len(c.LayerTypes) != c.NumLayers {
		return bad("layer_types", len(c.LayerTypes), fmt.Sprintf("entries; num_hidden_layers is %d", c.NumLayers))
	}
	c.qsa = make([]bool, c.NumLayers)
	for i := range c.qsa {
		if len(c.LayerTypes) == 0 {
			c.qsa[i] = (i+1)%c.FullAttnInterval == 0
			continue
		}
		switch c.LayerTypes[i] {
		case "linear_attention":
		case "full_attention", "qwen_sparse_attention":
			c.qsa[i] = true
		default:
			return bad(fmt.Sprintf("layer_types[%d]", i), c.LayerTypes[i], "must be linear_attention or full_attention")
		}
	}
	// EOS: transformers takes the first id of a list (llama.cpp's converter the last).
	switch v := c.EOS.(type) {
	case float64:
		c.eos = int(v)
	case []any:
		if len(v) > 0 {
			if f, ok := v[0].(float64); ok {
				c.eos = int(f)
			}
		}
	}
	if len(c.PLELayerIDs) > 0 {
		if len(c.PLELayerIDs) > 1 {
			return bad("ple_layer_ids", c.PLELayerIDs, "only one PLE layer is supported (GGUF has a single per_layer_token_embd table)")
		}
		if c.eos <= 0 || c.eos >= c.VocabSize {
			return bad("eos_token_id", c.EOS, "PLE needs the n-gram cut token inside the vocabulary")
		}
		g, err := c.pleGeometry(where)
		if err != nil {
			return err
		}
		c.ple = g
	}
	return nil
}

func (c *q4HFConfig) pleGeometry(where string) (*q4PLEGeom, error) {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("convert: %s: %s = %v: %s", where, key, v, why)
	}
	id := c.PLELayerIDs[0]
	if id < 1 || id > c.NumLayers {
		return nil, bad("ple_layer_ids", c.PLELayerIDs, "ids are one-indexed layers in [1, num_hidden_layers]")
	}
	if c.NgramSize == 0 {
		c.NgramSize = 3
	}
	if c.HeadsPerNgram == 0 {
		c.HeadsPerNgram = 8
	}
	if c.PLEEmbedDim == 0 {
		c.PLEEmbedDim = c.HiddenSize
	}
	if c.PLEConvKernel == 0 {
		c.PLEConvKernel = 4
	}
	if c.NgramDivisible == 0 {
		c.NgramDivisible = 128
	}
	if c.SplitNgramParts == 0 {
		c.SplitNgramParts = 512
	}
	seed := int64(1234)
	if c.Seed != nil {
		seed = *c.Seed
	}
	// Limits far above the real model's (3, 8, 2e7) keep the prime search and the table
	// size sane for any input.
	if c.NgramSize < 2 || c.NgramSize > 8 || c.HeadsPerNgram <= 0 || c.HeadsPerNgram > 64 || c.NgramVocabBase < 2 || c.NgramVocabBase > 1<<36 ||
		c.NgramDivisible <= 0 || c.NgramDivisible > 1<<20 || c.PLEConvKernel < 1 || c.PLEConvKernel > 64 {
		return nil, bad("ngram_size/heads_per_ngram/ngram_vocab_size_base/make_ngram_vocab_size_divisible_by/ple_conv_kernel_size",
			[]any{c.NgramSize, c.HeadsPerNgram, c.NgramVocabBase, c.NgramDivisible, c.PLEConvKernel}, "need ngram_size in [2, 8], heads_per_ngram in [1, 64], base in [2, 2^36], positive divisor ≤ 2^20, conv kernel in [1, 64]")
	}
	nh := (c.NgramSize - 1) * c.HeadsPerNgram
	if c.PLEEmbedDim%nh != 0 {
		return nil, bad("ple_embed_dim", c.PLEEmbedDim, fmt.Sprintf("must be a multiple of (ngram_size-1)·heads_per_ngram = %d", nh))
	}
	g := &q4PLEGeom{layer: id - 1, nHeads: nh, headDim: c.PLEEmbedDim / nh}
	// Head h of PLE layer index k (k = 0: the only one) uses the (k·nh+h+1)-th prime ≥ base.
	p := c.NgramVocabBase - 1
	for h := 0; h < nh; h++ {
		p++
		for !isPrime(p) {
			p++
		}
		g.sizes = append(g.sizes, p)
		g.offsets = append(g.offsets, g.used)
		g.used += p
	}
	g.rows = (g.used + c.NgramDivisible - 1) / c.NgramDivisible * c.NgramDivisible
	g.mult = ngramMultipliers(int64(c.VocabSize), c.NgramSize, 0, seed)
	return g, nil
}

func isPrime(v int64) bool {
	if v < 2 {
		return false
	}
	if v%2 == 0 {
		return v == 2
	}
	for d := int64(3); d*d <= v; d += 2 {
		if v%d == 0 {
			return false
		}
	}
	return true
}

// ngramMultipliers are the n-gram hash multipliers (spec §7): odd, below
// ((2^63−1)/vocab)/2·2 so that token·m < 2^63, from splitmix64 of a seeded sequence.
func ngramMultipliers(vocab int64, n int, pleIndex int, seed int64) []int64 {
	const gamma = 0x9E3779B97F4A7C15
	half := uint64(math.MaxInt64/max(vocab, 1)) / 2
	half = max(half, 1)
	base := uint64(seed + 10007*int64(pleIndex))
	out := make([]int64, n)
	for i := range out {
		v := base + gamma*uint64(i+1)
		v += gamma
		v = (v ^ v>>30) * 0xBF58476D1CE4E5B9
		v = (v ^ v>>27) * 0x94D049BB133111EB
		v ^= v >> 31
		out[i] = int64(2*(v%half) + 1)
	}
	return out
}

// fromHFQwen4Exp plans a qwen4exp conversion; raw is config.json.
func fromHFQwen4Exp(dir string, raw []byte) (*Plan, error) {
	cfgPath := filepath.Join(dir, "config.json")
	c, err := qwen4ExpConfig(raw, cfgPath)
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	p := &Plan{Dir: dir, Arch: model.ArchQwen4Exp, Meta: model.MapMeta{}, ckpt: ck}
	if c.MTPLayers == 0 && ck.Info("mtp.fc_embedding.weight") != nil {
		// transformers does not read mtp_num_hidden_layers; the tensors decide.
		c.MTPLayers = 1
		p.Notes = append(p.Notes, "config.json does not set mtp_num_hidden_layers; the checkpoint has mtp.* tensors, converted as one MTP block")
	}
	if err := p.planQwen4Exp(c); err != nil {
		ck.Close()
		return nil, err
	}
	if err := qwen4ExpErrNotes(p); err != nil {
		ck.Close()
		return nil, err
	}
	return p, nil
}

func (p *Plan) planQwen4Exp(c *q4HFConfig) error {
	a := model.ArchQwen4Exp
	m := p.Meta
	ck := p.ckpt
	// The multimodal checkpoint nests the text model under model.language_model.; the
	// text-only one (and the tiny oracle) under model.
	pre := "model."
	if ck != nil && ck.Info("model.language_model.embed_tokens.weight") != nil {
		pre = "model.language_model."
	}
	H, L, E, F, SF := c.HiddenSize, c.NumLayers, c.NumExperts, c.MoEInter, c.SharedInter
	HC, LR := c.HCCount, c.HCLowRank
	HH := HC * H
	nh, nkv, hd := c.NumHeads, c.NumKVHeads, c.HeadDim
	nL := L + c.MTPLayers

	m["general.architecture"] = a
	m["general.name"] = filepath.Base(filepath.Clean(p.Dir))
	m[a+".context_length"] = uint32(c.MaxPositions)
	m[a+".embedding_length"] = uint32(H)
	m[a+".block_count"] = uint32(nL)
	m[a+".nextn_predict_layers"] = uint32(c.MTPLayers)
	m[a+".attention.head_count"] = uint32(nh)
	m[a+".attention.head_count_kv"] = uint32(nkv)
	m[a+".attention.key_length"] = uint32(hd)
	m[a+".attention.value_length"] = uint32(hd)
	m[a+".attention.layer_norm_rms_epsilon"] = float32(c.RMSNormEps)
	m[a+".rope.freq_base"] = float32(c.theta)
	m[a+".rope.dimension_count"] = uint32(c.rot)
	if len(c.sections) > 0 {
		m[a+".rope.dimension_sections"] = c.sections
	}
	m[a+".expert_count"] = uint32(E)
	m[a+".expert_used_count"] = uint32(c.ExpertsPerTok)
	m[a+".expert_feed_forward_length"] = uint32(F)
	m[a+".expert_shared_feed_forward_length"] = uint32(SF)
	norm := true
	if c.NormTopK != nil {
		norm = *c.NormTopK
	}
	m[a+".expert_weights_norm"] = norm
	m[a+".ssm.conv_kernel"] = uint32(c.LinConv)
	m[a+".ssm.state_size"] = uint32(c.LinKeyDim)
	m[a+".ssm.group_count"] = uint32(c.LinKeyHeads)
	m[a+".ssm.time_step_rank"] = uint32(c.LinValueHeads)
	m[a+".ssm.inner_size"] = uint32(c.LinValueHeads * c.LinValueDim)
	m[a+".ssm.output_gate_type"] = c.gate
	m[a+".full_attention_interval"] = uint32(c.FullAttnInterval)
	m[a+".hyper_connection.count"] = uint32(HC)
	m[a+".hyper_connection.low_rank"] = uint32(LR)
	m[a+".attention.indexer.head_count"] = uint32(c.IdxHeads)
	m[a+".attention.indexer.key_length"] = uint32(c.IdxHeadDim)
	m[a+".attention.indexer.top_k"] = uint32(c.IdxBudget)
	ratios := make([]uint32, nL)
	for i := 0; i < L; i++ {
		if c.qsa[i] {
			ratios[i] = uint32(c.IdxCompress)
		}
	}
	m[a+".attention.compress_ratios"] = ratios

	var errs []error
	used := map[string]bool{}
	need := func(name string, shape ...int) string {
		used[name] = true
		if ck == nil { // synthetic plan (Synth): names and shapes only
			return name
		}
		if err := checkSource(name, ck.Info(name), shape); err != nil {
			errs = append(errs, err)
		}
		return name
	}
	plain := func(dst, src string, keepF32 bool, shape ...int) {
		need(src, shape...)
		p.add(dst, reverse(shape), keepF32 || len(shape) == 1, func() ([]float32, error) { return p.read(src) })
	}
	// Every Qwen4ExpTextRMSNorm multiplies by 1 + w; GGUF stores 1 + w (spec §11 norm rule).
	norm1p := func(dst, src string, n int) {
		need(src, n)
		p.add(dst, []int{n}, true, func() ([]float32, error) {
			v, err := p.read(src)
			for i := range v {
				v[i]++
			}
			return v, err
		})
	}
	hc := func(gp, hp string, inject bool) {
		norm1p(gp+"norm.weight", hp+"hc_norm.weight", HH)
		plain(gp+"down.weight", hp+"input_mix_weight_down.weight", false, LR, HH)
		plain(gp+"up.weight", hp+"input_mix_weight_up.weight", false, HH, LR)
		if inject {
			plain(gp+"inject.weight", hp+"block_inject_weight.weight", true, HC, HH)
		}
	}
	qsa := func(gp, hp string) {
		plain(gp+"attn_q.weight", hp+"self_attn.q_proj.weight", false, 2*nh*hd, H)
		plain(gp+"attn_k.weight", hp+"self_attn.k_proj.weight", false, nkv*hd, H)
		plain(gp+"attn_v.weight", hp+"self_attn.v_proj.weight", false, nkv*hd, H)
		plain(gp+"attn_output.weight", hp+"self_attn.o_proj.weight", false, H, nh*hd)
		norm1p(gp+"attn_q_norm.weight", hp+"self_attn.q_norm.weight", hd)
		norm1p(gp+"attn_k_norm.weight", hp+"self_attn.k_norm.weight", hd)
		iq, ihd := c.IdxHeads*c.IdxHeadDim, c.IdxHeadDim
		src := need(hp+"self_attn.indexer.index_qk_proj.weight", iq+ihd, H)
		p.add(gp+"indexer.q_proj.weight", []int{H, iq}, false, func() ([]float32, error) {
			v, err := p.read(src)
			if err != nil {
				return nil, err
			}
			return v[:iq*H], nil
		})
		p.add(gp+"indexer.k_proj.weight", []int{H, ihd}, false, func() ([]float32, error) {
			v, err := p.read(src)
			if err != nil {
				return nil, err
			}
			return v[iq*H:], nil
		})
		norm1p(gp+"indexer.q_norm.weight", hp+"self_attn.indexer.q_layernorm.weight", ihd)
		norm1p(gp+"indexer.k_norm.weight", hp+"self_attn.indexer.k_layernorm.weight", ihd)
	}
	moe := func(gp, hp string) {
		plain(gp+"ffn_gate_inp.weight", hp+"mlp.gate.weight", true, E, H)
		gu := need(hp+"mlp.experts.gate_up_proj", E, 2*F, H)
		half := func(second bool) func() ([]float32, error) {
			return func() ([]float32, error) {
				v, err := p.read(gu)
				if err != nil {
					return nil, err
				}
				out := make([]float32, 0, E*F*H)
				for e := 0; e < E; e++ {
					r0 := e * 2 * F
					if second {
						r0 += F
					}
					out = append(out, v[r0*H:(r0+F)*H]...)
				}
				return out, nil
			}
		}
		p.add(gp+"ffn_gate_exps.weight", []int{H, F, E}, false, half(false))
		p.add(gp+"ffn_up_exps.weight", []int{H, F, E}, false, half(true))
		dn := need(hp+"mlp.experts.down_proj", E, H, F)
		p.add(gp+"ffn_down_exps.weight", []int{F, H, E}, false, func() ([]float32, error) { return p.read(dn) })
		plain(gp+"ffn_gate_shexp.weight", hp+"mlp.shared_expert.gate_proj.weight", false, SF, H)
		plain(gp+"ffn_up_shexp.weight", hp+"mlp.shared_expert.up_proj.weight", false, SF, H)
		plain(gp+"ffn_down_shexp.weight", hp+"mlp.shared_expert.down_proj.weight", false, H, SF)
		g := need(hp+"mlp.shared_expert_gate.weight", 1, H)
		p.add(gp+"ffn_gate_inp_shexp.weight", []int{H}, true, func() ([]float32, error) { return p.read(g) })
	}

	need(pre+"embed_tokens.weight", c.VocabSize, H)
	p.add("token_embd.weight", []int{H, c.VocabSize}, false, func() ([]float32, error) { return p.read(pre + "embed_tokens.weight") })
	if !c.TieEmbeddings {
		plain("output.weight", "lm_head.weight", false, c.VocabSize, H)
	}
	hc("output_hc_", pre+"hyper_connection_mixer.", false)
	var table func()
	for i := 0; i < L; i++ {
		hp := fmt.Sprintf("%slayers.%d.", pre, i)
		gp := fmt.Sprintf("blk.%d.", i)
		hc(gp+"hc_attn_", hp+"attn_hyper_connection.", true)
		hc(gp+"hc_ffn_", hp+"mlp_hyper_connection.", true)
		if c.qsa[i] {
			qsa(gp, hp)
		} else {
			p.planQwen4GDN(c, hp, gp, need)
		}
		moe(gp, hp)
		if c.ple != nil && c.ple.layer == i {
			table = p.planQwen4PLE(c, hp, gp, need, used)
		}
		if len(errs) > 0 {
			break
		}
	}
	if c.MTPLayers == 1 && len(errs) == 0 {
		gp := fmt.Sprintf("blk.%d.", L)
		norm1p(gp+"nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", H)
		norm1p(gp+"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", HH)
		fe := need("mtp.fc_embedding.weight", H, H)
		fh := need("mtp.fc_hidden.weight", H, H)
		// eh_proj = [fc_embedding | fc_hidden] along the input dimension (llama.cpp's fused form).
		p.add(gp+"nextn.eh_proj.weight", []int{2 * H, H}, false, func() ([]float32, error) {
			e, err := p.read(fe)
			if err != nil {
				return nil, err
			}
			h, err := p.read(fh)
			if err != nil {
				return nil, err
			}
			out := make([]float32, 0, 2*H*H)
			for r := 0; r < H; r++ {
				out = append(append(out, e[r*H:(r+1)*H]...), h[r*H:(r+1)*H]...)
			}
			return out, nil
		})
		hp := "mtp.layers.0."
		hc(gp+"hc_attn_", hp+"attn_hyper_connection.", true)
		hc(gp+"hc_ffn_", hp+"mlp_hyper_connection.", true)
		qsa(gp, hp)
		moe(gp, hp)
		hc(gp+"nextn.output_hc_", "mtp.hyper_connection_mixer.", false)
	}
	if table != nil && len(errs) == 0 {
		table() // last, so that a split output puts the table in shards of its own
	}
	// Everything else must be accounted for: the vision tower is skipped with a note; an
	// unknown text tensor is an error (a loader that drops weights gives wrong logits).
	if len(errs) == 0 && ck != nil {
		var extra []string
		nVision := 0
		for _, n := range ck.Names() {
			switch {
			case used[n]:
			case strings.HasPrefix(n, "model.visual.") || strings.HasPrefix(n, "visual."):
				nVision++
			default:
				extra = append(extra, n)
			}
		}
		if nVision > 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("skipped the vision tower (%d model.visual.* tensors): strata runs the text model only", nVision))
		}
		if len(extra) > 0 {
			if len(extra) > 5 {
				extra = append(extra[:5], fmt.Sprintf("... (%d in all)", len(extra)))
			}
			errs = append(errs, fmt.Errorf("tensors this converter does not know (a newer checkpoint layout?): %s", strings.Join(extra, ", ")))
		}
	}
	if len(errs) > 0 {
		msg := make([]string, 0, 6)
		for i, e := range errs {
			if i == 5 {
				msg = append(msg, fmt.Sprintf("(and %d more)", len(errs)-5))
				break
			}
			msg = append(msg, e.Error())
		}
		return fmt.Errorf("convert: %s: %s", p.Dir, strings.Join(msg, "; "))
	}
	return nil
}

// planQwen4GDN maps one gated DeltaNet layer. Value heads are reordered from the
// checkpoint's grouped order (head j uses key head j / r) to GGUF's tiled order (head j'
// uses key head j' mod nk), as llama.cpp's Qwen3.5 converter does for ggml's broadcast:
// GGUF head j' = m·nk + kh holds checkpoint head kh·r + m. Every per-value-head tensor is
// permuted the same way, so the layer's output is unchanged.
func (p *Plan) planQwen4GDN(c *q4HFConfig, hp, gp string, need func(string, ...int) string) {
	H := c.HiddenSize
	nk, nv, dk, dv, K := c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim, c.LinConv
	kd, vd := nk*dk, nv*dv
	r := nv / nk
	src := func(j int) int { return (j%nk)*r + j/nk } // checkpoint head of GGUF head j
	// tileRows permutes nv blocks of `block` rows (each `cols` wide) starting at row r0.
	tileRows := func(v []float32, r0, block, cols int) []float32 {
		out := append([]float32(nil), v...)
		for j := 0; j < nv; j++ {
			s := (r0 + src(j)*block) * cols
			d := (r0 + j*block) * cols
			copy(out[d:d+block*cols], v[s:s+block*cols])
		}
		return out
	}
	ld := func(name string, f func([]float32) []float32) func() ([]float32, error) {
		return func() ([]float32, error) {
			v, err := p.read(name)
			if err != nil {
				return nil, err
			}
			return f(v), nil
		}
	}
	qkv := need(hp+"linear_attn.in_proj_qkv.weight", 2*kd+vd, H)
	p.add(gp+"attn_qkv.weight", []int{H, 2*kd + vd}, false, ld(qkv, func(v []float32) []float32 { return tileRows(v, 2*kd, dv, H) }))
	z := need(hp+"linear_attn.in_proj_z.weight", vd, H)
	p.add(gp+"attn_gate.weight", []int{H, vd}, false, ld(z, func(v []float32) []float32 { return tileRows(v, 0, dv, H) }))
	b := need(hp+"linear_attn.in_proj_b.weight", nv, H)
	p.add(gp+"ssm_beta.weight", []int{H, nv}, false, ld(b, func(v []float32) []float32 { return tileRows(v, 0, 1, H) }))
	al := need(hp+"linear_attn.in_proj_a.weight", nv, H)
	p.add(gp+"ssm_alpha.weight", []int{H, nv}, false, ld(al, func(v []float32) []float32 { return tileRows(v, 0, 1, H) }))
	conv := need(hp+"linear_attn.conv1d.weight", 2*kd+vd, 1, K)
	p.add(gp+"ssm_conv1d.weight", []int{K, 2*kd + vd}, true, ld(conv, func(v []float32) []float32 { return tileRows(v, 2*kd, dv, K) }))
	dt := need(hp+"linear_attn.dt_bias", nv)
	p.add(gp+"ssm_dt.bias", []int{nv}, true, ld(dt, func(v []float32) []float32 { return tileRows(v, 0, 1, 1) }))
	alog := need(hp+"linear_attn.A_log", nv)
	p.add(gp+"ssm_a", []int{nv}, true, ld(alog, func(v []float32) []float32 {
		v = tileRows(v, 0, 1, 1)
		for i := range v {
			v[i] = float32(-math.Exp(float64(v[i])))
		}
		return v
	}))
	nw := need(hp+"linear_attn.norm.weight", dv)
	p.add(gp+"ssm_norm.weight", []int{dv}, true, ld(nw, func(v []float32) []float32 { return v }))
	out := need(hp+"linear_attn.out_proj.weight", H, vd)
	p.add(gp+"ssm_out.weight", []int{vd, H}, false, ld(out, func(v []float32) []float32 {
		res := make([]float32, len(v))
		for row := 0; row < H; row++ {
			copy(res[row*vd:(row+1)*vd], tileRows(v[row*vd:(row+1)*vd], 0, dv, 1))
		}
		return res
	}))
}

// planQwen4PLE maps the PLE block of layer gp and returns a function that adds the n-gram
// table, which the caller schedules last. The table is copied a slice of rows at a time
// (LoadRows), never read whole: it is 320M × 160 in the real model.
func (p *Plan) planQwen4PLE(c *q4HFConfig, hp, gp string, need func(string, ...int) string, used map[string]bool) func() {
	g := c.ple
	H, HH, P, K := c.HiddenSize, c.HCCount*c.HiddenSize, c.PLEEmbedDim, c.PLEConvKernel
	a := model.ArchQwen4Exp
	m := p.Meta
	m[a+".ple.layers"] = []uint32{uint32(g.layer)}
	m[a+".ple.ngram_size"] = uint32(c.NgramSize)
	m[a+".ple.heads_per_ngram"] = uint32(c.HeadsPerNgram)
	m[a+".ple.conv_kernel"] = uint32(K)
	m[a+".ple.eos_token_id"] = uint32(c.eos)
	if c.ImageTokenID != nil {
		m[a+".ple.image_token_id"] = uint32(*c.ImageTokenID)
	}
	m[a+".embedding_length_per_layer_input"] = uint32(g.headDim)
	u64 := func(v []int64) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = uint64(x)
		}
		return out
	}
	m[a+".ple.layer_multipliers"] = u64(g.mult)
	m[a+".ple.head_offsets"] = u64(g.offsets)
	m[a+".ple.head_vocab_sizes"] = u64(g.sizes)
	plain := func(dst, src string, keep bool, shape ...int) {
		need(src, shape...)
		p.add(dst, reverse(shape), keep, func() ([]float32, error) { return p.read(src) })
	}
	plain(gp+"ple_key.weight", hp+"ple.key_proj.weight", false, HH, P)
	plain(gp+"ple_value.weight", hp+"ple.value_proj.weight", false, H, P)
	for _, n := range []string{"key", "query", "conv"} {
		src := need(hp+"ple.norm_"+n+".weight", HH)
		p.add(gp+"ple_norm_"+n+".weight", []int{HH}, true, func() ([]float32, error) {
			v, err := p.read(src)
			for i := range v {
				v[i]++
			}
			return v, err
		})
	}
	cv := need(hp+"ple.conv1d.weight", HH, 1, K)
	p.add(gp+"ple_conv1d.weight", []int{K, HH}, true, func() ([]float32, error) { return p.read(cv) })

	// The checkpoint's hash constants must equal the ones the config implies (the engine
	// trusts the metadata, so a mismatch here would silently hash to other rows).
	e := hp + "ple.ple_embedding."
	for _, k := range []struct {
		name string
		want []int64
	}{{"layer_multipliers", g.mult}, {"ngram_heads_vocab_sizes", g.sizes}, {"ngram_heads_offsets", g.offsets}} {
		used[e+k.name] = true
		if p.ckpt == nil || p.ckpt.Info(e+k.name) == nil {
			continue // derivable; older exports may omit them
		}
		got, err := p.ckpt.Int64s(e + k.name)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(k.want) {
			p.Notes = append(p.Notes, fmt.Sprintf("error: %s%s = %v, the config implies %v", e, k.name, got, k.want))
		}
	}
	// Table: one [rows, dp] tensor or split_ngram_parts row shards, concatenated in order.
	tab := e + "ngram_embedding"
	var shards []string
	var shardRows []int
	if p.ckpt != nil && p.ckpt.Info(tab+".weight") != nil {
		shards = []string{need(tab+".weight", int(g.rows), g.headDim)}
		shardRows = []int{int(g.rows)}
	} else {
		parts := c.SplitNgramParts
		if g.rows%int64(parts) != 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("error: %d table rows do not split into split_ngram_parts = %d shards", g.rows, parts))
			parts = 1
		}
		for s := 0; s < parts; s++ {
			shards = append(shards, need(fmt.Sprintf("%s.shard_%d.weight", tab, s), int(g.rows)/parts, g.headDim))
			shardRows = append(shardRows, int(g.rows)/parts)
		}
	}
	return func() {
		rows := int(g.rows)
		t := &Tensor{Name: "per_layer_token_embd.weight", Dims: []int{g.headDim, rows}}
		t.LoadRows = func(r0, n int) ([]float32, error) {
			out := make([]float32, 0, n*g.headDim)
			base := 0
			for i, s := range shards {
				lo, hi := max(r0, base), min(r0+n, base+shardRows[i])
				if lo < hi {
					v, err := p.ckpt.Float32Rows(s, lo-base, hi-lo)
					if err != nil {
						return nil, fmt.Errorf("convert: %w", err)
					}
					out = append(out, v...)
				}
				base += shardRows[i]
			}
			return out, nil
		}
		t.Load = func() ([]float32, error) { return t.LoadRows(0, rows) }
		p.Tensors = append(p.Tensors, t)
	}
}

// qwen4ExpErrNotes turns error notes recorded while planning into an error.
func qwen4ExpErrNotes(p *Plan) error {
	var bad []string
	for _, n := range p.Notes {
		if strings.HasPrefix(n, "error: ") {
			bad = append(bad, strings.TrimPrefix(n, "error: "))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return fmt.Errorf("convert: %s: %s", p.Dir, strings.Join(bad, "; "))
	}
	return nil
}
