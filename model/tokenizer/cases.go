package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Case is one line of a reference case file (cases.jsonl): a text and what the reference
// implementation made of it. Fields that are absent from a line are not checked.
type Case struct {
	Line                      int     `json:"-"` // 1-based line in the file
	Text                      string  `json:"text"`
	IDs                       []int32 `json:"ids"`                      // special tokens not parsed
	IDsWithSpecialParsing     []int32 `json:"ids_with_special_parsing"` // special tokens parsed
	Decoded                   *string `json:"decoded"`                  // Decode(IDs)
	DecodedWithSpecialParsing *string `json:"decoded_with_special_parsing"`
	Category                  string  `json:"category"`
}

// ReadCases reads a JSON-lines case file; blank lines are skipped.
func ReadCases(r io.Reader) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		c := Case{Line: line}
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("tokenizer: case line %d: %w", line, err)
		}
		if c.IDs == nil && c.IDsWithSpecialParsing == nil && c.Decoded == nil && c.DecodedWithSpecialParsing == nil {
			return nil, fmt.Errorf("tokenizer: case line %d has none of ids, ids_with_special_parsing, decoded, decoded_with_special_parsing", line)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer: reading cases: %w", err)
	}
	return out, nil
}

// CaseMismatch is one field of a case where t disagrees with the reference.
type CaseMismatch struct {
	Field     string // "ids", "ids_with_special_parsing", "decoded" or "decoded_with_special_parsing"
	Got, Want string // the values near the first difference, formatted for printing
	At        int    // index of the first differing id or byte
}

// CheckCase compares t with every field c carries and returns the mismatches.
func (t *Tokenizer) CheckCase(c Case) []CaseMismatch {
	var out []CaseMismatch
	checkIDs := func(field string, want []int32, parseSpecial bool, decoded *string, decField string) {
		if want == nil && decoded == nil {
			return
		}
		got := t.Encode(c.Text, parseSpecial)
		if want != nil {
			if at := firstDiff(got, want); at >= 0 {
				out = append(out, CaseMismatch{Field: field, Got: window(got, at, "%v"), Want: window(want, at, "%v"), At: at})
			}
		}
		if decoded != nil {
			ids := want
			if ids == nil {
				ids = got
			}
			text, err := t.Decode(ids)
			if err != nil {
				out = append(out, CaseMismatch{Field: decField, Got: "error: " + err.Error(), Want: fmt.Sprintf("%q", *decoded)})
			} else if at := firstDiff([]byte(text), []byte(*decoded)); at >= 0 {
				out = append(out, CaseMismatch{Field: decField, Got: window([]byte(text), at, "%q"), Want: window([]byte(*decoded), at, "%q"), At: at})
			}
		}
	}
	checkIDs("ids", c.IDs, false, c.Decoded, "decoded")
	checkIDs("ids_with_special_parsing", c.IDsWithSpecialParsing, true, c.DecodedWithSpecialParsing, "decoded_with_special_parsing")
	return out
}

// window formats the part of s around index at (8 elements either side), marking cuts.
func window[T any](s []T, at int, verb string) string {
	lo, hi := max(at-8, 0), min(at+8, len(s))
	var b strings.Builder
	b.WriteString(fmt.Sprintf("len %d: ", len(s)))
	if lo > 0 {
		b.WriteString("...")
	}
	b.WriteString(fmt.Sprintf(verb, s[lo:hi]))
	if hi < len(s) {
		b.WriteString("...")
	}
	return b.String()
}

// firstDiff returns the first index where a and b differ, or -1 when they are equal.
func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
