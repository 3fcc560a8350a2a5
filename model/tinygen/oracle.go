package tinygen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FromOracle rebuilds the model.safetensors of the tiny model whose config.json and
// oracle.json are given: a qwen4_exp* model from the tensor list its oracle records
// (SafetensorsFromOracle), any other from the oracle's seed and embedding_kind
// (Safetensors; an absent kind is make_weights.py's default, w1). The caller checks the
// result against the oracle's weights_sha256 where it must be exact.
func FromOracle(configJSON, oracleJSON []byte) ([]byte, error) {
	var c struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(configJSON, &c); err != nil {
		return nil, fmt.Errorf("tinygen: config.json: %w", err)
	}
	if strings.HasPrefix(c.ModelType, "qwen4_exp") {
		return SafetensorsFromOracle(oracleJSON)
	}
	var o struct {
		Seed int    `json:"seed"`
		Kind string `json:"embedding_kind"`
	}
	if err := json.Unmarshal(oracleJSON, &o); err != nil {
		return nil, fmt.Errorf("tinygen: oracle.json: %w", err)
	}
	if o.Kind == "" {
		o.Kind = "w1"
	}
	return Safetensors(configJSON, o.Seed, o.Kind)
}

// WriteHF writes a Hugging Face directory for the tiny model of oracleDir (its
// config.json and oracle.json) into dir: config.json and the rebuilt model.safetensors.
func WriteHF(oracleDir, dir string) error {
	cfg, err := os.ReadFile(filepath.Join(oracleDir, "config.json"))
	if err != nil {
		return fmt.Errorf("tinygen: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(oracleDir, "oracle.json"))
	if err != nil {
		return fmt.Errorf("tinygen: %w", err)
	}
	st, err := FromOracle(cfg, raw)
	if err != nil {
		return fmt.Errorf("tinygen: %s: %w", oracleDir, err)
	}
	for n, b := range map[string][]byte{"config.json": cfg, "model.safetensors": st} {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return fmt.Errorf("tinygen: %w", err)
		}
	}
	return nil
}
