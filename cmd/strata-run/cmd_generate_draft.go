package main

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tokenizer"
)

// generateDraft is generation with --draft N: the model's MTP head drafts up to N tokens,
// the main model verifies them in one pass (model.Speculator). Greedy output is identical
// to generation without drafting; sampled output follows the same distribution.
func generateDraft(g *genFlags, st *model.State, ids []int32, samp *model.Sampler, tok *tokenizer.Tokenizer,
	stop map[int32]bool, out *bufio.Writer, ctx int, stderr io.Writer) error {
	// Unused ids (padding rows, ids past the vocabulary) are never drawn or drafted.
	mask := unusedMask(tok)
	t0 := time.Now()
	sp, err := st.NewSpeculator(ids, g.draft, samp, mask)
	if err != nil {
		return fmt.Errorf("--draft: %w", err)
	}
	prefill := time.Since(t0)
	dec := tok.NewDecoder()
	dec.SkipControl = true
	t1 := time.Now()
	n := 0
loop:
	for g.n < 0 || n < g.n {
		toks, err := sp.Next()
		if err != nil {
			return err
		}
		for _, id := range toks {
			samp.Accept(id)
			n++
			if stop[id] {
				break loop
			}
			s, err := dec.Next(id)
			if err != nil {
				return err
			}
			fmt.Fprint(out, s)
			if g.n >= 0 && n >= g.n {
				break loop
			}
		}
		out.Flush()
		if st.Pos() >= ctx {
			fmt.Fprintf(stderr, "\n[context of %d tokens is full]\n", ctx)
			break
		}
	}
	fmt.Fprint(out, dec.Flush())
	fmt.Fprintln(out)
	out.Flush()
	gen := time.Since(t1)
	fmt.Fprintf(stderr, "prompt: %d tokens in %.2fs (%.1f tok/s); generation: %d tokens in %.2fs (%.1f tok/s); draft %d, %d threads\n",
		len(ids), prefill.Seconds(), float64(len(ids))/prefill.Seconds(), n, gen.Seconds(), float64(n)/max(gen.Seconds(), 1e-9), g.draft, model.SetThreads(g.threads))
	if g.stats {
		s := sp.Stats
		fmt.Fprintf(stderr, "draft: %d verification passes, %d tokens drafted, %d accepted (acceptance rate %.1f%%), %.2f tokens per pass\n",
			s.Steps, s.Drafted, s.Accepted, 100*s.AcceptRate(), float64(n)/float64(max(s.Steps, 1)))
	}
	return nil
}
