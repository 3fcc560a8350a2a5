package tokenizer

import (
	"os"
	"sync"
	"testing"
)

// The Qwen3 tokenizer and its reference cases; see testdata/LICENSE-NOTE.md.
const (
	qwen3TokenizerPath = "testdata/tokenizer.json.gz"
	qwen3ConfigPath    = "testdata/tokenizer_config.json"
	qwen3CasesPath     = "testdata/cases.jsonl"
)

var qwen3 = sync.OnceValues(func() (*Tokenizer, error) { return LoadTokenizerJSON(qwen3TokenizerPath) })

// loadQwen3 returns the shared Qwen3 tokenizer (loaded once per test binary).
func loadQwen3(tb testing.TB) *Tokenizer {
	tb.Helper()
	tok, err := qwen3()
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func readQwen3Cases(tb testing.TB) []Case {
	tb.Helper()
	f, err := os.Open(qwen3CasesPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	cases, err := ReadCases(f)
	if err != nil {
		tb.Fatal(err)
	}
	if len(cases) != 200 {
		tb.Fatalf("%s has %d cases, want 200", qwen3CasesPath, len(cases))
	}
	return cases
}
