package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/strata-hip/strata/model/convert"
)

func init() {
	register(subcommand{
		name:  "synth",
		usage: "-o OUT.gguf [--arch qwen3moe|qwen3next --preset NAME] [--layers N] [--type q4_k|q8_0|...] [--ple-rows N] [--zipf S]: a Qwen3.8-Flash-Next-shaped model with random weights, for benchmarks",
		run:   runSynth,
	})
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	if moeSynth(args) { // --arch qwen3moe|qwen3next / --preset: cmd_synth_moe.go
		return runSynthMoE(args, stdout, stderr)
	}
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output GGUF path (required)")
	layers := fs.Int("layers", 0, "decoder layers (0: the config's, 48 for Flash-Next); one MTP block is added")
	typ := fs.String("type", "q4_k", "weight type of the matrices: f32, f16, bf16, q8_0, q2_0, q4_k, q6_k (rows a type cannot block fall back to q8_0; 1-D tensors, routers and conv stay f32)")
	pleRows := fs.Int64("ple-rows", 0, "approximate rows of the PLE n-gram table (0: the config's, 320,001,536 for Flash-Next)")
	zipf := fs.Float64("zipf", 1.0, "router skew: expert usage ∝ (rank+1)^-S at every layer (0: even)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	cfgPath := fs.String("config", "", "a qwen4_exp config.json to take the shapes from (default: the real Flash-Next text config)")
	tok := fs.String("tokenizer", "", "tokenizer.json to embed (optional; needed only for text generation)")
	split := fs.Float64("split-max-size", 0, "write shards of at most this many GB of tensor data (0: one file)")
	verbose := fs.Bool("v", false, "list every tensor as it is written")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: synth needs -o OUT.gguf and no positional arguments", errUsage)
	}
	qt, err := outputType(*typ)
	if err != nil {
		return err
	}
	if *layers < 0 || *pleRows < 0 || *zipf < 0 {
		return fmt.Errorf("%w: --layers, --ple-rows and --zipf must not be negative", errUsage)
	}
	opt := convert.SynthOptions{Layers: *layers, PLERows: *pleRows, Zipf: *zipf, Seed: *seed}
	if *cfgPath != "" {
		b, err := os.ReadFile(*cfgPath)
		if err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		opt.ConfigJSON = b
	}
	p, err := convert.Synth(opt)
	if err != nil {
		return err
	}
	if *tok != "" {
		if err := p.AddTokenizer(*tok); err != nil {
			return err
		}
	}
	return writePlan("synth", p, *out, qt, *typ, *split, *verbose, stdout, stderr)
}
