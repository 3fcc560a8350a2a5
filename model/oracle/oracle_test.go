package oracle

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/model/tinygen"
)

// tinyHFDir rebuilds a tiny model's Hugging Face directory (config.json + safetensors) in
// a temporary directory and returns it with the oracle directory.
func tinyHFDir(t *testing.T, name string) (hfDir, oracleDir string) {
	t.Helper()
	oracleDir = filepath.Join("..", "testdata", name)
	hfDir = t.TempDir()
	if err := tinygen.WriteHF(oracleDir, hfDir); err != nil {
		t.Fatal(err)
	}
	return hfDir, oracleDir
}

// TestTinyModelsInMemory checks the forward passes against the oracle from the
// converter's in-memory F32 output (no GGUF involved).
func TestTinyModelsInMemory(t *testing.T) {
	for _, name := range []string{"tiny-qwen3moe", "tiny-qwen3next"} {
		t.Run(name, func(t *testing.T) {
			hf, od := tinyHFDir(t, name)
			p, err := convert.FromHF(hf)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			src, err := p.Source()
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := BoundsFor("F32", "")
			var out bytes.Buffer
			res, err := Check(m, od, b, &out)
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			if res.Failed > 0 || res.Passed == 0 {
				t.Fatalf("%d passed, %d failed", res.Passed, res.Failed)
			}
		})
	}
}

// TestCheckPath runs the check-logits pipeline (convert to GGUF, map, load, compare) on
// both tiny models in F32 and Q8_0.
func TestCheckPath(t *testing.T) {
	for _, name := range []string{"tiny-qwen3moe", "tiny-qwen3next"} {
		for _, typ := range []string{"f32", "q8_0"} {
			t.Run(name+"/"+typ, func(t *testing.T) {
				hf, od := tinyHFDir(t, name)
				var out bytes.Buffer
				res, err := CheckPath(hf, od, typ, &out)
				if err != nil {
					t.Fatal(err)
				}
				t.Log("\n" + out.String())
				if res.Failed > 0 || res.Passed == 0 {
					t.Fatalf("%d passed, %d failed", res.Passed, res.Failed)
				}
			})
		}
	}
}

// TestCheckPathRebuildsTinyWeights: a tiny oracle directory as shipped (config.json,
// oracle.json, outputs, no weights) is checked directly: the weights are rebuilt from the
// recorded seed and verified against the recorded sha256.
func TestCheckPathRebuildsTinyWeights(t *testing.T) {
	od := filepath.Join("..", "testdata", "tiny-qwen3moe")
	var out bytes.Buffer
	res, err := CheckPath(od, od, "", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("sha256 matches")) || res.Failed > 0 || res.Passed == 0 {
		t.Fatalf("%d passed, %d failed:\n%s", res.Passed, res.Failed, out.String())
	}
}
