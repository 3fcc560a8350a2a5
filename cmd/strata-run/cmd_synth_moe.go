package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// runSynthMoE is `strata-run synth --arch qwen3moe|qwen3next ...` (or any synth call
// with --preset): a qwen3moe or qwen3next GGUF with random weights at an architecture shape, its router
// skewed so expert popularity follows Zipf(s) (see package model/gpu/synth). Without
// those flags synth writes qwen4exp models (cmd_synth.go).
func runSynthMoE(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for n := range synth.Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := fs.String("o", "", "output GGUF file")
	arch := fs.String("arch", "", "architecture: qwen3moe or qwen3next (default: the preset's)")
	preset := fs.String("preset", "", "shape to start from: "+strings.Join(names, ", ")+" (default: tiny, or tiny-next for --arch qwen3next)")
	typ := fs.String("type", "q8_0", "expert weight type (ggml name, any case: q8_0, q2_0, q4_K, q6_K, iq2_xs, iq3_xxs, iq3_s, f16, bf16)")
	dense := fs.String("dense-type", "q8_0", "attention, embedding and output-head type: q8_0, f16 or bf16")
	zipf := fs.Float64("zipf", 1, "Zipf exponent s of expert popularity")
	seed := fs.Uint64("seed", 1, "random seed")
	fields := []string{"layers", "embd", "heads", "heads-kv", "head-dim", "experts", "experts-used", "expert-ff", "vocab", "ctx"}
	vals := make([]int, len(fields))
	for i, n := range fields {
		fs.IntVar(&vals[i], n, 0, n+" (0: the preset's)")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: synth: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *out == "" {
		return fmt.Errorf("%w: synth: -o OUT.gguf is required", errUsage)
	}
	if *preset == "" {
		*preset = "tiny"
		if *arch == "qwen3next" {
			*preset = "tiny-next"
		}
	}
	sh, ok := synth.Presets[*preset]
	if ok && *arch != "" && *arch != sh.Arch {
		return fmt.Errorf("%w: synth: --preset %s is %s, not --arch %s", errUsage, *preset, sh.Arch, *arch)
	}
	if !ok {
		return fmt.Errorf("%w: synth: unknown --preset %q (have %s)", errUsage, *preset, strings.Join(names, ", "))
	}
	targets := []*int{&sh.Layers, &sh.Embd, &sh.Heads, &sh.HeadsKV, &sh.HeadDim, &sh.Experts, &sh.ExpertsUsed, &sh.ExpertFF, &sh.Vocab, &sh.CtxLen}
	for i, v := range vals {
		if v < 0 {
			return fmt.Errorf("%w: synth: --%s %d must not be negative", errUsage, fields[i], v)
		}
		if v > 0 {
			*targets[i] = v
		}
	}
	et, err := parseTypeFold(*typ)
	if err != nil {
		return fmt.Errorf("%w: synth: --type: %v", errUsage, err)
	}
	dt, err := parseTypeFold(*dense)
	if err != nil {
		return fmt.Errorf("%w: synth: --dense-type: %v", errUsage, err)
	}
	if !(*zipf > 0 && *zipf < 10) {
		return fmt.Errorf("%w: synth: --zipf %g must be in (0, 10)", errUsage, *zipf)
	}
	t0 := time.Now()
	if err := synth.Write(*out, sh, synth.Options{ExpertType: et, DenseType: dt, ZipfS: *zipf, Seed: *seed}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d layers, %d experts (top %d), hidden %d, expert width %d, experts %s, dense %s, Zipf s=%g, seed %d; %.2f GB in %.1fs\n",
		*out, sh.Arch, sh.Layers, sh.Experts, sh.ExpertsUsed, sh.Embd, sh.ExpertFF, et, dt, *zipf, *seed, float64(st.Size())/1e9, time.Since(t0).Seconds())
	return nil
}

// moeSynth reports whether a synth command line asks for the qwen3moe generator:
// --arch qwen3moe, or a --preset (only that generator has presets).
func moeSynth(args []string) bool {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		switch name {
		case "preset":
			return true
		case "arch":
			if !hasVal && i+1 < len(args) {
				val = args[i+1]
			}
			return val == "qwen3moe" || val == "qwen3next"
		}
	}
	return false
}

// parseTypeFold is quant.ParseType that also takes a ggml type name in another case
// ("q6_k" for "q6_K", as the synth without --arch and convert spell them); an unknown name
// gets ParseType's error, which lists the names.
func parseTypeFold(name string) (quant.Type, error) {
	t, err := quant.ParseType(name)
	if err == nil {
		return t, nil
	}
	for _, in := range quant.Types() {
		if strings.EqualFold(in.Name, name) {
			return in.Type, nil
		}
	}
	return 0, err
}
