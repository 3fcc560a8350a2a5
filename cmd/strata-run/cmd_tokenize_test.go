package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tokTestdata = "../../model/tokenizer/testdata/"

func TestTokenizeCases(t *testing.T) {
	var out bytes.Buffer
	err := runTokenize([]string{"--tokenizer", tokTestdata + "tokenizer.json.gz", "--cases", tokTestdata + "cases.jsonl"}, &out, &out)
	if err != nil || !strings.HasSuffix(out.String(), "200 passed, 0 failed\n") {
		t.Fatalf("err %v, output:\n%s", err, out.String())
	}

	// A case file with one wrong id: reported, counted, and the command fails.
	src, err := os.ReadFile(tokTestdata + "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(src, []byte("\n"))
	bad := bytes.Replace(first, []byte(`"ids": [9707, 11,`), []byte(`"ids": [9707, 12,`), 1)
	if bytes.Equal(bad, first) {
		t.Fatalf("first case is not the expected one: %s", first)
	}
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, append(append(bad, '\n'), first...), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = runTokenize([]string{"--tokenizer", tokTestdata + "tokenizer.json.gz", "--cases", path}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "1 passed, 1 failed") || !strings.Contains(out.String(), "ids differs at index 1") {
		t.Fatalf("err %v, output:\n%s", err, out.String())
	}
}

func TestTokenizeTextAndDecode(t *testing.T) {
	var out bytes.Buffer
	if err := runTokenize([]string{"--tokenizer", tokTestdata + "tokenizer.json.gz", "Hello, world!", "<|im_end|>"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "[9707,11,1879,0]\n[151645]\n" {
		t.Errorf("output %q", out.String())
	}
	out.Reset()
	if err := runTokenize([]string{"--tokenizer", tokTestdata + "tokenizer.json.gz", "--decode", "9707, 11, 1879, 0"}, &out, &out); err != nil || out.String() != "Hello, world!\n" {
		t.Errorf("decode: %v, %q", err, out.String())
	}
}

func TestTokenizeUsage(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{"text"}, {"--tokenizer", "x"}, {"--tokenizer", "x", "--cases", "c", "text"}} {
		if err := runTokenize(args, &out, &out); !errors.Is(err, errUsage) {
			t.Errorf("%q: error %v, want a usage error", args, err)
		}
	}
	if err := runTokenize([]string{"--tokenizer", "/nonexistent/tokenizer.json", "x"}, &out, &out); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}
