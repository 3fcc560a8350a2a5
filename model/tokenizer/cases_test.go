package tokenizer

import (
	"fmt"
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
