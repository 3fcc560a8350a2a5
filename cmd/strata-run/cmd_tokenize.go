package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/strata-hip/strata/model/tokenizer"
)

// strata-run tokenize: encode text, decode ids, or check a tokenizer against a reference
// case file (JSON lines with text, ids, ids_with_special_parsing, decoded, ...).
func init() {
	register(subcommand{
		name:  "tokenize",
		usage: "--tokenizer PATH [--cases FILE.jsonl | --decode \"ID ...\" | TEXT ...]  encode/decode text or check reference cases",
		run:   runTokenize,
	})
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("tokenizer", "", "the tokenizer: a .gguf model, or a tokenizer.json or tokenizer.json.gz (a tokenizer_config.json beside it is read too) at `PATH`")
	cases := fs.String("cases", "", "check every case of the JSON-lines `FILE` and print \"N passed, M failed\" with the first differences")
	special := fs.Bool("special", true, "parse control tokens such as <|im_start|> written in TEXT")
	decode := fs.String("decode", "", "decode these token `IDS` (separated by spaces or commas) instead of encoding")
	show := fs.Int("show", 5, "with --cases: how many failing cases to describe")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: strata-run tokenize --tokenizer PATH [--cases FILE.jsonl | --decode \"ID ...\" | TEXT ...]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	modes := 0
	for _, on := range []bool{*cases != "", *decode != "", fs.NArg() > 0} {
		if on {
			modes++
		}
	}
	if *path == "" || modes != 1 {
		fs.Usage()
		return fmt.Errorf("%w: tokenize needs --tokenizer and exactly one of --cases, --decode or TEXT", errUsage)
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return err
	}
	switch {
	case *cases != "":
		return checkCases(tok, *cases, *show, stdout)
	case *decode != "":
		ids, err := parseIDs(*decode)
		if err != nil {
			return err
		}
		text, err := tok.Decode(ids)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, text)
		return nil
	}
	for _, text := range fs.Args() {
		b, _ := json.Marshal(tok.Encode(text, *special))
		fmt.Fprintln(stdout, string(b))
	}
	return nil
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '[' || r == ']' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: --decode: %q is not a token id", errUsage, f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

func checkCases(tok *tokenizer.Tokenizer, path string, show int, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cs, err := tokenizer.ReadCases(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(cs) == 0 {
		return fmt.Errorf("%s: no cases", path)
	}
	failed := 0
	for _, c := range cs {
		ms := tok.CheckCase(c)
		if len(ms) == 0 {
			continue
		}
		failed++
		if failed > show {
			continue
		}
		text := c.Text
		if len(text) > 80 {
			text = text[:80] + "..."
		}
		fmt.Fprintf(stdout, "FAIL line %d (%s) %q\n", c.Line, c.Category, text)
		for _, m := range ms {
			fmt.Fprintf(stdout, "  %s differs at index %d\n    got:  %s\n    want: %s\n", m.Field, m.At, m.Got, m.Want)
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(cs)-failed, failed)
	if failed > 0 {
		return errors.New("tokenize: some cases failed")
	}
	return nil
}
