package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBPELongMatchesHeap runs the bucket BPE and the heap BPE on the same pieces, short
// and long, with the naive reference on the shorter ones.
func TestBPELongMatchesHeap(t *testing.T) {
	tok := loadQwen3(t)
	merges := naiveMerges(tok)
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "e", "t", "n", "s", "th", "ing", "\u00e9", "\u4e2d", "\u6587", "\U0001F600", "!", "=", "0", "\u0301"}
	for _, n := range []int{1, 2, 3, 10, 50, 300, 3000, 20000} {
		for range 20 {
			var b strings.Builder
			for b.Len() < n {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			p := b.String()
			heap := tok.bpe(p, nil)
			if diff := cmp.Diff(heap, tok.bpeLong(p, nil)); diff != "" {
				t.Fatalf("piece of %d bytes %+q (-heap +long):\n%s", len(p), clip(p), diff)
			}
			if n <= 300 {
				if diff := cmp.Diff(naiveBPE(tok, merges, p), heap); diff != "" {
					t.Fatalf("piece %+q (-naive +heap):\n%s", p, diff)
				}
			}
		}
	}
}

// TestBPENonMonotoneMerges uses a merge list where a merge creates a pair of lower rank
// than its own ("x ab" ranks before "a b"), which learned merge lists never contain; both
// BPEs must still agree with the naive reference.
func TestBPENonMonotoneMerges(t *testing.T) {
	m := tinyMeta()
	toks := m[KeyTokens].([]string)
	m[KeyTokens] = append(toks, "xab", "bb", "abb")
	m[KeyTokenType] = append(m[KeyTokenType].([]int), 1, 1, 1)
	m[KeyMerges] = []string{"x ab", "ab b", "b b", "a b"}
	tok, err := FromGGUF(m)
	if err != nil {
		t.Fatal(err)
	}
	merges := naiveMerges(tok)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 3000 {
		b := make([]byte, rng.IntN(40)+1)
		for i := range b {
			b[i] = "xab"[rng.IntN(3)]
		}
		p := string(b)
		want := naiveBPE(tok, merges, p)
		if diff := cmp.Diff(want, tok.bpe(p, nil)); diff != "" {
			t.Fatalf("heap, piece %q (-naive +got):\n%s", p, diff)
		}
		if diff := cmp.Diff(want, tok.bpeLong(p, nil)); diff != "" {
			t.Fatalf("long, piece %q (-naive +got):\n%s", p, diff)
		}
	}
}
