package model

import (
	"fmt"
	"math"
)

// ArchQwen4Exp is Qwen3.8-Flash-Next (docs: qwen4exp.md): four hyper-connection residual
// streams, gated DeltaNet layers with a sigmoid output gate, QSA sparse attention whose
// keys an indexer selects per query, MoE with a gated shared expert, a hashed n-gram
// per-layer embedding (PLE), no final norm but a final hyper-connection mixer, and one
// multi-token-prediction (MTP) layer.
const ArchQwen4Exp = "qwen4exp"

// q4Config is what qwen4exp adds to Config.
type q4Config struct {
	HC, LowRank          int    // hyper-connection streams and low rank
	IdxHeads, IdxDim     int    // indexer query heads and head size (one key head)
	IdxTopK, Compress    int    // token budget and block size; blocks kept = IdxTopK/Compress
	QSA                  []bool // per trunk layer: sparse attention (else gated DeltaNet)
	GateSigmoid          bool   // GDN output gate: sigmoid (qwen4exp) or SiLU
	MTP                  int    // MTP blocks after the trunk (0 or 1)
	PLELayer             int    // trunk layer with the PLE block, -1 if none
	Ngram, HeadsPerNgram int
	PLEHeads, PLEDim     int // hash heads and table row width
	PLEConv              int
	EOS                  int32
	Mult                 []uint64 // n-gram multipliers, one per context slot
	Offsets, Sizes       []uint64 // per hash head: first table row and prime size
}

// q4HC is one hyper-connection: a read (grouped norm, low-rank sigmoid gate, mean over
// streams) and, unless it is a final mixer, the injection weights of the write.
type q4HC struct {
	norm     []float32 // [HC·H], GGUF stores 1 + w
	down, up *Tensor   // [HC·H → LR], [LR → HC·H]
	inject   *Tensor   // [HC·H → HC], nil for a mixer
}

type q4Layer struct {
	attnHC, ffnHC q4HC
	qsa           bool

	// gated DeltaNet, value heads in GGUF's tiled order (head j uses key head j mod nk)
	wqkv, wz, wbeta, walpha, ssmOut *Tensor
	conv                            []float32 // [channels][ConvKernel]
	ssmA, dtBias, ssmNorm           []float32

	// QSA attention and its indexer
	wq, wk, wv, wo     *Tensor
	qNorm, kNorm       []float32
	idxQ, idxK         *Tensor
	idxQNorm, idxKNorm []float32

	moe layer // router, experts, shared expert (the fields the shared MoE code reads)
	ple *q4PLE
}

type q4PLE struct {
	key, value                   *Tensor
	normKey, normQuery, normConv []float32
	conv                         []float32 // [HC·H][PLEConv]
	table                        *Tensor   // [rows][PLEDim], read a row at a time
}

type q4MTP struct {
	enorm, hnorm []float32
	ehProj       *Tensor // [2H → H]: [fc_embedding | fc_hidden]
	layer        q4Layer
	mixer        q4HC
}

type q4Model struct {
	cfg    q4Config
	layers []q4Layer
	mixer  q4HC
	mtp    *q4MTP
}

// qwen4expMeta is the array access qwen4exp needs beyond Meta (GGUF files and MapMeta
// both provide it).
type qwen4expMeta interface {
	Ints(key string) ([]int, error)
}

// Ints returns an integer array (uint32/uint64/int32 slices).
func (m MapMeta) Ints(key string) ([]int, error) {
	var out []int
	switch v := m[key].(type) {
	case []uint32:
		for _, x := range v {
			out = append(out, int(x))
		}
	case []uint64:
		for _, x := range v {
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("metadata key %s: %d does not fit", key, x)
			}
			out = append(out, int(x))
		}
	case []int32:
		for _, x := range v {
			out = append(out, int(x))
		}
	case nil:
		return nil, fmt.Errorf("metadata key %s is missing", key)
	default:
		return nil, fmt.Errorf("metadata key %s is %T, want an integer array", key, v)
	}
	return out, nil
}

// Ints returns an integer array.
func (m ggufMeta) Ints(key string) ([]int, error) { return m.f.Ints(key) }

// parseQwen4Exp reads and validates the qwen4exp hyperparameters.
func parseQwen4Exp(m Meta, where string) (*Config, *q4Config, error) {
	a := ArchQwen4Exp
	am, ok := m.(qwen4expMeta)
	if !ok {
		return nil, nil, fmt.Errorf("%s: metadata source %T cannot read arrays", where, m)
	}
	c := &Config{Arch: a, NormTopK: true}
	q := &q4Config{PLELayer: -1, GateSigmoid: true}
	var firstErr error
	u := func(key string, dst *int, required bool) {
		if firstErr != nil || (!required && !m.Has(a+"."+key)) {
			return
		}
		v, err := m.Uint(a + "." + key)
		if err == nil && v > math.MaxInt32 {
			err = fmt.Errorf("metadata key %s.%s = %d is out of range", a, key, v)
		}
		if err == nil && v == 0 && required {
			err = fmt.Errorf("metadata key %s.%s must be positive", a, key)
		}
		if err != nil {
			firstErr = err
			return
		}
		*dst = int(v)
	}
	var blocks, inner int
	u("embedding_length", &c.Embd, true)
	u("block_count", &blocks, true)
	u("context_length", &c.CtxLen, true)
	u("attention.head_count", &c.Heads, true)
	u("attention.head_count_kv", &c.HeadsKV, true)
	u("attention.key_length", &c.HeadDim, true)
	c.RopeDim = c.HeadDim
	u("rope.dimension_count", &c.RopeDim, false)
	u("expert_count", &c.Experts, true)
	u("expert_used_count", &c.ExpertsUsed, true)
	u("expert_feed_forward_length", &c.ExpertFF, true)
	u("expert_shared_feed_forward_length", &c.SharedFF, true)
	u("ssm.conv_kernel", &c.ConvKernel, true)
	u("ssm.group_count", &c.LinKHeads, true)
	u("ssm.time_step_rank", &c.LinVHeads, true)
	u("ssm.state_size", &c.LinKDim, true)
	u("ssm.inner_size", &inner, true)
	u("full_attention_interval", &c.FullAttnInterval, false)
	u("hyper_connection.count", &q.HC, true)
	u("hyper_connection.low_rank", &q.LowRank, true)
	u("attention.indexer.head_count", &q.IdxHeads, true)
	u("attention.indexer.key_length", &q.IdxDim, true)
	u("attention.indexer.top_k", &q.IdxTopK, true)
	u("nextn_predict_layers", &q.MTP, false)
	if firstErr != nil {
		return nil, nil, fmt.Errorf("%s: %w", where, firstErr)
	}
	fail := func(format string, args ...any) (*Config, *q4Config, error) {
		return nil, nil, fmt.Errorf("%s: "+format, append([]any{where}, args...)...)
	}
	if inner%c.LinVHeads != 0 {
		return fail("%s.ssm.inner_size %d is not a multiple of ssm.time_step_rank %d", a, inner, c.LinVHeads)
	}
	c.LinVDim = inner / c.LinVHeads
	if q.MTP > 1 || q.MTP >= blocks {
		return fail("%s.nextn_predict_layers = %d: this engine runs at most one MTP block, after at least one trunk block", a, q.MTP)
	}
	c.Layers = blocks - q.MTP
	ratios, err := am.Ints(a + ".attention.compress_ratios")
	if err != nil {
		return fail("%w", err)
	}
	if len(ratios) != blocks {
		return fail("%s.attention.compress_ratios has %d entries, block_count is %d", a, len(ratios), blocks)
	}
	q.QSA = make([]bool, c.Layers)
	for i := 0; i < c.Layers; i++ {
		if ratios[i] != 0 {
			if q.Compress != 0 && ratios[i] != q.Compress {
				return fail("%s.attention.compress_ratios: blocks %d and %d differ (%d, %d); one block size is supported", a, i, ratios[i], q.Compress)
			}
			q.Compress, q.QSA[i] = ratios[i], true
		}
	}
	if q.Compress == 0 {
		q.Compress = 4 // no QSA trunk layer; the MTP layer (always QSA) uses the model's block size
	}
	if q.IdxTopK%q.Compress != 0 {
		return fail("%s.attention.indexer.top_k %d is not a multiple of the block size %d", a, q.IdxTopK, q.Compress)
	}
	if m.Has(a + ".ssm.output_gate_type") {
		g, err := m.String(a + ".ssm.output_gate_type")
		if err != nil {
			return fail("%w", err)
		}
		if g != "sigmoid" && g != "silu" {
			return fail("%s.ssm.output_gate_type %q must be sigmoid or silu", a, g)
		}
		q.GateSigmoid = g == "sigmoid"
	}
	if m.Has(a + ".ple.layers") {
		ids, err := am.Ints(a + ".ple.layers")
		if err != nil {
			return fail("%w", err)
		}
		if len(ids) > 1 || (len(ids) == 1 && (ids[0] < 0 || ids[0] >= c.Layers)) {
			return fail("%s.ple.layers %v: one zero-based trunk layer is supported", a, ids)
		}
		if len(ids) == 1 {
			q.PLELayer = ids[0]
			var eos int
			u("ple.ngram_size", &q.Ngram, true)
			u("ple.heads_per_ngram", &q.HeadsPerNgram, true)
			u("ple.conv_kernel", &q.PLEConv, true)
			u("ple.eos_token_id", &eos, true)
			u("embedding_length_per_layer_input", &q.PLEDim, true)
			if firstErr != nil {
				return fail("%w", firstErr)
			}
			q.EOS = int32(eos)
			q.PLEHeads = (q.Ngram - 1) * q.HeadsPerNgram
			arr := func(key string, n int, zeroOK bool) []uint64 {
				if firstErr != nil {
					return nil
				}
				v, err := am.Ints(a + "." + key)
				if err == nil && len(v) != n {
					err = fmt.Errorf("metadata key %s.%s has %d entries, want %d", a, key, len(v), n)
				}
				if err != nil {
					firstErr = err
					return nil
				}
				out := make([]uint64, n)
				for i, x := range v {
					if x < 0 || (x == 0 && !zeroOK) {
						firstErr = fmt.Errorf("metadata key %s.%s[%d] = %d is out of range", a, key, i, x)
						return nil
					}
					out[i] = uint64(x)
				}
				return out
			}
			q.Mult = arr("ple.layer_multipliers", q.Ngram, false)
			q.Sizes = arr("ple.head_vocab_sizes", q.PLEHeads, false)
			q.Offsets = arr("ple.head_offsets", q.PLEHeads, true)
			if firstErr != nil {
				return fail("%w", firstErr)
			}
		}
	}
	if c.RopeBase, err = m.Float(a + ".rope.freq_base"); err != nil {
		return fail("%w", err)
	}
	eps, err := m.Float(a + ".attention.layer_norm_rms_epsilon")
	if err != nil {
		return fail("%w", err)
	}
	c.Eps = float32(eps)
	if m.Has(a + ".expert_weights_norm") {
		if c.NormTopK, err = m.Bool(a + ".expert_weights_norm"); err != nil {
			return fail("%w", err)
		}
	}
	switch {
	case c.Heads%c.HeadsKV != 0:
		return fail("%s.attention.head_count %d is not a multiple of head_count_kv %d", a, c.Heads, c.HeadsKV)
	case c.ExpertsUsed > c.Experts:
		return fail("%s.expert_used_count %d exceeds expert_count %d", a, c.ExpertsUsed, c.Experts)
	case c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim > q.IdxDim || c.RopeDim%2 != 0:
		return fail("%s.rope.dimension_count %d must be even and within (0, min(key_length %d, indexer key_length %d)]", a, c.RopeDim, c.HeadDim, q.IdxDim)
	case !(c.RopeBase > 0) || math.IsInf(c.RopeBase, 0):
		return fail("%s.rope.freq_base %g must be positive", a, c.RopeBase)
	case !(c.Eps > 0) || c.Eps > 1:
		return fail("%s.attention.layer_norm_rms_epsilon %g must be in (0, 1]", a, c.Eps)
	case c.LinVHeads%c.LinKHeads != 0:
		return fail("%s.ssm.time_step_rank %d is not a multiple of ssm.group_count %d", a, c.LinVHeads, c.LinKHeads)
	case q.HC < 2 || q.HC > 64:
		return fail("%s.hyper_connection.count %d must be in [2, 64]", a, q.HC)
	case q.PLELayer >= 0 && (q.Ngram < 2 || q.Ngram > 8 || q.PLEConv < 1):
		return fail("%s.ple.ngram_size %d must be in [2, 8] and ple.conv_kernel positive", a, q.Ngram)
	}
	return c, q, nil
}

// loadQwen4Exp validates and binds every qwen4exp tensor.
func loadQwen4Exp(src Source) (*Model, error) {
	cfg, q, err := parseQwen4Exp(src.Meta(), src.Path())
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: *cfg, src: src}
	qm := &q4Model{cfg: *q}
	m.q4 = qm
	c := cfg
	H, HH := c.Embd, q.HC*c.Embd
	b := &binder{src: src, used: map[string]bool{}}
	get, vec := b.get, b.vec
	emb, ok := src.Tensor("token_embd.weight")
	b.used["token_embd.weight"] = true
	if !ok || len(emb.Dims) != 2 || emb.Dims[0] != H {
		return nil, fmt.Errorf("%s: tensor token_embd.weight is missing or not [%d, vocab]", src.Path(), H)
	}
	m.tokEmbd, m.Vocab = emb, emb.Dims[1]
	if _, ok := src.Tensor("output.weight"); ok {
		m.output = get("output.weight", H, m.Vocab)
	} else {
		m.output = emb
	}
	hc := func(p string, inject bool) q4HC {
		h := q4HC{norm: vec(p+"norm.weight", HH), down: get(p+"down.weight", HH, q.LowRank), up: get(p+"up.weight", q.LowRank, HH)}
		if inject {
			h.inject = get(p+"inject.weight", HH, q.HC)
		}
		return h
	}
	qd, kvd := c.Heads*c.HeadDim, c.HeadsKV*c.HeadDim
	qsa := func(p string, l *q4Layer) {
		l.qsa = true
		l.wq = get(p+"attn_q.weight", H, 2*qd)
		l.wk = get(p+"attn_k.weight", H, kvd)
		l.wv = get(p+"attn_v.weight", H, kvd)
		l.wo = get(p+"attn_output.weight", qd, H)
		l.qNorm = vec(p+"attn_q_norm.weight", c.HeadDim)
		l.kNorm = vec(p+"attn_k_norm.weight", c.HeadDim)
		l.idxQ = get(p+"indexer.q_proj.weight", H, q.IdxHeads*q.IdxDim)
		l.idxK = get(p+"indexer.k_proj.weight", H, q.IdxDim)
		l.idxQNorm = vec(p+"indexer.q_norm.weight", q.IdxDim)
		l.idxKNorm = vec(p+"indexer.k_norm.weight", q.IdxDim)
	}
	moe := func(p string, l *q4Layer) {
		l.moe.router = get(p+"ffn_gate_inp.weight", H, c.Experts)
		l.moe.gateExps = get(p+"ffn_gate_exps.weight", H, c.ExpertFF, c.Experts)
		l.moe.upExps = get(p+"ffn_up_exps.weight", H, c.ExpertFF, c.Experts)
		l.moe.downExps = get(p+"ffn_down_exps.weight", c.ExpertFF, H, c.Experts)
		l.moe.shGateInp = vec(p+"ffn_gate_inp_shexp.weight", H)
		l.moe.shGate = get(p+"ffn_gate_shexp.weight", H, c.SharedFF)
		l.moe.shUp = get(p+"ffn_up_shexp.weight", H, c.SharedFF)
		l.moe.shDown = get(p+"ffn_down_shexp.weight", c.SharedFF, H)
	}
	qm.mixer = hc("output_hc_", false)
	nk, nv := c.LinKHeads, c.LinVHeads
	kd, vd := nk*c.LinKDim, nv*c.LinVDim
	for i := 0; i < c.Layers && len(b.errs) == 0; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		var l q4Layer
		l.attnHC, l.ffnHC = hc(p+"hc_attn_", true), hc(p+"hc_ffn_", true)
		if q.QSA[i] {
			qsa(p, &l)
		} else {
			l.wqkv = get(p+"attn_qkv.weight", H, 2*kd+vd)
			l.wz = get(p+"attn_gate.weight", H, vd)
			l.wbeta = get(p+"ssm_beta.weight", H, nv)
			l.walpha = get(p+"ssm_alpha.weight", H, nv)
			if t := get(p+"ssm_conv1d.weight", c.ConvKernel, 2*kd+vd); t != nil {
				l.conv = t.Float32s()
			}
			l.dtBias = vec(p+"ssm_dt.bias", nv)
			l.ssmA = vec(p+"ssm_a", nv)
			l.ssmNorm = vec(p+"ssm_norm.weight", c.LinVDim)
			l.ssmOut = get(p+"ssm_out.weight", vd, H)
		}
		moe(p, &l)
		if i == q.PLELayer {
			pl := &q4PLE{}
			P := q.PLEHeads * q.PLEDim
			pl.key = get(p+"ple_key.weight", P, HH)
			pl.value = get(p+"ple_value.weight", P, H)
			pl.normKey = vec(p+"ple_norm_key.weight", HH)
			pl.normQuery = vec(p+"ple_norm_query.weight", HH)
			pl.normConv = vec(p+"ple_norm_conv.weight", HH)
			if t := get(p+"ple_conv1d.weight", q.PLEConv, HH); t != nil {
				pl.conv = t.Float32s()
			}
			b.used["per_layer_token_embd.weight"] = true
			tab, ok := src.Tensor("per_layer_token_embd.weight")
			switch {
			case !ok:
				b.fail("tensor per_layer_token_embd.weight (the PLE n-gram table) is missing")
			case len(tab.Dims) != 2 || tab.Dims[0] != q.PLEDim:
				b.fail(fmt.Sprintf("tensor per_layer_token_embd.weight has shape %v, want [%d, rows]", tab.Dims, q.PLEDim))
			default:
				rows := uint64(tab.Dims[1])
				for h := range q.Sizes {
					if q.Offsets[h]+q.Sizes[h] > rows {
						b.fail(fmt.Sprintf("PLE hash head %d addresses rows up to %d, the table has %d", h, q.Offsets[h]+q.Sizes[h], rows))
						break
					}
				}
			}
			pl.table = tab
			l.ple = pl
		}
		qm.layers = append(qm.layers, l)
	}
	if q.MTP == 1 && len(b.errs) == 0 {
		p := fmt.Sprintf("blk.%d.", c.Layers)
		mt := &q4MTP{}
		mt.enorm = vec(p+"nextn.enorm.weight", H)
		mt.hnorm = vec(p+"nextn.hnorm.weight", HH)
		mt.ehProj = get(p+"nextn.eh_proj.weight", 2*H, H)
		mt.layer.attnHC, mt.layer.ffnHC = hc(p+"hc_attn_", true), hc(p+"hc_ffn_", true)
		qsa(p, &mt.layer)
		moe(p, &mt.layer)
		mt.mixer = hc(p+"nextn.output_hc_", false)
		qm.mtp = mt
	}
	if err := b.finish(ArchQwen4Exp, c.Layers); err != nil {
		return nil, err
	}
	return m, nil
}

// Streams is the number of residual streams: the hyper-connection count for qwen4exp,
// else 1.
func (m *Model) Streams() int {
	if m.q4 == nil {
		return 1
	}
	return m.q4.cfg.HC
}

// HasMTP reports whether the model has a multi-token-prediction head (qwen4exp).
func (m *Model) HasMTP() bool { return m.q4 != nil && m.q4.mtp != nil }
