package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// qwen2Regex is the Split pattern of Qwen2/Qwen3's tokenizer.json, which splitQwen2
// implements. A tokenizer.json with any other pattern is rejected.
const qwen2Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// maxJSONBytes bounds what the loaders read (after decompression): the Qwen3 tokenizer.json
// is 11 MB.
const maxJSONBytes = 256 << 20

type hfAddedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfTokenizerJSON struct {
	AddedTokens  []hfAddedToken `json:"added_tokens"`
	Normalizer   *hfComponent   `json:"normalizer"`
	PreTokenizer *hfComponent   `json:"pre_tokenizer"`
	Model        struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int64 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		Dropout                 *float64         `json:"dropout"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
	} `json:"model"`
}

// hfComponent is a normalizer or pre-tokenizer node; only the fields Qwen's use are read.
type hfComponent struct {
	Type          string         `json:"type"`
	Normalizers   []hfComponent  `json:"normalizers"`
	Pretokenizers []hfComponent  `json:"pretokenizers"`
	Pattern       map[string]any `json:"pattern"`
	Behavior      string         `json:"behavior"`
	Invert        bool           `json:"invert"`
	AddPrefix     bool           `json:"add_prefix_space"`
	UseRegex      bool           `json:"use_regex"`
}

type hfConfigJSON struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PADToken     json.RawMessage `json:"pad_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
}

// FromTokenizerJSON builds a Tokenizer from the bytes of a Hugging Face tokenizer.json and,
// optionally (nil to skip), of its tokenizer_config.json, which supplies the chat template
// and the BOS/EOS/PAD tokens. Either may be gzip-compressed.
func FromTokenizerJSON(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	d, err := DataFromTokenizerJSON(tokenizerJSON, configJSON)
	if err != nil {
		return nil, err
	}
	return New(*d)
}

// LoadTokenizerJSON reads a tokenizer.json (or tokenizer.json.gz) file and, when one lies
// beside it, tokenizer_config.json (or .json.gz).
func LoadTokenizerJSON(path string) (*Tokenizer, error) {
	tok, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	var cfg []byte
	for _, name := range []string{"tokenizer_config.json", "tokenizer_config.json.gz"} {
		p := filepath.Join(filepath.Dir(path), name)
		b, err := readMaybeGzip(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cfg = b
		break
	}
	t, err := FromTokenizerJSON(tok, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func readMaybeGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	b, err = gunzipIfNeeded(b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return b, nil
}

// gunzipIfNeeded decompresses b when it starts with the gzip magic, within maxJSONBytes.
func gunzipIfNeeded(b []byte) ([]byte, error) {
	if len(b) > maxJSONBytes {
		return nil, fmt.Errorf("larger than %d MiB; this is not a tokenizer file", maxJSONBytes>>20)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("bad gzip data: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("bad gzip data: %w", err)
	}
	if len(out) > maxJSONBytes {
		return nil, fmt.Errorf("decompresses to more than %d MiB; this is not a tokenizer file", maxJSONBytes>>20)
	}
	return out, nil
}

// DataFromTokenizerJSON is FromTokenizerJSON without building the Tokenizer: it returns the
// Data, in the form GGUF stores it (merges as "a b", added tokens typed control or
// user-defined), for converters.
func DataFromTokenizerJSON(tokenizerJSON, configJSON []byte) (*Data, error) {
	tokenizerJSON, err := gunzipIfNeeded(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	var hf hfTokenizerJSON
	if err := json.Unmarshal(tokenizerJSON, &hf); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json is not valid JSON of the expected shape: %w", err)
	}
	if err := checkHFPipeline(&hf); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	d := &Data{Model: "gpt2", Pre: "qwen2", BOS: -1, EOS: -1, PAD: -1}

	// Ids: the BPE vocabulary, then the added tokens; gaps become unused padding entries.
	n := int64(0)
	for _, id := range hf.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range hf.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n > 1<<24 {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: token id %d is beyond the 16777216 supported", n-1)
	}
	d.Tokens = make([]string, n)
	d.Types = make([]TokenType, n)
	set := make([]bool, n)
	for text, id := range hf.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: vocabulary entry %q has negative id %d", clip(text), id)
		}
		if set[id] {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: id %d is used by two vocabulary entries (%q and %q)", id, clip(d.Tokens[id]), clip(text))
		}
		d.Tokens[id], d.Types[id], set[id] = text, TypeNormal, true
	}
	for _, a := range hf.AddedTokens {
		switch {
		case a.ID < 0:
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added token %q has negative id %d", clip(a.Content), a.ID)
		case a.SingleWord || a.LStrip || a.RStrip || a.Normalized:
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added token %q sets single_word, lstrip, rstrip or normalized, which this tokenizer does not implement", clip(a.Content))
		case set[a.ID] && d.Tokens[a.ID] != a.Content:
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added token %q has id %d, which already belongs to %q", clip(a.Content), a.ID, clip(d.Tokens[a.ID]))
		}
		d.Tokens[a.ID], d.Types[a.ID], set[a.ID] = a.Content, TypeUserDefined, true
		if a.Special {
			d.Types[a.ID] = TypeControl
		}
	}
	for id := range d.Tokens {
		if !set[id] {
			d.Tokens[id], d.Types[id] = fmt.Sprintf("[PAD%d]", id), TypeUnused
		}
	}

	d.Merges, err = parseHFMerges(hf.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if configJSON != nil {
		if err := applyHFConfig(d, configJSON); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
	}
	return d, nil
}

// checkHFPipeline rejects tokenizer.json files whose pipeline this package would get wrong.
func checkHFPipeline(hf *hfTokenizerJSON) error {
	m := &hf.Model
	switch {
	case m.Type != "BPE":
		return fmt.Errorf("model type %q is not supported; only BPE is", m.Type)
	case len(m.Vocab) == 0:
		return fmt.Errorf("model.vocab is missing or empty")
	case m.ByteFallback || m.IgnoreMerges || m.Dropout != nil:
		return fmt.Errorf("BPE options byte_fallback, ignore_merges and dropout are not supported")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "",
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("BPE subword prefixes and suffixes are not supported")
	case hf.Normalizer == nil || hf.Normalizer.Type != "NFC":
		return fmt.Errorf("normalizer must be NFC (Qwen2's); other normalizers are not supported")
	}
	p := hf.PreTokenizer
	ok := p != nil && p.Type == "Sequence" && len(p.Pretokenizers) == 2
	if ok {
		s, b := p.Pretokenizers[0], p.Pretokenizers[1]
		ok = s.Type == "Split" && s.Pattern["Regex"] == qwen2Regex && s.Behavior == "Isolated" && !s.Invert &&
			b.Type == "ByteLevel" && !b.AddPrefix && !b.UseRegex
	}
	if !ok {
		return fmt.Errorf("pre_tokenizer is not Qwen2's (Split on its regex, then ByteLevel); other pre-tokenizers are not supported")
	}
	return nil
}

// parseHFMerges accepts both merge forms of tokenizer.json: ["a b", ...] and [["a","b"], ...].
func parseHFMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("model.merges is missing")
	}
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		return asStrings, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges is neither a list of strings nor a list of pairs: %w", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 || strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			return nil, fmt.Errorf("merge %d is not a pair of tokens without spaces", i)
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// applyHFConfig reads the chat template and special tokens of tokenizer_config.json into d.
func applyHFConfig(d *Data, configJSON []byte) error {
	configJSON, err := gunzipIfNeeded(configJSON)
	if err != nil {
		return err
	}
	var c hfConfigJSON
	if err := json.Unmarshal(configJSON, &c); err != nil {
		return fmt.Errorf("not valid JSON of the expected shape: %w", err)
	}
	if len(c.ChatTemplate) > 0 && string(c.ChatTemplate) != "null" {
		if err := json.Unmarshal(c.ChatTemplate, &d.ChatTemplate); err != nil {
			var named []struct{ Name, Template string }
			if err2 := json.Unmarshal(c.ChatTemplate, &named); err2 != nil {
				return fmt.Errorf("chat_template is neither a string nor a list of named templates")
			}
			for _, t := range named {
				if t.Name == "default" {
					d.ChatTemplate = t.Template
				}
			}
		}
	}
	for _, s := range []struct {
		name string
		raw  json.RawMessage
		dst  *int32
	}{{"bos_token", c.BOSToken, &d.BOS}, {"eos_token", c.EOSToken, &d.EOS}, {"pad_token", c.PADToken, &d.PAD}} {
		text, err := hfTokenText(s.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if text == "" {
			continue
		}
		id := -1
		for i, tok := range d.Tokens {
			if tok == text && d.Types[i] != TypeUnused {
				id = i
				break
			}
		}
		if id < 0 {
			return fmt.Errorf("%s %q is not a token of tokenizer.json", s.name, clip(text))
		}
		*s.dst = int32(id)
	}
	if c.AddBOSToken != nil {
		d.AddBOS = *c.AddBOSToken
	}
	if c.AddEOSToken != nil {
		d.AddEOS = *c.AddEOSToken
	}
	return nil
}

// hfTokenText reads a special-token field: null, a string, or {"content": "..."}.
func hfTokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("neither a string nor an object with content")
	}
	return o.Content, nil
}
