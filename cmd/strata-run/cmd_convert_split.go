package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/quant"
)

// convertSplit writes a plan as shards of at most maxGB of tensor data each. A tensor
// larger than that (qwen4exp's n-gram table, planned last) gets shards of its own, so it
// stays a separately mappable file.
func convertSplit(p *convert.Plan, out string, qt quant.Type, maxGB float64, progress, stdout, stderr io.Writer) error {
	if !strings.HasSuffix(out, ".gguf") {
		return fmt.Errorf("%w: with --split-max-size, -o must end in .gguf (its stem prefixes the shard names)", errUsage)
	}
	if maxGB < 0.001 {
		return fmt.Errorf("%w: --split-max-size %g GB is too small", errUsage, maxGB)
	}
	p.SplitMaxBytes = uint64(maxGB * 1e9)
	if err := p.WriteGGUF(out, qt, progress); err != nil {
		return err
	}
	for _, n := range p.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	fmt.Fprintf(stdout, "wrote %s shards: %s, %d tensors, %s\n", strings.TrimSuffix(out, ".gguf"), p.Arch, len(p.Tensors), qt)
	return nil
}
