package tokenizer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strata-hip/strata/gguf"
)

// TestGGUFRoundTrip writes the Qwen3 tokenizer into GGUF metadata the way a converter
// would (GGUFKVs, padded to the model's 151936 rows), reads it back with LoadGGUF and
// Load, and checks every reference case against the GGUF-loaded tokenizer.
func TestGGUFRoundTrip(t *testing.T) {
	d := loadQwen3(t).Data()
	d.PadTo(151936)
	w := gguf.NewWriter()
	if err := w.AddKV("general.architecture", "qwen3moe"); err != nil {
		t.Fatal(err)
	}
	for _, kv := range d.GGUFKVs() {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "tok.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 151936 || tok.EOS() != 151645 || tok.PAD() != 151643 || tok.BOS() != -1 {
		t.Fatalf("vocab %d, eos %d, pad %d, bos %d; want 151936, 151645, 151643, -1", tok.VocabSize(), tok.EOS(), tok.PAD(), tok.BOS())
	}
	if !strings.Contains(tok.Data().ChatTemplate, "<|im_start|>") {
		t.Errorf("chat template did not survive the round trip")
	}
	for _, c := range readQwen3Cases(t) {
		if m := tok.CheckCase(c); len(m) != 0 {
			t.Errorf("line %d (%q): %+v", c.Line, clip(c.Text), m[0])
		}
	}
	if tok.Type(151700) != TypeUnused || tok.Type(151644) != TypeControl || tok.Type(151667) != TypeUserDefined || tok.Type(9707) != TypeNormal || tok.Type(-1) != TypeUnused {
		t.Errorf("Type: %d %d %d %d", tok.Type(151700), tok.Type(151644), tok.Type(151667), tok.Type(9707))
	}
	// A padding row decodes to nothing, and is never produced by Encode.
	if s, err := tok.Decode([]int32{151700}); err != nil || s != "" {
		t.Errorf("Decode(padding row) = %q, %v; want empty", s, err)
	}
}

// fakeMeta is GGUF metadata in a map, to reach every error path of DataFromGGUF.
type fakeMeta map[string]any

func (m fakeMeta) Has(k string) bool { _, ok := m[k]; return ok }
func get[T any](m fakeMeta, k string) (T, error) {
	var zero T
	v, ok := m[k]
	if !ok {
		return zero, fmt.Errorf("key %q: %w", k, gguf.ErrMissingKey)
	}
	x, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("key %q has type %T", k, v)
	}
	return x, nil
}
func (m fakeMeta) String(k string) (string, error)    { return get[string](m, k) }
func (m fakeMeta) Strings(k string) ([]string, error) { return get[[]string](m, k) }
func (m fakeMeta) Ints(k string) ([]int, error)       { return get[[]int](m, k) }
func (m fakeMeta) Int(k string) (int, error)          { return get[int](m, k) }
func (m fakeMeta) Bool(k string) (bool, error)        { return get[bool](m, k) }

// tinyMeta is a complete, valid byte-level vocabulary: the 256 byte tokens, "ab", and one
// control token.
func tinyMeta() fakeMeta {
	var toks []string
	var types []int
	for b := 0; b < 256; b++ {
		toks = append(toks, string(byteToRune[b]))
		types = append(types, 1)
	}
	toks = append(toks, "ab", "<|end|>")
	types = append(types, 1, 3)
	return fakeMeta{KeyModel: "gpt2", KeyPre: "qwen2", KeyTokens: toks, KeyTokenType: types,
		KeyMerges: []string{"a b"}, KeyEOS: 257}
}

func TestFromGGUFTiny(t *testing.T) {
	tok, err := FromGGUF(tinyMeta())
	if err != nil {
		t.Fatal(err)
	}
	// "ab" merges; ' ', 'c' are single bytes (byte value = id here).
	want := []int32{256, ' ', 'c', 257}
	if diff := cmp.Diff(want, tok.Encode("ab c<|end|>", true)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !tok.IsControl(257) || tok.EOS() != 257 {
		t.Errorf("control/EOS not read")
	}
}

func TestFromGGUFErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(fakeMeta)
		want string
	}{
		{"missing model", func(m fakeMeta) { delete(m, KeyModel) }, KeyModel},
		{"sentencepiece", func(m fakeMeta) { m[KeyModel] = "llama" }, "only byte-level BPE"},
		{"missing pre", func(m fakeMeta) { delete(m, KeyPre) }, "convert the model again"},
		{"other pre", func(m fakeMeta) { m[KeyPre] = "llama3" }, `pre-tokenizer "llama3"`},
		{"tokens as ints", func(m fakeMeta) { m[KeyTokens] = []int{1} }, "type"},
		{"short types", func(m fakeMeta) { m[KeyTokenType] = []int{1, 1} }, "same length"},
		{"bad type", func(m fakeMeta) { m[KeyTokenType].([]int)[5] = 9 }, "unknown type 9"},
		{"byte type", func(m fakeMeta) { m[KeyTokenType].([]int)[5] = 6 }, "SentencePiece"},
		{"eos out of range", func(m fakeMeta) { m[KeyEOS] = 258 }, "outside the vocabulary"},
		{"bos negative", func(m fakeMeta) { m[KeyBOS] = -1 }, "outside the vocabulary"},
		{"merge unknown", func(m fakeMeta) { m[KeyMerges] = []string{"a zz"} }, `"zz", which is not in the vocabulary`},
		{"merge result unknown", func(m fakeMeta) { m[KeyMerges] = []string{"a c"} }, `makes "ac"`},
		{"merge one part", func(m fakeMeta) { m[KeyMerges] = []string{"abc"} }, "two tokens"},
		{"missing byte token", func(m fakeMeta) { m[KeyTokens].([]string)[65] = "zz" }, "no token for byte 0x41"},
		{"add bos without bos", func(m fakeMeta) { m[KeyAddBOS] = true }, "no BOS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tinyMeta()
			tc.edit(m)
			_, err := FromGGUF(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := FromGGUF(fakeMeta{}); !errors.Is(err, gguf.ErrMissingKey) {
		t.Errorf("empty metadata: %v, want ErrMissingKey", err)
	}
}
