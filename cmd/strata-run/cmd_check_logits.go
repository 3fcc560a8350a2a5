package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/strata-hip/strata/model/oracle"
)

func init() {
	register(subcommand{
		name:  "check-logits",
		usage: "--model DIR_OR_GGUF --oracle DIR [--type f32|q8_0|...]: compare the engine with a reference's stored outputs",
		run:   runCheckLogits,
	})
}

func runCheckLogits(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-logits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mp := fs.String("model", "", "a GGUF file, or a Hugging Face directory (converted to a temporary GGUF first)")
	fs.StringVar(mp, "m", "", "same as --model")
	od := fs.String("oracle", "", "directory with oracle.json and the reference's .npy outputs")
	typ := fs.String("type", "", "weight type for converting a directory (default f32)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mp == "" || *od == "" {
		return fmt.Errorf("%w: check-logits needs --model and --oracle", errUsage)
	}
	res, err := oracle.CheckPath(*mp, *od, *typ, stdout)
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return fmt.Errorf("check-logits: %d of %d checks failed", res.Failed, res.Failed+res.Passed)
	}
	return nil
}
