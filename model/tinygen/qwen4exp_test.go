package tinygen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestQwen4ExpMatchesRecordedHash rebuilds the tiny qwen4exp checkpoint from the tensor
// list in its oracle.json and compares the size and sha256 the Python generator recorded.
func TestQwen4ExpMatchesRecordedHash(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "tiny-qwen4exp", "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		SHA256 string `json:"weights_sha256"`
		Bytes  int    `json:"weights_bytes"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	b, err := SafetensorsFromOracle(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if len(b) != o.Bytes || hex.EncodeToString(sum[:]) != o.SHA256 {
		t.Fatalf("rebuilt %d bytes sha256 %x, oracle.json records %d bytes sha256 %s", len(b), sum, o.Bytes, o.SHA256)
	}
}
