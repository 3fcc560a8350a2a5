package model

import (
	"fmt"
	"math"
	"sort"
)

// Meta is read access to a model's metadata in GGUF's key space (`qwen3moe.block_count`,
// ...). Getters fail with an error naming the key when it is missing or has the wrong type.
type Meta interface {
	Uint(key string) (uint64, error)
	Float(key string) (float64, error)
	String(key string) (string, error)
	Bool(key string) (bool, error)
	Has(key string) bool
}

// MapMeta is an in-memory Meta (the converter's output before it is written to a file).
// Values are uint32/uint64/int32/float32/float64/string/bool or slices of those.
type MapMeta map[string]any

// Has reports whether the key is present.
func (m MapMeta) Has(key string) bool { _, ok := m[key]; return ok }

// Uint returns an unsigned integer value.
func (m MapMeta) Uint(key string) (uint64, error) {
	switch v := m[key].(type) {
	case uint32:
		return uint64(v), nil
	case uint64:
		return v, nil
	case int32:
		if v >= 0 {
			return uint64(v), nil
		}
	case nil:
		return 0, fmt.Errorf("metadata key %s is missing", key)
	}
	return 0, fmt.Errorf("metadata key %s is %T, want an unsigned integer", key, m[key])
}

// Float returns a float value.
func (m MapMeta) Float(key string) (float64, error) {
	switch v := m[key].(type) {
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	case nil:
		return 0, fmt.Errorf("metadata key %s is missing", key)
	}
	return 0, fmt.Errorf("metadata key %s is %T, want a float", key, m[key])
}

// String returns a string value.
func (m MapMeta) String(key string) (string, error) {
	switch v := m[key].(type) {
	case string:
		return v, nil
	case nil:
		return "", fmt.Errorf("metadata key %s is missing", key)
	}
	return "", fmt.Errorf("metadata key %s is %T, want a string", key, m[key])
}

// Bool returns a bool value.
func (m MapMeta) Bool(key string) (bool, error) {
	switch v := m[key].(type) {
	case bool:
		return v, nil
	case nil:
		return false, fmt.Errorf("metadata key %s is missing", key)
	}
	return false, fmt.Errorf("metadata key %s is %T, want a bool", key, m[key])
}

// Keys lists the keys, sorted.
func (m MapMeta) Keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Architectures the engine runs, by their GGUF general.architecture value.
const (
	ArchQwen3MoE  = "qwen3moe"
	ArchQwen3Next = "qwen3next"
)

// Config holds a model's hyperparameters, validated.
type Config struct {
	Arch        string
	Embd        int     // hidden size
	Layers      int     // decoder layers
	Heads       int     // attention query heads
	HeadsKV     int     // attention key/value heads
	HeadDim     int     // attention key/value head size
	RopeDim     int     // rotated dims per head (NeoX halves); = HeadDim unless partial
	RopeBase    float64 // rope.freq_base
	Eps         float32 // RMSNorm epsilon
	CtxLen      int     // context_length the model was trained for
	Experts     int
	ExpertsUsed int
	ExpertFF    int  // per-expert intermediate size
	NormTopK    bool // renormalise the top-k router weights
	SharedFF    int  // shared expert intermediate size (qwen3next)

	// qwen3next gated delta-net (linear attention) layers
	FullAttnInterval int // layer i is full attention when (i+1) % interval == 0
	ConvKernel       int // ssm.conv_kernel
	LinKHeads        int // ssm.group_count: key heads
	LinVHeads        int // ssm.time_step_rank: value heads
	LinKDim          int // ssm.state_size: key head size
	LinVDim          int // ssm.inner_size / value heads
}

// IsRecurrent reports whether layer i is a gated delta-net layer.
func (c *Config) IsRecurrent(i int) bool {
	return c.Arch == ArchQwen3Next && (i+1)%c.FullAttnInterval != 0
}

// ParseConfig reads and validates the hyperparameters of a supported architecture.
// where names the file for messages.
func ParseConfig(m Meta, where string) (*Config, error) {
	arch, err := m.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if arch != ArchQwen3MoE && arch != ArchQwen3Next {
		return nil, fmt.Errorf("%s: general.architecture %q is not supported (this engine runs %s and %s)", where, arch, ArchQwen3MoE, ArchQwen3Next)
	}
	c := &Config{Arch: arch, NormTopK: true}
	var firstErr error
	u := func(key string, dst *int, required bool) {
		if firstErr != nil || (!required && !m.Has(arch+"."+key)) {
			return
		}
		v, err := m.Uint(arch + "." + key)
		if err == nil && v > math.MaxInt32 {
			err = fmt.Errorf("metadata key %s.%s = %d is out of range", arch, key, v)
		}
		if err != nil {
			firstErr = err
			return
		}
		*dst = int(v)
	}
	u("embedding_length", &c.Embd, true)
	u("block_count", &c.Layers, true)
	u("context_length", &c.CtxLen, true)
	u("attention.head_count", &c.Heads, true)
	u("attention.head_count_kv", &c.HeadsKV, true)
	u("attention.key_length", &c.HeadDim, true)
	u("expert_count", &c.Experts, true)
	u("expert_used_count", &c.ExpertsUsed, true)
	u("expert_feed_forward_length", &c.ExpertFF, true)
	c.RopeDim = c.HeadDim
	u("rope.dimension_count", &c.RopeDim, false)
	if arch == ArchQwen3Next {
		u("expert_shared_feed_forward_length", &c.SharedFF, true)
		u("full_attention_interval", &c.FullAttnInterval, true)
		u("ssm.conv_kernel", &c.ConvKernel, true)
		u("ssm.group_count", &c.LinKHeads, true)
		u("ssm.time_step_rank", &c.LinVHeads, true)
		u("ssm.state_size", &c.LinKDim, true)
		var inner int
		u("ssm.inner_size", &inner, true)
		if firstErr == nil && c.LinVHeads > 0 {
			if inner%c.LinVHeads != 0 {
				firstErr = fmt.Errorf("%s.ssm.inner_size %d is not a multiple of ssm.time_step_rank %d", arch, inner, c.LinVHeads)
			}
			c.LinVDim = inner / c.LinVHeads
		}
	}
	if firstErr != nil {
		return nil, fmt.Errorf("%s: %w", where, firstErr)
	}
	if m.Has(arch + ".attention.value_length") {
		v, err := m.Uint(arch + ".attention.value_length")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if int(v) != c.HeadDim {
			return nil, fmt.Errorf("%s: %s.attention.value_length %d differs from key_length %d; not supported", where, arch, v, c.HeadDim)
		}
	}
	if c.RopeBase, err = m.Float(arch + ".rope.freq_base"); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	eps, err := m.Float(arch + ".attention.layer_norm_rms_epsilon")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	c.Eps = float32(eps)
	if m.Has(arch + ".expert_weights_norm") {
		if c.NormTopK, err = m.Bool(arch + ".expert_weights_norm"); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

func (c *Config) validate() error {
	a := c.Arch
	pos := []struct {
		key string
		v   int
	}{{"embedding_length", c.Embd}, {"block_count", c.Layers}, {"context_length", c.CtxLen},
		{"attention.head_count", c.Heads}, {"attention.head_count_kv", c.HeadsKV},
		{"attention.key_length", c.HeadDim}, {"expert_count", c.Experts},
		{"expert_used_count", c.ExpertsUsed}, {"expert_feed_forward_length", c.ExpertFF}}
	if a == ArchQwen3Next {
		pos = append(pos, []struct {
			key string
			v   int
		}{{"expert_shared_feed_forward_length", c.SharedFF}, {"full_attention_interval", c.FullAttnInterval},
			{"ssm.conv_kernel", c.ConvKernel}, {"ssm.group_count", c.LinKHeads}, {"ssm.time_step_rank", c.LinVHeads},
			{"ssm.state_size", c.LinKDim}, {"ssm.inner_size", c.LinVDim}}...)
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("metadata key %s.%s = %d must be positive", a, p.key, p.v)
		}
	}
	switch {
	case c.Layers > 4096:
		return fmt.Errorf("metadata key %s.block_count = %d is absurd", a, c.Layers)
	case c.Heads%c.HeadsKV != 0:
		return fmt.Errorf("%s.attention.head_count %d is not a multiple of head_count_kv %d", a, c.Heads, c.HeadsKV)
	case c.ExpertsUsed > c.Experts:
		return fmt.Errorf("%s.expert_used_count %d exceeds expert_count %d", a, c.ExpertsUsed, c.Experts)
	case c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0:
		return fmt.Errorf("%s.rope.dimension_count %d must be even and within (0, key_length %d]", a, c.RopeDim, c.HeadDim)
	case !(c.RopeBase > 0) || math.IsInf(c.RopeBase, 0):
		return fmt.Errorf("%s.rope.freq_base %g must be positive", a, c.RopeBase)
	case !(c.Eps > 0) || c.Eps > 1:
		return fmt.Errorf("%s.attention.layer_norm_rms_epsilon %g must be in (0, 1]", a, c.Eps)
	}
	if a == ArchQwen3Next {
		if c.LinVHeads%c.LinKHeads != 0 {
			return fmt.Errorf("%s.ssm.time_step_rank %d (value heads) is not a multiple of ssm.group_count %d (key heads)", a, c.LinVHeads, c.LinKHeads)
		}
	}
	return nil
}
