package oracle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/model/tinygen"
)

// CheckPath checks a model against the oracle in oracleDir. modelPath is a GGUF file, or
// a Hugging Face directory that is first converted to a temporary GGUF of outType
// ("f32" when empty) — the same converter and loader users run, so the check covers them.
func CheckPath(modelPath, oracleDir, outType string, w io.Writer) (Result, error) {
	if _, err := Read(oracleDir); err != nil {
		return Result{}, err
	}
	st, err := os.Stat(modelPath)
	if err != nil {
		return Result{}, fmt.Errorf("check-logits: %w", err)
	}
	ggufPath := modelPath
	if st.IsDir() {
		if outType == "" {
			outType = "f32"
		}
		qt, ok := convert.OutputTypes[outType]
		if !ok {
			return Result{}, fmt.Errorf("check-logits: --type %q is not one of f32, f16, bf16, q8_0, q2_0, q4_k, q6_k", outType)
		}
		if files, _ := filepath.Glob(filepath.Join(modelPath, "*.safetensors")); len(files) == 0 {
			dir, cleanup, err := rebuildTiny(modelPath, oracleDir, w)
			if err != nil {
				return Result{}, err
			}
			defer cleanup()
			modelPath = dir
		}
		p, err := convert.FromHF(modelPath)
		if err != nil {
			return Result{}, err
		}
		defer p.Close()
		if tok := convert.FindTokenizer(modelPath); tok != "" {
			if err := p.AddTokenizer(tok); err != nil {
				return Result{}, err
			}
		}
		tmp, err := os.MkdirTemp("", "strata-check-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		ggufPath = filepath.Join(tmp, "model-"+outType+".gguf")
		if err := p.WriteGGUF(ggufPath, qt, nil); err != nil {
			return Result{}, err
		}
		fmt.Fprintf(w, "converted %s to %s\n", modelPath, outType)
	} else if outType != "" {
		return Result{}, fmt.Errorf("check-logits: --type applies to a Hugging Face directory; %s is already a file", modelPath)
	}
	src, err := model.OpenGGUF(ggufPath)
	if err != nil {
		return Result{}, err
	}
	defer src.Close()
	m, err := model.Load(src)
	if err != nil {
		return Result{}, err
	}
	b, err := BoundsFor(m.MatrixType(), m.Cfg.Arch)
	if err != nil {
		return Result{}, err
	}
	return Check(m, oracleDir, b, w)
}

// rebuildTiny handles a model directory without weights whose oracle.json records the
// generator seed and the weights' sha256 (the project's tiny oracle models, shipped without
// their 20 MB safetensors): model/tinygen rebuilds the file into a temporary directory,
// beside copies of the JSON files, and its sha256 must match the record.
func rebuildTiny(modelDir, oracleDir string, w io.Writer) (string, func(), error) {
	orc := filepath.Join(modelDir, "oracle.json")
	if _, err := os.Stat(orc); err != nil {
		orc = filepath.Join(oracleDir, "oracle.json")
	}
	raw, err := os.ReadFile(orc)
	if err != nil {
		return "", nil, fmt.Errorf("check-logits: %s has no *.safetensors and no oracle.json to rebuild them from", modelDir)
	}
	var rec struct {
		Seed   *int   `json:"seed"`
		SHA256 string `json:"weights_sha256"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Seed == nil || rec.SHA256 == "" {
		return "", nil, fmt.Errorf("check-logits: %s has no *.safetensors, and %s records no seed and weights_sha256 to rebuild them", modelDir, orc)
	}
	cfg, err := os.ReadFile(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return "", nil, fmt.Errorf("check-logits: %w", err)
	}
	st, err := tinygen.FromOracle(cfg, raw)
	if err != nil {
		return "", nil, fmt.Errorf("check-logits: rebuilding the weights of %s: %w", modelDir, err)
	}
	if sum := sha256.Sum256(st); hex.EncodeToString(sum[:]) != rec.SHA256 {
		return "", nil, fmt.Errorf("check-logits: rebuilt weights of %s have sha256 %x, %s records %s", modelDir, sum, orc, rec.SHA256)
	}
	tmp, err := os.MkdirTemp("", "strata-tiny-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	files := map[string][]byte{"config.json": cfg, "model.safetensors": st}
	for _, n := range []string{"tokenizer.json", "tokenizer.json.gz", "tokenizer_config.json"} {
		if b, err := os.ReadFile(filepath.Join(modelDir, n)); err == nil {
			files[n] = b
		}
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, n), b, 0o644); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	fmt.Fprintf(w, "rebuilt %s/model.safetensors from the seed in %s (sha256 matches)\n", modelDir, orc)
	return tmp, cleanup, nil
}
