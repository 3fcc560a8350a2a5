package convert

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"github.com/strata-hip/strata/model"
)

// blockOut is the std (times √cols) of the synthetic output projections: small against the
// embedding noise (0.02) even after 2·48 residual writes.
const blockOut = 2e-4

// flashNextConfig is the real Qwen3.8-Flash-Next text config (qwen4exp.md §1).
const flashNextConfig = `{"model_type": "qwen4_exp_text", "vocab_size": 248320, "hidden_size": 2560,
 "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 24, "num_key_value_heads": 2,
 "head_dim": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
 "mrope_section": [11, 11, 10], "mrope_interleaved": true},
 "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
 "linear_conv_kernel_dim": 4, "output_gate_type": "sigmoid", "indexer_n_heads": 4, "indexer_kv_heads": 1,
 "indexer_head_dim": 128, "indexer_budget": 2048, "indexer_compress_ratio": 4, "num_experts": 512,
 "num_experts_per_tok": 10, "norm_topk_prob": true, "moe_intermediate_size": 640, "shared_expert_intermediate_size": 640,
 "hc_count": 4, "hc_lowrank": 320, "ple_layer_ids": [2], "ple_embed_dim": 2560, "ple_conv_kernel_size": 4,
 "ngram_size": 3, "heads_per_ngram": 8, "ngram_vocab_size_base": 20000000, "make_ngram_vocab_size_divisible_by": 128,
 "split_ngram_parts": 128, "eos_token_id": 248044, "rms_norm_eps": 1e-06, "tie_word_embeddings": false,
 "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1, "hidden_act": "silu"}`

// SynthOptions shape a synthetic qwen4exp model.
type SynthOptions struct {
	// ConfigJSON is a qwen4_exp(_text) config.json; nil means the real Flash-Next text config.
	ConfigJSON []byte
	// Layers overrides num_hidden_layers (0: the config's); layer types follow
	// full_attention_interval.
	Layers int
	// PLERows sizes the n-gram table approximately (0: the config's; real 320,001,536): the
	// per-head prime sizes start at PLERows/heads.
	PLERows int64
	// Zipf is the exponent of the router skew (0: no skew). See Synth.
	Zipf float64
	Seed uint64
}

// Synth plans a qwen4exp model of the config's shapes with random weights, for benchmarks
// at the real size. Every tensor is generated a row at a time from a seed derived from its
// name and row, so the output is deterministic and written with bounded memory.
//
// Routing skew: every embedding row has 1.0 in dimension 0 and small noise elsewhere, so
// the normalised MoE inputs carry a large positive component x₀ ≈ (1/2)/rms(stream) there;
// router row e gets −s·ln(rank_e+1)/x₀ in column 0 (ranks a permutation of the experts
// seeded by the router's name, so each layer has its own hot experts) plus noise sized so
// that the logits vary per token like Gumbel noise, which makes expert e's share of the
// draws ≈ ∝ (rank_e+1)^−s, a Zipf law of exponent s. Block outputs are tiny and never
// write dimension 0, so the residual stays near the embedding and the skew holds at every
// layer.
func Synth(opt SynthOptions) (*Plan, error) {
	raw := opt.ConfigJSON
	if raw == nil {
		raw = []byte(flashNextConfig)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("synth: config: %w", err)
	}
	body := cfg
	if tc, ok := cfg["text_config"].(map[string]any); ok {
		body = tc
	}
	if opt.Layers > 0 {
		body["num_hidden_layers"] = opt.Layers
		delete(body, "layer_types")
		if ids, ok := body["ple_layer_ids"].([]any); ok && len(ids) == 1 {
			if id, _ := ids[0].(float64); int(id) > opt.Layers {
				body["ple_layer_ids"] = []int{opt.Layers}
			}
		}
	}
	if opt.PLERows > 0 {
		nh := 16.0
		if n, ok := body["ngram_size"].(float64); ok {
			if h, ok := body["heads_per_ngram"].(float64); ok {
				nh = (n - 1) * h
			}
		}
		body["ngram_vocab_size_base"] = max(2, float64(opt.PLERows)/nh)
	}
	raw, _ = json.Marshal(cfg)
	c, err := qwen4ExpConfig(raw, "synth config")
	if err != nil {
		return nil, err
	}
	p := &Plan{Dir: "synth-flash-next", Arch: model.ArchQwen4Exp, Meta: model.MapMeta{}}
	if err := p.planQwen4Exp(c); err != nil {
		return nil, err
	}
	p.Meta["general.name"] = "synthetic qwen4exp (random weights)"
	H := c.HiddenSize
	// x₀ of the MoE input: stream dim 0 is 1, the others noise of std embNoise.
	const embNoise = 0.02
	rms := math.Sqrt((1 + float64(H-1)*embNoise*embNoise) / float64(H))
	x0 := 0.5 / rms
	// Router noise: the other input dims are ≈ ±0.5·embNoise/rms; a row std giving logit
	// noise of std π/√6 (that of a standard Gumbel) makes top-k draws follow the softmax of
	// the column-0 terms (the Gumbel-max trick, approximately, with Gaussian noise).
	routerStd := math.Pi / math.Sqrt(6) / (0.5 * embNoise / rms * math.Sqrt(float64(H-1)))
	for _, t := range p.Tensors {
		gen := synthRow(t.Name, t.Dims, opt, x0, routerStd)
		cols, rows := t.Dims[0], 1
		for _, d := range t.Dims[1:] {
			rows *= d
		}
		t.LoadRows = func(r0, n int) ([]float32, error) {
			out := make([]float32, n*cols)
			parallelRows(n, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					gen(out[r*cols:(r+1)*cols], r0+r)
				}
			})
			return out, nil
		}
		t.Load = func() ([]float32, error) { return t.LoadRows(0, rows) }
	}
	p.Notes = append(p.Notes, fmt.Sprintf("synthetic %d-layer model (+%d MTP), %d experts, PLE table of %d rows, router Zipf exponent %g", c.NumLayers, c.MTPLayers, c.NumExperts, tableRows(c), opt.Zipf))
	return p, nil
}

func tableRows(c *q4HFConfig) int64 {
	if c.ple == nil {
		return 0
	}
	return c.ple.rows
}

// synthRow returns the generator of one tensor's rows.
func synthRow(name string, dims []int, opt SynthOptions, x0, routerStd float64) func(dst []float32, r int) {
	h := fnv.New64a()
	h.Write([]byte(name))
	key := h.Sum64() ^ opt.Seed
	cols := dims[0]
	uni := func(dst []float32, r int, scale float64) {
		rng := rand.New(rand.NewPCG(key, uint64(r)))
		for i := range dst {
			dst[i] = float32((2*rng.Float64() - 1) * scale)
		}
	}
	// Uniform(−a, a) has std a/√3: a = √3·std.
	std := func(s float64) float64 { return math.Sqrt(3) * s }
	base := name[strings.LastIndex(name, ".")+1:]
	stem := strings.TrimSuffix(name, "."+base)
	switch {
	case len(dims) == 1 && strings.Contains(name, "norm"):
		return func(dst []float32, r int) {
			for i := range dst {
				dst[i] = 1
			}
		}
	case strings.HasSuffix(name, "ssm_a"):
		return func(dst []float32, r int) {
			uni(dst, r, 1)
			for i, v := range dst {
				dst[i] = float32(-math.Exp(float64(v)))
			}
		}
	case strings.HasSuffix(name, "ssm_dt.bias"):
		return func(dst []float32, r int) { uni(dst, r, 0.5) }
	case name == "token_embd.weight":
		return func(dst []float32, r int) {
			uni(dst, r, std(0.02))
			dst[0] = 1
		}
	case name == "per_layer_token_embd.weight":
		return func(dst []float32, r int) { uni(dst, r, std(0.02)) }
	case strings.HasSuffix(stem, "ffn_gate_inp"):
		// Each router has its own hot experts: ranks are a permutation seeded by its name.
		rank := rand.New(rand.NewPCG(key, 0x2a)).Perm(dims[1])
		return func(dst []float32, r int) {
			uni(dst, r, std(routerStd))
			dst[0] = float32(-opt.Zipf * math.Log(float64(rank[r]+1)) / x0)
		}
	case strings.Contains(name, "conv1d"):
		return func(dst []float32, r int) { uni(dst, r, 0.5) }
	case strings.HasSuffix(stem, "attn_output") || strings.HasSuffix(stem, "ssm_out") ||
		strings.HasSuffix(stem, "ffn_down_exps") || strings.HasSuffix(stem, "ffn_down_shexp") || strings.HasSuffix(stem, "ple_value"):
		// Block outputs are tiny and never write dimension 0, so the residual stays close
		// to the embedding and its anchor exact through every layer (the routing skew).
		return func(dst []float32, r int) {
			if r%dims[1] == 0 {
				clear(dst)
				return
			}
			uni(dst, r, std(blockOut/math.Sqrt(float64(cols))))
		}
	default:
		return func(dst []float32, r int) { uni(dst, r, std(1/math.Sqrt(float64(cols)))) }
	}
}

// parallelRows splits [0, n) over the CPUs.
func parallelRows(n int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), max(n/64, 1))
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(i*n/w, (i+1)*n/w)
	}
	wg.Wait()
}
