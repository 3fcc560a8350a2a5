package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/strata-hip/strata/gguf"
)

// GGUF metadata keys of the tokenizer, in llama.cpp's conventions.
const (
	KeyModel        = "tokenizer.ggml.model"
	KeyPre          = "tokenizer.ggml.pre"
	KeyTokens       = "tokenizer.ggml.tokens"
	KeyTokenType    = "tokenizer.ggml.token_type"
	KeyMerges       = "tokenizer.ggml.merges"
	KeyBOS          = "tokenizer.ggml.bos_token_id"
	KeyEOS          = "tokenizer.ggml.eos_token_id"
	KeyPAD          = "tokenizer.ggml.padding_token_id"
	KeyAddBOS       = "tokenizer.ggml.add_bos_token"
	KeyAddEOS       = "tokenizer.ggml.add_eos_token"
	KeyChatTemplate = "tokenizer.chat_template"
)

// GGUFMetadata is the part of *gguf.File that FromGGUF reads. The getters must check the
// value's type (as gguf's do) and return an error for a missing key.
type GGUFMetadata interface {
	Has(key string) bool
	String(key string) (string, error)
	Strings(key string) ([]string, error)
	Ints(key string) ([]int, error) // any integer element type
	Int(key string) (int, error)    // any integer type
	Bool(key string) (bool, error)
}

var _ GGUFMetadata = (*gguf.File)(nil)

// FromGGUF builds a Tokenizer from a GGUF file's tokenizer.ggml.* metadata.
//
// Unlike llama.cpp, which has no normalizer for "qwen2", the text is NFC-normalized first,
// as the Hugging Face tokenizer the model was trained with does; the two differ only on
// text that is not already in NFC.
func FromGGUF(m GGUFMetadata) (*Tokenizer, error) {
	d, err := DataFromGGUF(m)
	if err != nil {
		return nil, err
	}
	return New(*d)
}

// DataFromGGUF reads the tokenizer Data from GGUF metadata without building the Tokenizer.
func DataFromGGUF(m GGUFMetadata) (*Data, error) {
	d := &Data{BOS: -1, EOS: -1, PAD: -1}
	var err error
	if d.Model, err = m.String(KeyModel); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if d.Model != "gpt2" {
		return nil, fmt.Errorf("tokenizer: %s is %q; only byte-level BPE (\"gpt2\") is supported", KeyModel, clip(d.Model))
	}
	if !m.Has(KeyPre) {
		return nil, fmt.Errorf("tokenizer: %s is missing, so the pre-tokenizer is unknown; convert the model again with a current converter", KeyPre)
	}
	if d.Pre, err = m.String(KeyPre); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if d.Tokens, err = m.Strings(KeyTokens); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if d.Merges, err = m.Strings(KeyMerges); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if m.Has(KeyTokenType) {
		types, err := m.Ints(KeyTokenType)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		d.Types = make([]TokenType, len(types))
		for i, ty := range types {
			if ty < 0 || ty > math.MaxInt32 {
				return nil, fmt.Errorf("tokenizer: %s[%d] = %d is not a token type", KeyTokenType, i, ty)
			}
			d.Types[i] = TokenType(ty)
		}
	}
	for _, s := range []struct {
		key string
		dst *int32
	}{{KeyBOS, &d.BOS}, {KeyEOS, &d.EOS}, {KeyPAD, &d.PAD}} {
		if !m.Has(s.key) {
			continue
		}
		id, err := m.Int(s.key)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if id < 0 || id >= len(d.Tokens) {
			return nil, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", s.key, id, len(d.Tokens))
		}
		*s.dst = int32(id)
	}
	for _, s := range []struct {
		key string
		dst *bool
	}{{KeyAddBOS, &d.AddBOS}, {KeyAddEOS, &d.AddEOS}} {
		if m.Has(s.key) {
			if *s.dst, err = m.Bool(s.key); err != nil {
				return nil, fmt.Errorf("tokenizer: %w", err)
			}
		}
	}
	if m.Has(KeyChatTemplate) {
		if d.ChatTemplate, err = m.String(KeyChatTemplate); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return d, nil
}

// KV is one GGUF metadata entry; Value has a Go type that gguf.Writer.AddKV accepts.
type KV struct {
	Key   string
	Value any
}

// GGUFKVs returns d as GGUF metadata entries in llama.cpp's conventions, for converters:
// for each kv, call (*gguf.Writer).AddKV(kv.Key, kv.Value). Absent ids and an empty chat
// template are left out.
func (d *Data) GGUFKVs() []KV {
	types := make([]int32, len(d.Tokens))
	for i := range types {
		types[i] = int32(d.typeOf(i))
	}
	kvs := []KV{
		{KeyModel, d.Model},
		{KeyPre, d.Pre},
		{KeyTokens, d.Tokens},
		{KeyTokenType, types},
		{KeyMerges, d.Merges},
	}
	for _, s := range []struct {
		key string
		id  int32
	}{{KeyBOS, d.BOS}, {KeyEOS, d.EOS}, {KeyPAD, d.PAD}} {
		if s.id >= 0 {
			kvs = append(kvs, KV{s.key, uint32(s.id)})
		}
	}
	kvs = append(kvs, KV{KeyAddBOS, d.AddBOS}, KV{KeyAddEOS, d.AddEOS})
	if d.ChatTemplate != "" {
		kvs = append(kvs, KV{KeyChatTemplate, d.ChatTemplate})
	}
	return kvs
}

// PadTo appends unused entries "[PAD<id>]" until the vocabulary has n tokens, as llama.cpp's
// converter does for models whose embedding has more rows than the tokenizer has tokens
// (Qwen3: 151936 rows, 151669 tokens). It does nothing when there are already n or more.
func (d *Data) PadTo(n int) {
	if d.Types == nil {
		d.Types = make([]TokenType, len(d.Tokens))
		for i := range d.Types {
			d.Types[i] = TypeNormal
		}
	}
	for id := len(d.Tokens); id < n; id++ {
		d.Tokens = append(d.Tokens, fmt.Sprintf("[PAD%d]", id))
		d.Types = append(d.Types, TypeUnused)
	}
}

// LoadGGUF reads the tokenizer of a GGUF file.
func LoadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return FromGGUF(f)
}

// Load reads a tokenizer from path: a GGUF file (recognised by its magic), or a
// tokenizer.json / tokenizer.json.gz (with tokenizer_config.json beside it, if present).
func Load(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	if bytes.Equal(magic, []byte("GGUF")) {
		return LoadGGUF(path)
	}
	return LoadTokenizerJSON(path)
}
