package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type naivePair struct{ l, r int32 }
type naiveMerge struct{ rank, result int32 }

// naiveMerges builds the merge table from Data with a plain map.
func naiveMerges(tok *Tokenizer) map[naivePair]naiveMerge {
	m := map[naivePair]naiveMerge{}
	for rank, s := range tok.Data().Merges {
		l, r, _ := strings.Cut(s, " ")
		p := naivePair{tok.vocab[l], tok.vocab[r]}
		if _, dup := m[p]; !dup {
			m[p] = naiveMerge{int32(rank), tok.vocab[l+r]}
		}
	}
	return m
}

// naiveBPE is the textbook algorithm, quadratic and obviously right: merge the leftmost
// pair of lowest rank until no pair has a merge.
func naiveBPE(tok *Tokenizer, merges map[naivePair]naiveMerge, piece string) []int32 {
	syms := make([]int32, len(piece))
	for i := range syms {
		syms[i] = tok.byteID[piece[i]]
	}
	for {
		best, bestRank, bestID := -1, int32(0), int32(0)
		for i := 0; i+1 < len(syms); i++ {
			m, ok := merges[naivePair{syms[i], syms[i+1]}]
			if ok && (best < 0 || m.rank < bestRank) {
				best, bestRank, bestID = i, m.rank, m.result
			}
		}
		if best < 0 {
			return syms
		}
		syms[best] = bestID
		syms = append(syms[:best+1], syms[best+2:]...)
	}
}

// TestBPEAgainstNaive compares the heap BPE with naiveBPE on every piece of every case and
// on random pieces.
func TestBPEAgainstNaive(t *testing.T) {
	tok := loadQwen3(t)
	var pieces []string
	for _, c := range readQwen3Cases(t) {
		splitQwen2(nfc(c.Text), func(p string) { pieces = append(pieces, p) })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "e", "t", "n", "s", "ing", "the", " ", "\u00e9", "\u4e2d", "\U0001F600", "!", "0"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(30) + 1 {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		pieces = append(pieces, b.String())
	}
	merges := naiveMerges(tok)
	for _, p := range pieces {
		if diff := cmp.Diff(naiveBPE(tok, merges, p), tok.bpe(p, nil)); diff != "" {
			t.Fatalf("piece %+q (-naive +heap):\n%s", p, diff)
		}
	}
}

func TestAddedTokens(t *testing.T) {
	tok := loadQwen3(t)
	plain := func(s string) []int32 { return tok.Encode(s, false) }
	for _, tc := range []struct {
		name         string
		text         string
		parseSpecial bool
		want         []int32
	}{
		{"control parsed", "<|im_start|>user", true, append([]int32{151644}, plain("user")...)},
		{"control as text", "<|im_start|>", false, []int32{27, 91, 318, 4906, 91, 29}}, // from the reference README
		{"user-defined always", "a<think>b", false, append(append(plain("a"), 151667), plain("b")...)},
		{"adjacent", "<|im_end|><|endoftext|>", true, []int32{151645, 151643}},
		{"case-sensitive", "<THINK>", true, plain("<THINK>")},
		{"partial", "<|im_start", true, plain("<|im_start")},
	} {
		if diff := cmp.Diff(tc.want, tok.Encode(tc.text, tc.parseSpecial)); diff != "" {
			t.Errorf("%s: Encode(%q) (-want +got):\n%s", tc.name, tc.text, diff)
		}
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || id != 151645 || tok.EOS() != 151645 || tok.PAD() != 151643 || tok.BOS() != -1 {
		t.Errorf("TokenID/EOS/PAD/BOS = %d %v %d %d %d", id, ok, tok.EOS(), tok.PAD(), tok.BOS())
	}
}

// TestLongWord encodes 1 MB inputs that are a single pre-tokenizer piece. The check is
// the round trip, not time; BenchmarkEncodeLongWord measures the time.
func TestLongWord(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB inputs; skipped with -short")
	}
	tok := loadQwen3(t)
	rng := rand.New(rand.NewPCG(3, 4))
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = 'a' + byte(rng.IntN(26))
	}
	for name, s := range map[string]string{
		"a":      strings.Repeat("a", 1<<20),
		"random": string(random),
		"punct":  strings.Repeat("!?", 1<<19),
		"han":    strings.Repeat("\u4e2d\u6587", 1<<20/6),
	} {
		ids := tok.Encode(s, false)
		if len(ids) >= len(s) || len(ids) == 0 {
			t.Errorf("%s: %d ids for %d bytes; BPE merged nothing", name, len(ids), len(s))
		}
		got, err := tok.Decode(ids)
		if err != nil || got != s {
			t.Errorf("%s: round trip failed (err %v)", name, err)
		}
	}
}

func TestInvalidUTF8RoundTrip(t *testing.T) {
	tok := loadQwen3(t)
	for _, s := range []string{"\xff", "a\xc3", "\xe2\x82 x", "ok\x80\x80<think>\xf0"} {
		b, err := tok.DecodeBytes(tok.Encode(s, true))
		if err != nil || string(b) != s {
			t.Errorf("%+q: DecodeBytes(Encode) = %+q, %v", s, b, err)
		}
	}
}

// TestConcurrentEncode runs Encode from several goroutines (the piece cache is shared);
// run with -race to check the locking.
func TestConcurrentEncode(t *testing.T) {
	tok := loadQwen3(t)
	cases := readQwen3Cases(t)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(cases); i += 2 {
				if firstDiff(tok.Encode(cases[i].Text, false), cases[i].IDs) >= 0 {
					errs <- cases[i].Text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode differs on %q", clip(s))
	}
}

func TestFromTokenizerJSONErrors(t *testing.T) {
	valid := `{"added_tokens":[],"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"Sequence","pretokenizers":[` +
		`{"type":"Split","pattern":{"Regex":` + jsonString(qwen2Regex) + `},"behavior":"Isolated","invert":false},` +
		`{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},` +
		`"model":{"type":"BPE","vocab":VOCAB,"merges":[]}}`
	var vocab strings.Builder
	vocab.WriteString("{")
	for b := 0; b < 256; b++ {
		if b > 0 {
			vocab.WriteString(",")
		}
		vocab.WriteString(jsonString(string(byteToRune[b])) + ":" + strconv.Itoa(b))
	}
	vocab.WriteString("}")
	good := strings.Replace(valid, "VOCAB", vocab.String(), 1)
	if _, err := FromTokenizerJSON([]byte(good), nil); err != nil {
		t.Fatalf("minimal valid tokenizer.json rejected: %v", err)
	}
	for _, tc := range []struct{ name, json, want string }{
		{"not json", "{", "not valid JSON"},
		{"wordpiece", strings.Replace(good, `"type":"BPE"`, `"type":"WordPiece"`, 1), "only BPE"},
		{"other regex", strings.Replace(good, `\\p{N}|`, `\\p{N}{1,3}|`, 1), "not Qwen2's"},
		{"no normalizer", strings.Replace(good, `{"type":"NFC"}`, `null`, 1), "NFC"},
		{"byte fallback", strings.Replace(good, `"merges":[]`, `"merges":[],"byte_fallback":true`, 1), "byte_fallback"},
		{"lstrip", strings.Replace(good, `"added_tokens":[]`, `"added_tokens":[{"id":300,"content":"<x>","lstrip":true}]`, 1), "lstrip"},
		{"clashing added", strings.Replace(good, `"added_tokens":[]`, `"added_tokens":[{"id":65,"content":"<x>"}]`, 1), "already belongs"},
		{"bad merges", strings.Replace(good, `"merges":[]`, `"merges":[1]`, 1), "merges"},
		{"merge unknown", strings.Replace(good, `"merges":[]`, `"merges":[["a","zz"]]`, 1), "not in the vocabulary"},
	} {
		_, err := FromTokenizerJSON([]byte(tc.json), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	_, err := FromTokenizerJSON([]byte(good), []byte(`{"eos_token":"<nope>"}`))
	if err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Errorf("unknown eos_token: error %v", err)
	}
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestModelPrompts checks the prompts of the tiny reference models (their oracle lists
// the ids Hugging Face tokenizers gave), which the engines' parity tests feed in.
func TestModelPrompts(t *testing.T) {
	tok := loadQwen3(t)
	for _, tc := range []struct {
		text string
		want []int32
	}{
		{"The quick brown fox jumps over the lazy dog, and then it runs away.",
			[]int32{785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 11, 323, 1221, 432, 8473, 3123, 13}},
		{"for i in range(10):\n    print(i * i)\n",
			[]int32{1958, 600, 304, 2088, 7, 16, 15, 982, 262, 1173, 1956, 353, 600, 340}},
	} {
		if diff := cmp.Diff(tc.want, tok.Encode(tc.text, true)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.text, diff)
		}
	}
}
