package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tokenizer"
	"github.com/strata-hip/strata/models/demo"
)

// Generation is the default command: `strata-run -m MODEL.gguf -p "..."`, with
// llama.cpp's flag names so habits carry over.
func init() { defaultRun = runGenerate }

type genFlags struct {
	model, prompt, file, system    string
	n, ctx, topK, lastN, threads   int
	temp, topP, minP, repeat       float64
	seed                           int64
	chat, noThink, noDisplayPrompt bool
	draft                          int           // --draft: MTP speculative decoding (cmd_generate_draft.go)
	stats                          bool          // --stats: report the draft acceptance rate
	be                             *backendFlags // --backend, --vram-budget-mib, --expert-profile (cmd_backend.go)
}

func genFlagSet(stderr io.Writer) (*flag.FlagSet, *genFlags) {
	g := &genFlags{}
	fs := flag.NewFlagSet("strata-run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	str := func(p *string, def, usage string, names ...string) {
		for _, n := range names {
			fs.StringVar(p, n, def, usage)
		}
	}
	num := func(p *int, def int, usage string, names ...string) {
		for _, n := range names {
			fs.IntVar(p, n, def, usage)
		}
	}
	flt := func(p *float64, def float64, usage string, names ...string) {
		for _, n := range names {
			fs.Float64Var(p, n, def, usage)
		}
	}
	str(&g.model, "", "model GGUF file (default: the embedded demo model)", "m", "model")
	str(&g.prompt, "", "prompt text", "p", "prompt")
	str(&g.file, "", "read the prompt from this file", "f", "file")
	str(&g.system, "", "system message for --chat", "system", "sys", "system-prompt")
	num(&g.n, -1, "tokens to generate (-1: until end of sequence or the context is full)", "n", "n-predict")
	num(&g.ctx, 0, "context size in tokens (0: the model's, at most 4096)", "c", "ctx-size")
	num(&g.topK, 40, "top-k sampling (0: off)", "top-k")
	num(&g.lastN, 64, "tokens the repeat penalty looks back over (-1: all)", "repeat-last-n")
	num(&g.threads, 0, "CPU threads (0: all cores)", "t", "threads")
	flt(&g.temp, 0.8, "temperature (0: greedy)", "temp")
	flt(&g.topP, 0.95, "top-p sampling (1: off)", "top-p")
	flt(&g.minP, 0.05, "min-p sampling (0: off)", "min-p")
	flt(&g.repeat, 1.0, "repeat penalty (1: off)", "repeat-penalty")
	fs.Int64Var(&g.seed, "s", -1, "random seed (-1: random)")
	fs.Int64Var(&g.seed, "seed", -1, "random seed (-1: random)")
	fs.BoolVar(&g.chat, "chat", false, "wrap the prompt in the Qwen chat template")
	fs.BoolVar(&g.chat, "cnv", false, "same as --chat")
	fs.BoolVar(&g.noThink, "no-think", false, "with --chat: an empty think block (Qwen3 enable_thinking=false)")
	fs.BoolVar(&g.noDisplayPrompt, "no-display-prompt", false, "do not echo the prompt")
	num(&g.draft, 0, "speculative decoding: the MTP head drafts up to N tokens per step (qwen4exp; 0: off)", "draft")
	fs.BoolVar(&g.stats, "stats", false, "with --draft: print the draft acceptance rate; on the GPU: time per token, expert-cache hit rate, copy bandwidth")
	g.be = addBackendFlags(fs)
	return fs, g
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs, g := genFlagSet(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (a subcommand? see strata-run help)", errUsage, fs.Arg(0))
	}
	if g.file != "" {
		b, err := os.ReadFile(g.file)
		if err != nil {
			return err
		}
		g.prompt = string(b)
	}
	if g.prompt == "" {
		return fmt.Errorf("%w: no prompt: pass -p TEXT or -f FILE", errUsage)
	}
	if g.threads > 0 {
		model.SetThreads(g.threads)
	}
	src, err := openModel(g.model, stderr)
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
		return fmt.Errorf("%s: %w", g.model, err)
	}
	text := g.prompt
	if g.chat {
		var msgs []tokenizer.Message
		if g.system != "" {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: g.system})
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: g.prompt})
		if text, err = tokenizer.RenderQwen3Chat(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, DisableThinking: g.noThink}); err != nil {
			return err
		}
	} else if g.system != "" {
		return fmt.Errorf("%w: --system needs --chat", errUsage)
	}
	ids := tok.Encode(text, true)
	if len(ids) == 0 {
		return fmt.Errorf("the prompt encodes to no tokens")
	}
	ctx := g.ctx
	switch {
	case ctx <= 0:
		ctx = min(m.Cfg.CtxLen, 4096)
	case ctx > m.Cfg.CtxLen:
		return fmt.Errorf("%w: %s: -c/--ctx-size %d is longer than the model's %s.context_length %d", errUsage, src.Path(), ctx, m.Cfg.Arch, m.Cfg.CtxLen)
	}
	if len(ids) >= ctx {
		return fmt.Errorf("the prompt has %d tokens, the context only %d; raise -c/--ctx-size (the model allows %d)", len(ids), ctx, m.Cfg.CtxLen)
	}
	st, err := m.NewState(ctx)
	if err != nil {
		return err
	}
	seed := uint64(g.seed)
	if g.seed < 0 {
		seed = rand.Uint64()
	}
	samp := model.NewSampler(model.SamplerConfig{Temp: g.temp, TopK: g.topK, TopP: g.topP, MinP: g.minP,
		RepeatPenalty: g.repeat, RepeatLastN: g.lastN, Seed: seed})
	for _, id := range ids {
		samp.Accept(id)
	}
	stop := map[int32]bool{}
	if e := tok.EOS(); e >= 0 {
		stop[e] = true
	}
	for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(s); ok {
			stop[id] = true
		}
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if !g.noDisplayPrompt {
		fmt.Fprint(out, text)
		out.Flush()
	}

	if g.draft > 0 {
		return generateDraft(g, st, ids, samp, tok, stop, out, ctx, stderr)
	}
	fwd, err := openForward(g.be, src, st, ctx, g.stats, stderr)
	if err != nil {
		return err
	}
	defer fwd.close(stderr)
	mask := unusedMask(tok)
	// next is the token after in: sampled from the logits, or — greedy without a repeat
	// penalty, on a backend that can — the argmax the backend computes where the logits
	// are, over the ids before the vocabulary's unused tail (the same choice: mask sets
	// exactly that tail to −Inf).
	greedyN := 0
	if fwd.argmax != nil && g.temp <= 0 && (g.repeat == 1 || g.lastN == 0) {
		greedyN = usedPrefix(tok, m.Vocab)
	}
	next := func(in []int32) (int32, error) {
		if greedyN > 0 {
			return fwd.argmax(in, greedyN)
		}
		logits, err := fwd.forward(in)
		if err != nil {
			return 0, err
		}
		mask(logits)
		return samp.Sample(logits), nil
	}
	t0 := time.Now()
	id, err := next(ids)
	if err != nil {
		return err
	}
	prefill := time.Since(t0)
	dec := tok.NewDecoder()
	dec.SkipControl = true
	t1 := time.Now()
	n := 0
	for g.n < 0 || n < g.n {
		samp.Accept(id)
		n++
		if stop[id] {
			break
		}
		s, err := dec.Next(id)
		if err != nil {
			return err
		}
		fmt.Fprint(out, s)
		out.Flush()
		if fwd.pos() >= ctx {
			fmt.Fprintf(stderr, "\n[context of %d tokens is full]\n", ctx)
			break
		}
		if id, err = next([]int32{id}); err != nil {
			return err
		}
	}
	fmt.Fprint(out, dec.Flush())
	fmt.Fprintln(out)
	out.Flush()
	gen := time.Since(t1)
	fmt.Fprintf(stderr, "prompt: %d tokens in %.2fs (%.1f tok/s); generation: %d tokens in %.2fs (%.1f tok/s); %d threads, seed %d\n",
		len(ids), prefill.Seconds(), float64(len(ids))/prefill.Seconds(), n, gen.Seconds(), float64(n)/max(gen.Seconds(), 1e-9), model.SetThreads(g.threads), seed)
	return nil
}

// unusedMask returns a function that sets to −Inf the logits of ids the tokenizer types
// unused: padding rows inside a padded vocabulary ("[PAD151669]" in a GGUF padded to the
// embedding's 151,936 rows) and ids past the vocabulary. Such ids decode to nothing, so
// they are never sampled or drafted. The id list is computed once per logit length.
func unusedMask(tok *tokenizer.Tokenizer) func([]float32) {
	var ids []int32
	n := -1
	return func(l []float32) {
		if len(l) != n {
			n, ids = len(l), ids[:0]
			for id := range int32(n) {
				if tok.Type(id) == tokenizer.TypeUnused {
					ids = append(ids, id)
				}
			}
		}
		for _, id := range ids {
			l[id] = float32(math.Inf(-1))
		}
	}
}

// usedPrefix is the number of ids before the vocabulary's unused tail when every id the
// tokenizer types unused (see unusedMask) lies in that tail, else 0 (no such prefix).
func usedPrefix(tok *tokenizer.Tokenizer, vocab int) int {
	u := vocab
	for u > 0 && tok.Type(int32(u-1)) == tokenizer.TypeUnused {
		u--
	}
	for id := range int32(u) {
		if tok.Type(id) == tokenizer.TypeUnused {
			return 0
		}
	}
	return u
}

// openModel maps a GGUF file, or with no path the embedded demo model.
func openModel(path string, stderr io.Writer) (*model.GGUFSource, error) {
	if path != "" {
		return model.OpenGGUF(path)
	}
	if !demo.Embedded {
		return nil, fmt.Errorf("no -m given, and this strata-run was built with the tag strata_nodemo (no embedded demo model): pass -m <model.gguf>, or rebuild without that tag")
	}
	name, data := demo.Default()
	f, err := gguf.ParseBytes(name, data)
	if err != nil {
		return nil, fmt.Errorf("embedded demo model: %w", err)
	}
	src, err := model.NewGGUFSource(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedded demo model: %w", err)
	}
	fmt.Fprintf(stderr, "no -m given: using the embedded demo model %s\n", name)
	return src, nil
}
