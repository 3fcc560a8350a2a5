package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TokenType is a token's kind, with the values of GGUF's tokenizer.ggml.token_type.
type TokenType int32

// Token types.
const (
	TypeUndefined   TokenType = 0 // treated as TypeNormal
	TypeNormal      TokenType = 1 // an ordinary BPE token, stored in byte-level form
	TypeUnknown     TokenType = 2 // never produced by Encode; decodes to its text
	TypeControl     TokenType = 3 // special token, matched only with special-token parsing
	TypeUserDefined TokenType = 4 // added token, always matched, stored as plain text
	TypeUnused      TokenType = 5 // padding entry (e.g. "[PAD151669]"); decodes to nothing
	TypeByte        TokenType = 6 // SentencePiece byte token "<0xXX>"; not valid in byte-level BPE
)

// Data is everything a Tokenizer is built from, independent of any file format.
// FromTokenizerJSON and FromGGUF fill it; converters can write it out again.
type Data struct {
	Model string // tokenizer family; only "gpt2" (byte-level BPE) is supported
	Pre   string // pre-tokenizer; only "qwen2" is supported (NFC + the Qwen2 split)

	// Tokens holds every token's text, indexed by id. Normal tokens are in byte-level form
	// ("Ġthe" for " the"); control and user-defined tokens are plain text ("<|im_end|>").
	Tokens []string
	// Types holds each token's type, indexed by id; nil means every token is TypeNormal.
	Types []TokenType
	// Merges lists the BPE merges, lowest rank (applied first) first, each as the two
	// byte-level token strings joined by one space ("Ġ t"), as in GGUF.
	Merges []string

	BOS, EOS, PAD  int32 // token ids; -1 when the tokenizer has none
	AddBOS, AddEOS bool  // whether Encode adds BOS / EOS (both false for Qwen)

	ChatTemplate string // the Jinja chat template text, if the source carried one; never executed
}

// validate checks d and reports the first problem, naming it.
func (d *Data) validate() error {
	if d.Model != "gpt2" {
		return fmt.Errorf("tokenizer: model %q is not supported; only byte-level BPE (\"gpt2\") is", d.Model)
	}
	if d.Pre != "qwen2" {
		return fmt.Errorf("tokenizer: pre-tokenizer %q is not supported; only \"qwen2\" is", d.Pre)
	}
	n := len(d.Tokens)
	if n == 0 {
		return fmt.Errorf("tokenizer: the vocabulary is empty")
	}
	if n > 1<<24 {
		return fmt.Errorf("tokenizer: %d tokens is more than the 16777216 supported", n)
	}
	if len(d.Merges) > 1<<24 {
		return fmt.Errorf("tokenizer: %d merges is more than the 16777216 supported", len(d.Merges))
	}
	if d.Types != nil && len(d.Types) != n {
		return fmt.Errorf("tokenizer: %d token types for %d tokens; the two lists must have the same length", len(d.Types), n)
	}
	for id, ty := range d.Types {
		switch ty {
		case TypeUndefined, TypeNormal, TypeUnknown, TypeControl, TypeUserDefined, TypeUnused:
		case TypeByte:
			return fmt.Errorf("tokenizer: token %d (%q) has type byte (6), which only SentencePiece vocabularies use", id, clip(d.Tokens[id]))
		default:
			return fmt.Errorf("tokenizer: token %d has unknown type %d (valid types are 0-6)", id, ty)
		}
		if (ty == TypeControl || ty == TypeUserDefined) && (d.Tokens[id] == "" || !utf8.ValidString(d.Tokens[id])) {
			return fmt.Errorf("tokenizer: added token %d is empty or not valid UTF-8", id)
		}
	}
	for _, s := range []struct {
		name string
		id   int32
	}{{"BOS", d.BOS}, {"EOS", d.EOS}, {"PAD", d.PAD}} {
		if s.id < -1 || s.id >= int32(n) {
			return fmt.Errorf("tokenizer: %s token id %d is outside the vocabulary of %d tokens", s.name, s.id, n)
		}
	}
	if d.AddBOS && d.BOS < 0 {
		return fmt.Errorf("tokenizer: AddBOS is set but there is no BOS token")
	}
	if d.AddEOS && d.EOS < 0 {
		return fmt.Errorf("tokenizer: AddEOS is set but there is no EOS token")
	}
	return nil
}

// typeOf returns token id's type, with TypeUndefined read as TypeNormal.
func (d *Data) typeOf(id int) TokenType {
	if d.Types == nil || d.Types[id] == TypeUndefined {
		return TypeNormal
	}
	return d.Types[id]
}

// clip shortens s for error messages and quotes nothing itself.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
