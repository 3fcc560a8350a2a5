package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tokenizer"
)

func init() {
	register(subcommand{
		name:  "perplexity",
		usage: "-m MODEL.gguf --text FILE [-c CTX]: perplexity of the model on a text file",
		run:   runPerplexity,
	})
}

// runPerplexity splits the tokenized text into chunks of -c tokens, runs each chunk from
// an empty state, and scores every token after the first of its chunk:
// PPL = exp(mean over scored tokens of −log p(token | preceding tokens of the chunk)).
// (llama.cpp's perplexity scores only the second half of each chunk; with the same -c
// this scores more tokens, including some with little context, so values are higher.)
func runPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mp := fs.String("m", "", "model GGUF file")
	fs.StringVar(mp, "model", "", "same as -m")
	text := fs.String("text", "", "text file to score")
	fs.StringVar(text, "f", "", "same as --text")
	ctx := fs.Int("c", 512, "tokens per chunk")
	fs.IntVar(ctx, "ctx-size", 512, "same as -c")
	chunks := fs.Int("chunks", -1, "score at most this many chunks (-1: all)")
	threads := fs.Int("t", 0, "CPU threads (0: all cores)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mp == "" || *text == "" {
		return fmt.Errorf("%w: perplexity needs -m MODEL.gguf and --text FILE", errUsage)
	}
	raw, err := os.ReadFile(*text)
	if err != nil {
		return err
	}
	if *threads > 0 {
		model.SetThreads(*threads)
	}
	src, err := model.OpenGGUF(*mp)
	if err != nil {
		return err
	}
	defer src.Close()
	m, err := model.Load(src)
	if err != nil {
		return err
	}
	tok, err := tokenizer.FromGGUF(src.F)
	if err != nil {
		return fmt.Errorf("%s: %w", *mp, err)
	}
	if *ctx < 2 || *ctx > m.Cfg.CtxLen {
		return fmt.Errorf("%w: -c %d must be in [2, %s.context_length %d]", errUsage, *ctx, m.Cfg.Arch, m.Cfg.CtxLen)
	}
	ids := tok.Encode(string(raw), false)
	if len(ids) < 2 {
		return fmt.Errorf("%s encodes to %d tokens; perplexity needs at least 2", *text, len(ids))
	}
	fmt.Fprintf(stderr, "%s: %d tokens, chunks of %d\n", *text, len(ids), *ctx)
	var nll float64
	var scored int
	t0 := time.Now()
	const batch = 32 // positions per Forward: bounds the [batch][vocab] logits buffer
	for c := 0; c*(*ctx) < len(ids) && (*chunks < 0 || c < *chunks); c++ {
		chunk := ids[c*(*ctx) : min((c+1)*(*ctx), len(ids))]
		if len(chunk) < 2 {
			break
		}
		st, err := m.NewState(len(chunk))
		if err != nil {
			return err
		}
		var cnll float64
		for b := 0; b < len(chunk)-1; b += batch {
			e := min(b+batch, len(chunk)-1)
			logits, err := st.Forward(chunk[b:e], true, nil)
			if err != nil {
				return err
			}
			V := m.Vocab
			for i := 0; i < e-b; i++ {
				cnll += -logProb(logits[i*V:(i+1)*V], chunk[b+i+1])
			}
		}
		nll += cnll
		scored += len(chunk) - 1
		fmt.Fprintf(stdout, "[%d] %.4f\n", c+1, math.Exp(cnll/float64(len(chunk)-1)))
	}
	el := time.Since(t0)
	fmt.Fprintf(stdout, "perplexity: %.4f over %d tokens\n", math.Exp(nll/float64(scored)), scored)
	fmt.Fprintf(stderr, "%.1f tok/s, %d threads\n", float64(scored)/el.Seconds(), model.SetThreads(*threads))
	return nil
}

// logProb is log softmax(logits)[id], computed stably in float64.
func logProb(logits []float32, id int32) float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - mx)
	}
	return float64(logits[id]) - mx - math.Log(s)
}
