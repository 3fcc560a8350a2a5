package tokenizer

import (
	"compress/gzip"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestQwen3Cases checks both encodings and both decodings of every reference case.
func TestQwen3Cases(t *testing.T) {
	tok := loadQwen3(t)
	for _, c := range readQwen3Cases(t) {
		t.Run(fmt.Sprintf("line%03d_%s", c.Line, c.Category), func(t *testing.T) {
			if diff := cmp.Diff(c.IDs, tok.Encode(c.Text, false)); diff != "" {
				t.Errorf("ids of %q (-want +got):\n%s", clip(c.Text), diff)
			}
			if diff := cmp.Diff(c.IDsWithSpecialParsing, tok.Encode(c.Text, true)); diff != "" {
				t.Errorf("ids_with_special_parsing of %q (-want +got):\n%s", clip(c.Text), diff)
			}
			for _, d := range []struct {
				ids  []int32
				want *string
			}{{c.IDs, c.Decoded}, {c.IDsWithSpecialParsing, c.DecodedWithSpecialParsing}} {
				got, err := tok.Decode(d.ids)
				if err != nil {
					t.Fatal(err)
				}
				if d.want == nil || got != *d.want {
					t.Errorf("decode of %q: got %q, want %v", clip(c.Text), got, d.want)
				}
			}
			if m := tok.CheckCase(c); len(m) != 0 {
				t.Errorf("CheckCase reports %v although the fields agree", m)
			}
		})
	}
}

// TestRandomReferenceCases checks 2000 random texts (gen_random_texts.py: every category
// of the reference cases plus random code points from all planes) against the reference
// implementation's encodings (testdata/random_cases.jsonl.gz, from gen_reference.js).
func TestRandomReferenceCases(t *testing.T) {
	tok := loadQwen3(t)
	f, err := os.Open("testdata/random_cases.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := ReadCases(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2000 {
		t.Fatalf("%d cases, want 2000", len(cases))
	}
	failed := 0
	for _, c := range cases {
		if m := tok.CheckCase(c); len(m) != 0 {
			if failed++; failed <= 5 {
				t.Errorf("line %d %+q: %s differs at %d\ngot  %s\nwant %s", c.Line, clip(c.Text), m[0].Field, m[0].At, m[0].Got, m[0].Want)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d random cases differ from the reference", failed, len(cases))
	}
}
