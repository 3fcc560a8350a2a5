package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/model"
)

// strata-run inspect: what a GGUF file holds and what of it strata-run can run.
func init() {
	register(subcommand{
		name:  "inspect",
		usage: "[--arrays N] [--tensors=false] FILE.gguf  metadata, tensors, byte totals per type, and what strata-run supports",
		run:   runInspect,
	})
}

// What strata-run runs: the weight types with kernels (DESIGN.md "Weight types", plus the
// F32 norms and biases every model has) and the architectures the model package implements.
var (
	inspectSupportedTypes = []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q2_0, gguf.Q4_K,
		gguf.Q6_K, gguf.IQ2_XS, gguf.IQ3_XXS, gguf.IQ3_S, gguf.IQ1_M}
	inspectSupportedArchs = []string{model.ArchQwen3MoE, model.ArchQwen3Next, model.ArchQwen4Exp}
)

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arrays := fs.Int("arrays", 6, "show at most this many elements of each metadata array")
	tensors := fs.Bool("tensors", true, "print the tensor table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: strata-run inspect [--arrays N] [--tensors=false] FILE.gguf")
		fmt.Fprintln(stderr, "  A split model opens from any of its PREFIX-0000k-of-0000N.gguf files.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *arrays < 0 {
		return fmt.Errorf("%w: --arrays %d: give 0 or more elements to show", errUsage, *arrays)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: inspect needs exactly one FILE.gguf", errUsage)
	}
	f, err := gguf.Open(fs.Arg(0))
	if err != nil {
		return err // *gguf.Error: file, offset, rule and what to do
	}
	defer f.Close()
	return inspect(f, *arrays, *tensors, stdout)
}

func inspect(f *gguf.File, arrays int, showTensors bool, out io.Writer) error {
	var fileBytes int64
	for i := range f.Paths() {
		fileBytes += f.FileSize(i)
	}
	var params uint64
	type total struct {
		n     int
		bytes uint64
	}
	byType := map[gguf.Type]*total{}
	for _, t := range f.Tensors() {
		params += t.Elements()
		if byType[t.Type] == nil {
			byType[t.Type] = &total{}
		}
		byType[t.Type].n++
		byType[t.Type].bytes += t.Size
	}
	arch, archErr := f.Architecture()
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "file:\t%s\n", strings.Join(f.Paths(), ", "))
	fmt.Fprintf(w, "size:\t%s in %d file(s), GGUF v%d, alignment %d\n", human(uint64(fileBytes)), len(f.Paths()), f.Version(), f.Alignment())
	if archErr != nil {
		fmt.Fprintf(w, "architecture:\t(unknown: %v)\n", archErr)
	} else {
		fmt.Fprintf(w, "architecture:\t%q\n", arch)
	}
	fmt.Fprintf(w, "parameters:\t%s (%d)\n", humanCount(params), params)
	fmt.Fprintf(w, "tensors:\t%d\n", len(f.Tensors()))
	w.Flush()

	fmt.Fprintf(out, "\nmetadata (%d keys):\n", len(f.KVs()))
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, kv := range f.KVs() {
		typ := kv.Value.TypeName()
		if kv.Value.Type() == gguf.TypeArray {
			typ = fmt.Sprintf("%s[%d]", typ, kv.Value.Len())
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", kv.Key, typ, clip(kv.Value.Summary(arrays), 160))
	}
	w.Flush()

	if showTensors {
		fmt.Fprintf(out, "\ntensors:\n")
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		multi := len(f.Paths()) > 1
		fmt.Fprintf(w, "  #\tname\ttype\tshape\tbytes\toffset\t")
		if multi {
			fmt.Fprintf(w, "shard\t")
		}
		fmt.Fprintln(w)
		for i, t := range f.Tensors() {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%d\t%#x\t", i, t.Name, t.Type, shape(t.Dims), t.Size, t.FileOffset)
			if multi {
				fmt.Fprintf(w, "%d\t", t.Shard+1)
			}
			fmt.Fprintln(w)
		}
		w.Flush()
	}

	fmt.Fprintf(out, "\nbytes by type:\n")
	types := make([]gguf.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	// Largest first; equal totals by type number, so the listing does not depend on map order.
	sort.Slice(types, func(i, j int) bool {
		if bi, bj := byType[types[i]].bytes, byType[types[j]].bytes; bi != bj {
			return bi > bj
		}
		return types[i] < types[j]
	})
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, t := range types {
		mark := "supported"
		if !slices.Contains(inspectSupportedTypes, t) {
			mark = "NOT supported"
		}
		fmt.Fprintf(w, "  %s\t%d tensors\t%s\t(%d bytes)\t%s\n", t, byType[t].n, human(byType[t].bytes), byType[t].bytes, mark)
	}
	w.Flush()

	fmt.Fprintf(out, "\nstrata-run support:\n")
	switch {
	case archErr != nil:
		fmt.Fprintf(out, "  architecture: none declared (general.architecture missing or not a string): cannot run\n")
	case slices.Contains(inspectSupportedArchs, arch):
		fmt.Fprintf(out, "  architecture %q: supported\n", arch)
	default:
		fmt.Fprintf(out, "  architecture %q: NOT supported (supported: %s)\n", arch, strings.Join(inspectSupportedArchs, ", "))
	}
	if f.CheckSupportedTypes(inspectSupportedTypes) != nil {
		var bad []string
		for _, t := range types {
			if !slices.Contains(inspectSupportedTypes, t) {
				bad = append(bad, fmt.Sprintf("%s (%d tensors)", t, byType[t].n))
			}
		}
		fmt.Fprintf(out, "  tensor types: NOT all supported: %s\n", strings.Join(bad, ", "))
	} else {
		fmt.Fprintf(out, "  tensor types: all supported\n")
	}
	names := make([]string, len(inspectSupportedTypes))
	for i, t := range inspectSupportedTypes {
		names[i] = t.String()
	}
	fmt.Fprintf(out, "  (types strata-run runs: %s)\n", strings.Join(names, ", "))
	for _, warn := range f.Warnings() {
		fmt.Fprintf(out, "warning: %v\n", warn)
	}
	return nil
}

func shape(d []uint64) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// clip shortens s to at most n runes (it is already escaped, so cutting is safe to print).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func human(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
