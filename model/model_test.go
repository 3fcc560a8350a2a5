package model_test

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/model/tinygen"
	"github.com/strata-hip/strata/quant"
)

var tinyDirs sync.Map // name → HF dir with config.json and model.safetensors

// tinyHF rebuilds a tiny model's checkpoint once per test binary.
func tinyHF(t testing.TB, name string) string {
	t.Helper()
	if d, ok := tinyDirs.Load(name); ok {
		return d.(string)
	}
	dir, err := os.MkdirTemp("", "strata-tiny-")
	if err != nil {
		t.Fatal(err)
	}
	if err := tinygen.WriteHF(filepath.Join("testdata", name), dir); err != nil {
		t.Fatal(err)
	}
	tinyDirs.Store(name, dir)
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	tinyDirs.Range(func(_, d any) bool { os.RemoveAll(d.(string)); return true })
	os.Exit(code)
}

func tinySource(t *testing.T, name string) model.Source {
	t.Helper()
	p, err := convert.FromHF(tinyHF(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	src, err := p.Source()
	if err != nil {
		t.Fatal(err)
	}
	return src
}

var prompt = []int32{785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 11, 323, 1221, 432, 8473, 3123, 13}

// TestPrefillDecodeEqualsFullPrefill: prefill 10 tokens then decode 6 one at a time must
// give the logits of processing all 16 at once. The paths compute the same values (row
// dots, causal attention over the cache, the delta-net recurrence and conv state) but sum
// in different orders (fused single-row dots in decode, decode-then-dot in prefill), and
// may contract to FMA differently per platform: ≤ ~1e-6 relative per product, amplified
// by up to ~10 per delta-net layer (measured in model/oracle's Q8_0 study) on logits of
// magnitude ≤ 10. Bound 1e-4 absolute (measured here: ≤ 6e-6 on amd64). A cache or state
// bug moves logits by ≳ 1e-2.
func TestPrefillDecodeEqualsFullPrefill(t *testing.T) {
	for _, name := range []string{"tiny-qwen3moe", "tiny-qwen3next"} {
		t.Run(name, func(t *testing.T) {
			m, err := model.Load(tinySource(t, name))
			if err != nil {
				t.Fatal(err)
			}
			full, err := m.NewState(32)
			if err != nil {
				t.Fatal(err)
			}
			want, err := full.Forward(prompt, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			V := m.Vocab
			inc, _ := m.NewState(32)
			got, err := inc.Forward(prompt[:10], false, nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(pos int, logits []float32) {
				var worst float64
				for i, v := range logits {
					worst = math.Max(worst, math.Abs(float64(v-want[pos*V+i])))
				}
				if worst > 1e-4 || math.IsNaN(worst) {
					t.Errorf("position %d: max |prefill+decode − full prefill| = %.3g, bound 1e-4", pos, worst)
				}
			}
			check(9, got)
			for pos := 10; pos < 16; pos++ {
				if got, err = inc.Forward(prompt[pos:pos+1], false, nil); err != nil {
					t.Fatal(err)
				}
				check(pos, got)
			}
			if inc.Pos() != 16 {
				t.Fatalf("Pos() = %d after 16 tokens", inc.Pos())
			}
		})
	}
}

// hideSource drops or reshapes one tensor of a source.
type hideSource struct {
	model.Source
	name    string
	reshape []int
}

func (h hideSource) Tensor(n string) (*model.Tensor, bool) {
	t, ok := h.Source.Tensor(n)
	if n != h.name {
		return t, ok
	}
	if h.reshape == nil {
		return nil, false
	}
	c := *t
	c.Dims = h.reshape
	return &c, true
}

func (h hideSource) Names() []string {
	var out []string
	for _, n := range h.Source.Names() {
		if n != h.name || h.reshape != nil {
			out = append(out, n)
		}
	}
	return out
}

type metaSource struct {
	model.Source
	meta model.MapMeta
}

func (m metaSource) Meta() model.Meta { return m.meta }

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}

func TestBadInputErrors(t *testing.T) {
	src := tinySource(t, "tiny-qwen3next")
	dir := tinyHF(t, "tiny-qwen3next")
	t.Run("missing-tensor", func(t *testing.T) {
		_, err := model.Load(hideSource{Source: src, name: "blk.2.ssm_a"})
		wantErr(t, err, dir, "blk.2.ssm_a", "missing")
	})
	t.Run("shape-mismatch", func(t *testing.T) {
		_, err := model.Load(hideSource{Source: src, name: "blk.1.ffn_up_exps.weight", reshape: []int{64, 32, 4}})
		wantErr(t, err, dir, "blk.1.ffn_up_exps.weight", "[64 32 4]", "[64 32 8]")
	})
	t.Run("unsupported-arch", func(t *testing.T) {
		meta := model.MapMeta{}
		for k, v := range src.Meta().(model.MapMeta) {
			meta[k] = v
		}
		meta["general.architecture"] = "llama"
		_, err := model.Load(metaSource{src, meta})
		wantErr(t, err, dir, `"llama"`, "not supported")
	})
	t.Run("bad-hparam", func(t *testing.T) {
		meta := model.MapMeta{}
		for k, v := range src.Meta().(model.MapMeta) {
			meta[k] = v
		}
		meta["qwen3next.expert_used_count"] = uint32(9)
		_, err := model.Load(metaSource{src, meta})
		wantErr(t, err, dir, "expert_used_count")
	})
	t.Run("ctx-too-long", func(t *testing.T) {
		m, err := model.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.NewState(m.Cfg.CtxLen + 1)
		wantErr(t, err, dir, "qwen3next.context_length")
		st, _ := m.NewState(4)
		_, err = st.Forward(prompt[:5], false, nil)
		wantErr(t, err, "exceed the context of 4")
	})
	t.Run("hf-missing-tensor", func(t *testing.T) {
		bad := t.TempDir()
		cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		cfg = []byte(strings.Replace(string(cfg), `"num_experts": 8`, `"num_experts": 9`, 1))
		os.WriteFile(filepath.Join(bad, "config.json"), cfg, 0o644)
		os.Symlink(filepath.Join(dir, "model.safetensors"), filepath.Join(bad, "model.safetensors"))
		_, err := convert.FromHF(bad)
		wantErr(t, err, bad, "model.layers.0.mlp.experts.8.gate_proj.weight", "missing")
	})
	t.Run("hf-shape-mismatch", func(t *testing.T) {
		bad := t.TempDir()
		cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		cfg = []byte(strings.Replace(string(cfg), `"moe_intermediate_size": 32`, `"moe_intermediate_size": 48`, 1))
		os.WriteFile(filepath.Join(bad, "config.json"), cfg, 0o644)
		os.Symlink(filepath.Join(dir, "model.safetensors"), filepath.Join(bad, "model.safetensors"))
		_, err := convert.FromHF(bad)
		wantErr(t, err, bad, "model.layers.0.mlp.experts.0.gate_proj.weight", "[32 64]", "[48 64]")
	})
	t.Run("hf-unsupported-arch", func(t *testing.T) {
		bad := t.TempDir()
		os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type": "llama"}`), 0o644)
		_, err := convert.FromHF(bad)
		wantErr(t, err, "config.json", `"llama"`, "not supported")
	})
}

// TestTruncatedFileIsAnError: a GGUF truncated while mapped must make Forward return an
// error naming the file, not crash the process with SIGBUS.
func TestTruncatedFileIsAnError(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1":
		t.Skip("gguf reads the file into memory on this system; truncation cannot fault")
	}
	p, err := convert.FromHF(tinyHF(t, "tiny-qwen3moe"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := p.WriteGGUF(path, quant.Q8_0, nil); err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	st, _ := m.NewState(8)
	_, err = st.Forward(prompt[:4], false, nil)
	wantErr(t, err, path, "memory fault")
}
