package oracle

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
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
			return Result{}, fmt.Errorf("check-logits: --type %q is not one of f32, f16, bf16, q8_0, q4_k, q6_k", outType)
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
