package convert

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/model/tokenizer"
	"github.com/strata-hip/strata/quant"
)

// OutputTypes are the weight types WriteGGUF can produce, by their command-line names.
var OutputTypes = map[string]quant.Type{"f32": quant.F32, "f16": quant.F16, "bf16": quant.BF16, "q8_0": quant.Q8_0, "q2_0": quant.Q2_0, "q4_k": quant.Q4_K, "q6_k": quant.Q6_K}

// fileType is general.file_type (llama.cpp's LLAMA_FTYPE) for each output type
// (LLAMA_FTYPE_MOSTLY_Q2_0 = 41 in include/llama.h since Q2_0 was added, July 2026).
var fileType = map[quant.Type]uint32{quant.F32: 0, quant.F16: 1, quant.Q8_0: 7, quant.Q4_K: 15, quant.Q6_K: 18, quant.BF16: 32, quant.Q2_0: 41}

// AddTokenizer reads a Hugging Face tokenizer.json (or .json.gz; tokenizer_config.json
// beside it is used when present) and records its GGUF metadata in the plan. The token
// list is padded to the embedding's row count with unused entries, as llama.cpp's
// converter does, so the vocabulary and token_embd agree.
func (p *Plan) AddTokenizer(path string) error {
	raw, err := readMaybeGz(path)
	if err != nil {
		return fmt.Errorf("convert: tokenizer: %w", err)
	}
	var cfg []byte
	if c, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json")); err == nil {
		cfg = c
	}
	d, err := tokenizer.DataFromTokenizerJSON(raw, cfg)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", path, err)
	}
	vocab := 0
	for _, t := range p.Tensors {
		if t.Name == "token_embd.weight" {
			vocab = t.Dims[1]
		}
	}
	if len(d.Tokens) > vocab {
		return fmt.Errorf("convert: %s has %d tokens, more than the %d embedding rows", path, len(d.Tokens), vocab)
	}
	d.PadTo(vocab)
	p.tokKVs = d.GGUFKVs()
	return nil
}

// FindTokenizer returns the tokenizer.json of a model directory, or "" if it has none.
func FindTokenizer(dir string) string {
	for _, n := range []string{"tokenizer.json", "tokenizer.json.gz"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return filepath.Join(dir, n)
		}
	}
	return ""
}

func readMaybeGz(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return raw, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(io.LimitReader(zr, 1<<30))
}

// tensorType picks the stored type of one tensor: t for matrices whose rows are whole
// blocks of t, F32 for the tensors marked KeepF32, and for a row length t cannot block
// (e.g. Q4_K's 256 on a 64-wide model, Q2_0's 64 on a 32-wide expert) the next format
// that can: Q8_0, else F32. The fallback is what llama.cpp's quantizer does for such rows.
func tensorType(tt *Tensor, t quant.Type) quant.Type {
	if tt.KeepF32 || len(tt.Dims) < 2 {
		return quant.F32
	}
	for _, c := range []quant.Type{t, quant.Q8_0, quant.F32} {
		if tt.Dims[0]%c.BlockElems() == 0 {
			return c
		}
	}
	return quant.F32
}

// HasTokenizer reports whether AddTokenizer has run.
func (p *Plan) HasTokenizer() bool { return p.tokKVs != nil }

// WriteGGUF writes the plan to path with matrices in weight type t. Without tokenizer
// metadata (see HasTokenizer) the file serves logit checks but not text generation.
func (p *Plan) WriteGGUF(path string, t quant.Type, progress io.Writer) error {
	if _, ok := fileType[t]; !ok {
		return fmt.Errorf("convert: output type %s is not supported (f32, f16, bf16, q8_0, q2_0, q4_k, q6_k)", t)
	}
	w := gguf.NewWriter()
	add := func(k string, v any) error {
		if err := w.AddKV(k, v); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		return nil
	}
	keys := p.Meta.Keys()
	sort.SliceStable(keys, func(i, j int) bool { return rank(keys[i]) < rank(keys[j]) })
	for _, k := range keys {
		if err := add(k, p.Meta[k]); err != nil {
			return err
		}
	}
	if err := add("general.file_type", fileType[t]); err != nil {
		return err
	}
	// ggml's block-format version (GGML_QNT_VERSION), which llama.cpp's converter always writes.
	if err := add("general.quantization_version", uint32(2)); err != nil {
		return err
	}
	for _, kv := range p.tokKVs {
		if err := add(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for _, tt := range p.Tensors {
		st := tensorType(tt, t)
		dims := make([]uint64, len(tt.Dims))
		for i, d := range tt.Dims {
			dims[i] = uint64(d)
		}
		load := tt.Load
		name := tt.Name
		cols := tt.Dims[0]
		err := w.AddTensorFunc(name, gguf.Type(st), dims, func(out io.Writer) error {
			if tt.LoadRows != nil {
				return writeRows(out, tt, st, progress)
			}
			v, err := load()
			if err != nil {
				return err
			}
			rb, err := st.RowBytes(cols)
			if err != nil {
				return fmt.Errorf("convert: %s: %w", name, err)
			}
			rows := len(v) / cols
			buf := make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				if err := quant.Quantize(st, v[r*cols:(r+1)*cols], buf[r*rb:(r+1)*rb]); err != nil {
					return fmt.Errorf("convert: %s: %w", name, err)
				}
			}
			if progress != nil {
				fmt.Fprintf(progress, "%-36s %-5s %v\n", name, st, dims)
			}
			_, err = out.Write(buf)
			return err
		})
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	if err := p.writeFile(w, path); err != nil {
		return fmt.Errorf("convert: writing %s: %w", path, err)
	}
	return nil
}

// rank orders metadata: general.* first, then the architecture's keys.
func rank(k string) int {
	if strings.HasPrefix(k, "general.") {
		if k == "general.architecture" {
			return 0
		}
		return 1
	}
	return 2
}
