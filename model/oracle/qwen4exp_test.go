package oracle

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/model/tinygen"
)

// tinyQwen4ExpDir rebuilds the tiny qwen4exp checkpoint (config.json + safetensors) from
// the tensor list in its oracle.json.
func tinyQwen4ExpDir(t *testing.T) (hfDir, oracleDir string) {
	t.Helper()
	oracleDir = filepath.Join("..", "testdata", "tiny-qwen4exp")
	cfg, err := os.ReadFile(filepath.Join(oracleDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(oracleDir, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := tinygen.SafetensorsFromOracle(raw)
	if err != nil {
		t.Fatal(err)
	}
	hfDir = t.TempDir()
	for n, b := range map[string][]byte{"config.json": cfg, "model.safetensors": st} {
		if err := os.WriteFile(filepath.Join(hfDir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hfDir, oracleDir
}

// TestQwen4ExpCheckPath runs the check-logits pipeline on the tiny qwen4exp model: convert
// to a GGUF file (F32 under the exact bounds, Q8_0 under its NMSE bounds), map, load, compare.
func TestQwen4ExpCheckPath(t *testing.T) {
	for _, typ := range []string{"f32", "q8_0"} {
		t.Run(typ, func(t *testing.T) {
			hf, od := tinyQwen4ExpDir(t)
			var out bytes.Buffer
			res, err := CheckPath(hf, od, typ, &out)
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed > 0 || res.Passed == 0 {
				t.Fatalf("%d passed, %d failed", res.Passed, res.Failed)
			}
		})
	}
}
