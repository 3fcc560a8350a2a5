package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/quant"
)

func init() {
	register(subcommand{
		name:  "convert",
		usage: "HF_DIR -o OUT.gguf [--type f32|f16|bf16|q8_0|q2_0|q4_k|q6_k]: Hugging Face qwen3moe/qwen3next checkpoint to GGUF",
		run:   runConvert,
	})
}

func runConvert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output GGUF path (required)")
	fs.StringVar(out, "outfile", "", "same as -o")
	typ := fs.String("type", "f16", "weight type of the matrices: f32, f16, bf16, q8_0, q2_0, q4_k, q6_k (rows a type cannot block fall back to q8_0; 1-D tensors, routers and conv stay f32)")
	fs.StringVar(typ, "outtype", "f16", "same as --type")
	tok := fs.String("tokenizer", "", "tokenizer.json to embed (default: HF_DIR/tokenizer.json)")
	verbose := fs.Bool("v", false, "list every tensor as it is written")
	split := fs.Float64("split-max-size", 0, "write llama.cpp-style shards OUT-0000k-of-0000N.gguf of at most this many GB of tensor data (0: one file)")
	// Allow the directory before the flags (`convert DIR -o OUT`).
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	if dir == "" || *out == "" {
		return fmt.Errorf("%w: convert needs a Hugging Face model directory and -o OUT.gguf", errUsage)
	}
	qt, err := outputType(*typ)
	if err != nil {
		return err
	}
	tokPath := *tok
	if tokPath == "" {
		if tokPath = convert.FindTokenizer(dir); tokPath == "" {
			return fmt.Errorf("convert: %s has no tokenizer.json; pass --tokenizer PATH (a GGUF needs its tokenizer for generation)", dir)
		}
	}
	p, err := convert.FromHF(dir)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.AddTokenizer(tokPath); err != nil {
		return err
	}
	return writePlan("convert", p, *out, qt, *typ, *split, *verbose, stdout, stderr)
}

// outputType is the weight type --type names (convert and synth take the same names).
func outputType(typ string) (quant.Type, error) {
	qt, ok := convert.OutputTypes[strings.ToLower(typ)]
	if !ok {
		return 0, fmt.Errorf("%w: --type %q is not one of f32, f16, bf16, q8_0, q2_0, q4_k, q6_k", errUsage, typ)
	}
	return qt, nil
}

// writePlan writes p as the GGUF out (or, with split > 0, as llama.cpp-style shards of at
// most split GB), through out+".part" so that a failed write leaves no partial out, then
// prints p's notes and a summary line; cmd names the subcommand in errors.
func writePlan(cmd string, p *convert.Plan, out string, qt quant.Type, typ string, split float64, verbose bool, stdout, stderr io.Writer) error {
	var progress io.Writer
	if verbose {
		progress = stderr
	}
	if split > 0 {
		return convertSplit(p, out, qt, split, progress, stdout, stderr)
	}
	tmp := out + ".part"
	if err := p.WriteGGUF(tmp, qt, progress); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	for _, n := range p.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	st, _ := os.Stat(out)
	fmt.Fprintf(stdout, "wrote %s: %s, %d tensors, %s, %.1f MB\n", out, p.Arch, len(p.Tensors), strings.ToUpper(typ), float64(st.Size())/1e6)
	return nil
}
