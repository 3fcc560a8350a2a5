package oracle

import (
	"bytes"
	"testing"
)

// TestQwen4ExpCheckPath runs the check-logits pipeline on the tiny qwen4exp model: convert
// to a GGUF file (F32 under the exact bounds, Q8_0 under its NMSE bounds), map, load, compare.
func TestQwen4ExpCheckPath(t *testing.T) {
	for _, typ := range []string{"f32", "q8_0"} {
		t.Run(typ, func(t *testing.T) {
			hf, od := tinyHFDir(t, "tiny-qwen4exp")
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
