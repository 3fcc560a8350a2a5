// Package tinygen rebuilds the tiny random-weight Qwen checkpoints that the oracle files in
// model/testdata were computed from, byte for byte, so the repository keeps the oracle
// outputs (a few MB) but not the 20 MB safetensors files.
//
// The generator is a port of the project's make_weights.py (described in
// model/testdata/README.md): for every tensor, MT19937 seeded like CPython's
// random.Random(FNV-1a-64("model_type|seed|name")) yields numel little-endian uint16
// words, and each word is mapped through a per-kind table to a BF16 bit pattern.
// The safetensors header is compact JSON, "__metadata__" first, tensors in name order,
// padded with spaces to a multiple of 8 bytes. The test checks the sha256 recorded in
// oracle.json, so any drift from the Python generator fails loudly.
package tinygen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Config is the subset of a Hugging Face config.json the generator reads.
type Config struct {
	ModelType        string   `json:"model_type"`
	HiddenSize       int      `json:"hidden_size"`
	VocabSize        int      `json:"vocab_size"`
	NumLayers        int      `json:"num_hidden_layers"`
	NumHeads         int      `json:"num_attention_heads"`
	NumKVHeads       int      `json:"num_key_value_heads"`
	HeadDim          int      `json:"head_dim"`
	NumExperts       int      `json:"num_experts"`
	MoEIntermediate  int      `json:"moe_intermediate_size"`
	TieEmbeddings    bool     `json:"tie_word_embeddings"`
	LayerTypes       []string `json:"layer_types"`
	LinKeyHeads      int      `json:"linear_num_key_heads"`
	LinValueHeads    int      `json:"linear_num_value_heads"`
	LinKeyHeadDim    int      `json:"linear_key_head_dim"`
	LinValueHeadDim  int      `json:"linear_value_head_dim"`
	LinConvKernel    int      `json:"linear_conv_kernel_dim"`
	SharedExpertSize int      `json:"shared_expert_intermediate_size"`
}

type spec struct {
	name  string
	shape []int
	kind  string
}

func tensorSpecs(c *Config, embKind string) ([]spec, error) {
	mt := c.ModelType
	if mt != "qwen3_moe" && mt != "qwen3_next" {
		return nil, fmt.Errorf("tinygen: model_type %q is not qwen3_moe or qwen3_next", mt)
	}
	H, V, L := c.HiddenSize, c.VocabSize, c.NumLayers
	nrm := "norm1"
	if mt == "qwen3_next" {
		nrm = "norm0"
	}
	s := []spec{{"model.embed_tokens.weight", []int{V, H}, embKind}, {"model.norm.weight", []int{H}, nrm}}
	if !c.TieEmbeddings {
		s = append(s, spec{"lm_head.weight", []int{V, H}, embKind})
	}
	for i := 0; i < L; i++ {
		p := "model.layers." + strconv.Itoa(i) + "."
		s = append(s, spec{p + "input_layernorm.weight", []int{H}, nrm}, spec{p + "post_attention_layernorm.weight", []int{H}, nrm})
		lt := "full_attention"
		if mt == "qwen3_next" {
			if i >= len(c.LayerTypes) {
				return nil, fmt.Errorf("tinygen: layer_types has %d entries, need %d", len(c.LayerTypes), L)
			}
			lt = c.LayerTypes[i]
		}
		if lt == "full_attention" {
			qmul := 1
			if mt == "qwen3_next" {
				qmul = 2
			}
			s = append(s,
				spec{p + "self_attn.q_proj.weight", []int{c.NumHeads * c.HeadDim * qmul, H}, "w3"},
				spec{p + "self_attn.k_proj.weight", []int{c.NumKVHeads * c.HeadDim, H}, "w3"},
				spec{p + "self_attn.v_proj.weight", []int{c.NumKVHeads * c.HeadDim, H}, "w3"},
				spec{p + "self_attn.o_proj.weight", []int{H, c.NumHeads * c.HeadDim}, "w3"},
				spec{p + "self_attn.q_norm.weight", []int{c.HeadDim}, nrm},
				spec{p + "self_attn.k_norm.weight", []int{c.HeadDim}, nrm})
		} else {
			kd, vd := c.LinKeyHeads*c.LinKeyHeadDim, c.LinValueHeads*c.LinValueHeadDim
			s = append(s,
				spec{p + "linear_attn.in_proj_qkvz.weight", []int{2*kd + 2*vd, H}, "w3"},
				spec{p + "linear_attn.in_proj_ba.weight", []int{2 * c.LinValueHeads, H}, "w3"},
				spec{p + "linear_attn.conv1d.weight", []int{2*kd + vd, 1, c.LinConvKernel}, "w1"},
				spec{p + "linear_attn.dt_bias", []int{c.LinValueHeads}, "unif1"},
				spec{p + "linear_attn.A_log", []int{c.LinValueHeads}, "unif1"},
				spec{p + "linear_attn.norm.weight", []int{c.LinValueHeadDim}, "norm1"},
				spec{p + "linear_attn.out_proj.weight", []int{H, vd}, "w3"})
		}
		s = append(s, spec{p + "mlp.gate.weight", []int{c.NumExperts, H}, "w2"})
		for j := 0; j < c.NumExperts; j++ {
			e := p + "mlp.experts." + strconv.Itoa(j) + "."
			s = append(s,
				spec{e + "gate_proj.weight", []int{c.MoEIntermediate, H}, "w3"},
				spec{e + "up_proj.weight", []int{c.MoEIntermediate, H}, "w3"},
				spec{e + "down_proj.weight", []int{H, c.MoEIntermediate}, "w3"})
		}
		if mt == "qwen3_next" {
			SI := c.SharedExpertSize
			s = append(s,
				spec{p + "mlp.shared_expert.gate_proj.weight", []int{SI, H}, "w3"},
				spec{p + "mlp.shared_expert.up_proj.weight", []int{SI, H}, "w3"},
				spec{p + "mlp.shared_expert.down_proj.weight", []int{H, SI}, "w3"},
				spec{p + "mlp.shared_expert_gate.weight", []int{1, H}, "w3"})
		}
	}
	sort.Slice(s, func(a, b int) bool { return s[a].name < s[b].name })
	return s, nil
}

// Safetensors returns the complete model.safetensors file for the config in configJSON,
// the seed and the embedding kind ("w0".."w4") recorded in the model's oracle.json.
func Safetensors(configJSON []byte, seed int, embKind string) ([]byte, error) {
	var c Config
	if err := json.Unmarshal(configJSON, &c); err != nil {
		return nil, fmt.Errorf("tinygen: config.json: %w", err)
	}
	specs, err := tensorSpecs(&c, embKind)
	if err != nil {
		return nil, err
	}
	var ts []stTensor
	for _, sp := range specs {
		n := 1
		for _, d := range sp.shape {
			n *= d
		}
		lut, err := makeLUT(sp.kind)
		if err != nil {
			return nil, err
		}
		ts = append(ts, stTensor{sp.name, "BF16", sp.shape, genTensor(c.ModelType, seed, sp.name, n, lut)})
	}
	return encodeSafetensors(ts), nil
}

// stTensor is one tensor of a safetensors file: its name, dtype, shape and raw bytes.
type stTensor struct {
	name, dtype string
	shape       []int
	data        []byte
}

// encodeSafetensors returns the safetensors file holding ts, in the order given: the
// header length, the JSON header (padded with spaces to a multiple of 8), then the data.
func encodeSafetensors(ts []stTensor) []byte {
	var hdr strings.Builder
	hdr.WriteString(`{"__metadata__":{"format":"pt"}`)
	off := 0
	for _, t := range ts {
		dims := make([]string, len(t.shape))
		for i, d := range t.shape {
			dims[i] = strconv.Itoa(d)
		}
		fmt.Fprintf(&hdr, `,%q:{"dtype":%q,"shape":[%s],"data_offsets":[%d,%d]}`, t.name, t.dtype, strings.Join(dims, ","), off, off+len(t.data))
		off += len(t.data)
	}
	hdr.WriteString("}")
	h := hdr.String()
	for len(h)%8 != 0 {
		h += " "
	}
	out := make([]byte, 8, 8+len(h)+off)
	binary.LittleEndian.PutUint64(out, uint64(len(h)))
	out = append(out, h...)
	for _, t := range ts {
		out = append(out, t.data...)
	}
	return out
}

func bf16Exact(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0xFFFF != 0 {
		panic("tinygen: value not exact in bf16")
	}
	return uint16(b >> 16)
}

func makeLUT(kind string) (*[65536]uint16, error) {
	var lut [65536]uint16
	for u := 0; u < 65536; u++ {
		switch kind {
		case "w0", "w1", "w2", "w3", "w4":
			top := -int(kind[1] - '0')
			e := top - ((u >> 8) & 3)
			lut[u] = uint16((u&1)<<15 | (127+e)<<7 | (u>>1)&0x7F)
		case "norm1":
			lut[u] = bf16Exact(0.5 + float32(u&0x7F)/128)
		case "norm0":
			lut[u] = bf16Exact(float32((u&0x7F)-64) / 128)
		case "unif1":
			lut[u] = bf16Exact(float32((u&0xFF)-128) / 128)
		default:
			return nil, fmt.Errorf("tinygen: unknown value kind %q", kind)
		}
	}
	return &lut, nil
}

func fnv1a64(s string) uint64 {
	h := uint64(0xCBF29CE484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001B3
	}
	return h
}

func genTensor(modelType string, seed int, name string, numel int, lut *[65536]uint16) []byte {
	key := fnv1a64(modelType + "|" + strconv.Itoa(seed) + "|" + name)
	mt := newMT(key)
	out := make([]byte, 2*numel)
	// getrandbits(16*numel): 32-bit outputs, first output in the lowest bits; a final
	// partial word keeps the top bits of its output (CPython shifts right).
	for i := 0; i < numel; i += 2 {
		w := mt.next()
		if i+1 == numel {
			w >>= 16
		}
		binary.LittleEndian.PutUint16(out[2*i:], lut[w&0xFFFF])
		if i+1 < numel {
			binary.LittleEndian.PutUint16(out[2*i+2:], lut[w>>16])
		}
	}
	return out
}

// mt19937 is the Mersenne Twister as CPython seeds it from a non-negative int:
// init_by_array over the 32-bit words of the int, least significant first.
type mt19937 struct {
	s   [624]uint32
	idx int
}

func newMT(key uint64) *mt19937 {
	words := []uint32{uint32(key), uint32(key >> 32)}
	if key>>32 == 0 {
		words = words[:1]
	}
	m := &mt19937{}
	m.s[0] = 19650218
	for i := 1; i < 624; i++ {
		m.s[i] = 1812433253*(m.s[i-1]^(m.s[i-1]>>30)) + uint32(i)
	}
	i, j := 1, 0
	k := 624
	if len(words) > k {
		k = len(words)
	}
	for ; k > 0; k-- {
		m.s[i] = (m.s[i] ^ ((m.s[i-1] ^ (m.s[i-1] >> 30)) * 1664525)) + words[j] + uint32(j)
		i++
		j++
		if i >= 624 {
			m.s[0] = m.s[623]
			i = 1
		}
		if j >= len(words) {
			j = 0
		}
	}
	for k = 623; k > 0; k-- {
		m.s[i] = (m.s[i] ^ ((m.s[i-1] ^ (m.s[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= 624 {
			m.s[0] = m.s[623]
			i = 1
		}
	}
	m.s[0] = 0x80000000
	m.idx = 624
	return m
}

func (m *mt19937) next() uint32 {
	if m.idx >= 624 {
		const upper, lower = 0x80000000, 0x7fffffff
		for i := 0; i < 624; i++ {
			y := m.s[i]&upper | m.s[(i+1)%624]&lower
			v := m.s[(i+397)%624] ^ (y >> 1)
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.s[i] = v
		}
		m.idx = 0
	}
	y := m.s[m.idx]
	m.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}
