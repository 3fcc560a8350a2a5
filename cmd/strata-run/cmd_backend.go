package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/strata-hip/strata/model"
	mgpu "github.com/strata-hip/strata/model/gpu"
	"github.com/strata-hip/strata/runtime/gpu"
)

// backendFlags choose where generation runs: --backend cpu|gpu|auto, the GPU engine's VRAM
// budget, its expert profile, and --stats.
type backendFlags struct {
	backend  string
	vramMiB  int
	profile  string
	policy   string
	group    int
	device   string
	prefetch bool
	chunk    int
	misses   string // --expert-misses auto|copy|map
	ahead    bool   // --map-ahead
	promote  int
	land     bool // --map-land
	stats    bool // --stats (declared in cmd_generate.go)
}

// defaultChunk is --prefill-chunk's default: prompts take the GPU engine's batched path in
// chunks of 512 tokens (a 512-token 30B-A3B prompt on an H200: 3.5–3.7k tok/s there against
// ~130 token by token: 3704 and 130 in bench/results/2026-11-29-gpu-prefill, 3574 in
// 2026-11-29-final-s3 call 2; its scratch is in the VRAM plan, and a plan that does not fit
// names it).
const defaultChunk = 512

func addBackendFlags(fs *flag.FlagSet) *backendFlags {
	b := &backendFlags{}
	fs.StringVar(&b.backend, "backend", "auto", "cpu, gpu, or auto (the GPU engine for qwen3moe/qwen3next when a supported GPU and its kernels are present, else the CPU)")
	fs.IntVar(&b.vramMiB, "vram-budget-mib", 0, "GPU: use at most this much VRAM, as if the card had it (0: the device's free memory)")
	fs.StringVar(&b.profile, "expert-profile", "", "GPU: expert-use profile file: seeds the expert cache when it exists, rewritten at exit")
	fs.StringVar(&b.policy, "expert-policy", "decayed", "GPU: expert cache policy, decayed or lru")
	fs.IntVar(&b.group, "copy-group", mgpu.DefaultGroup, "GPU: expert copies per completion event")
	fs.StringVar(&b.device, "device", "", "GPU: which device (see list-devices)")
	fs.BoolVar(&b.prefetch, "expert-prefetch", false, "GPU: copy the experts the next layer's router predicts from the current hidden state, while this layer computes")
	fs.IntVar(&b.chunk, "prefill-chunk", defaultChunk, "GPU: run prompts through the batched path in chunks of this many tokens (qwen3moe, qwen3next; at most the context; 0: token by token)")
	fs.StringVar(&b.misses, "expert-misses", "auto", "GPU: how experts missing from VRAM are read: map (the kernels read them from mapped pinned host memory; hot ones are promoted in the background), copy (into a slot before the layer runs), or auto (map where the device can map host memory and every expert pins mapped, else copy, saying why)")
	fs.BoolVar(&b.ahead, "map-ahead", true, "GPU, --expert-misses map or auto: look-ahead: the next layer's router on this layer's state predicts its experts, and the predicted misses are copied into VRAM while this layer runs (--map-ahead=false: without it)")
	fs.IntVar(&b.promote, "map-promote", 0, "GPU, --expert-misses map or auto: copy at most this many missed experts into VRAM per token (0: every miss; no effect when auto copies)")
	fs.BoolVar(&b.land, "map-land", true, "GPU, with --map-ahead: the look-ahead copies predicted misses straight into reserved VRAM slots, committed to the expert cache after the token, and nothing else is copied into slots: each missed expert crosses the bus once (--map-land=false: the look-ahead's copies go to stage buffers, and missed experts are promoted by a second copy)")
	return b
}

// forwarder runs the model on the chosen backend.
type forwarder struct {
	name    string
	forward func([]int32) ([]float32, error)
	// argmax, when the backend has it, is forward for greedy decoding: the index of the
	// largest of the first n logits after the tokens (model.Sampler's greedy choice), made
	// where the logits are, without bringing them back.
	argmax func(tokens []int32, n int) (int32, error)
	pos    func() int
	close  func(stderr io.Writer) // prints --stats, writes the profile, releases the device; errors go to stderr
}

// openForward returns the CPU state's forward, or the GPU engine's when the flags ask for
// it (auto: when it can run; the reason it cannot is printed).
func openForward(b *backendFlags, src *model.GGUFSource, st *model.State, ctx int, stats bool, stderr io.Writer) (*forwarder, error) {
	b.stats = stats
	cpu := &forwarder{name: "cpu", forward: func(ids []int32) ([]float32, error) { return st.Forward(ids, false, nil) },
		pos: st.Pos, close: func(io.Writer) {}}
	switch b.backend {
	case "cpu":
		return cpu, nil
	case "gpu", "auto":
	default:
		return nil, fmt.Errorf("%w: --backend %q: want cpu, gpu or auto", errUsage, b.backend)
	}
	if b.vramMiB < 0 {
		return nil, fmt.Errorf("%w: --vram-budget-mib %d must not be negative", errUsage, b.vramMiB)
	}
	misses, err := mgpu.ParseMissMode(b.misses)
	if err != nil {
		return nil, fmt.Errorf("%w: --expert-misses %q: want auto, copy or map", errUsage, b.misses)
	}
	if b.promote < 0 {
		return nil, fmt.Errorf("%w: --map-promote %d must not be negative (0: every miss)", errUsage, b.promote)
	}
	if b.promote > 0 && misses == mgpu.MissCopy {
		return nil, fmt.Errorf("%w: --map-promote %d applies only with --expert-misses map or auto (it is %s)", errUsage, b.promote, b.misses)
	}
	if b.chunk < 0 {
		return nil, fmt.Errorf("%w: --prefill-chunk %d must not be negative (0 runs prompts token by token)", errUsage, b.chunk)
	}
	f, err := openGPU(b, misses, src, ctx, stderr)
	if err == nil {
		return f, nil
	}
	if b.backend == "gpu" {
		return nil, err
	}
	if !errors.Is(err, gpu.ErrNoDevice) && !errors.Is(err, gpu.ErrNoLibrary) {
		fmt.Fprintf(stderr, "backend auto: the GPU engine cannot run this: %v; using the CPU\n", err)
	}
	return cpu, nil
}

func openGPU(b *backendFlags, misses mgpu.MissMode, src *model.GGUFSource, ctx int, stderr io.Writer) (*forwarder, error) {
	if arch, _ := src.Meta().String("general.architecture"); arch != model.ArchQwen3MoE && arch != model.ArchQwen3Next {
		return nil, fmt.Errorf("%w: the GPU engine runs %s and %s models, %s is %s", mgpu.ErrMissingKernel, model.ArchQwen3MoE, model.ArchQwen3Next, src.Path(), arch)
	}
	dir := defaultCODir()
	dev, err := gpu.Open(gpu.Request{Device: b.device, Have: targetsWithCodeObjects(dir)})
	if err != nil {
		return nil, err
	}
	o := mgpu.Options{CODir: dir, Ctx: ctx, Budget: uint64(b.vramMiB) << 20, Policy: b.policy, Group: b.group, Prefetch: b.prefetch, Progress: stderr, Chunk: min(b.chunk, ctx), // a chunk longer than the context is the context
		Misses: misses, MapPromote: b.promote, NoMapAhead: !b.ahead, NoMapLand: !b.land}
	if b.profile != "" {
		if fh, err := os.Open(b.profile); err == nil {
			cfg, _ := model.ParseConfig(src.Meta(), src.Path())
			p, err := mgpu.ReadProfile(fh, b.profile, cfg.Layers, cfg.Experts)
			fh.Close()
			if err != nil {
				dev.Close()
				return nil, err
			}
			o.Profile = p
		}
	}
	eng, err := mgpu.Load(dev, src, o)
	if err != nil {
		dev.Close()
		return nil, err
	}
	fmt.Fprintf(stderr, "backend gpu: %s (%s)\n", dev.Info().Name, dev.Info().Arch)
	closed := false
	return &forwarder{name: "gpu", forward: eng.Forward, argmax: eng.ForwardArgmax, pos: eng.Pos, close: func(stderr io.Writer) {
		if closed {
			return
		}
		closed = true
		var errs []error
		if b.stats {
			s := eng.Stats()
			lookups := s.Hits + s.Misses
			fmt.Fprintf(stderr, "gpu: %d tokens, %.2f ms/token; expert cache %d slots, hit rate %.3f (%d/%d); copied %.2f MB/token in %d groups, %.1f GB/s while copying; prefetched %d (%d used)\n",
				s.Tokens, s.Wall.Seconds()*1e3/float64(max(1, s.Tokens)), eng.Plan().Slots, float64(s.Hits)/float64(max(1, lookups)), s.Hits, lookups,
				float64(s.CopiedBytes)/1e6/float64(max(1, s.Tokens)), s.Groups, float64(s.CopiedBytes)/1e6/max(s.CopyMs, 1e-9), s.Prefetched, s.PrefetchUsed)
			if path, why := eng.MissPath(); why != "" {
				fmt.Fprintf(stderr, "gpu: expert misses %s (auto: %s)\n", path, why)
			} else {
				fmt.Fprintf(stderr, "gpu: expert misses %s\n", path)
			}
			if s.AheadPredicted > 0 {
				fmt.Fprintf(stderr, "gpu: look-ahead: %.3f of the predicted experts used, %.1f copied/token (%.3f of them used), %.3f of the misses covered\n",
					float64(s.AheadRight)/float64(s.AheadPredicted), float64(s.AheadFetched)/float64(max(1, s.Tokens)),
					float64(s.AheadUseful)/float64(max(1, s.AheadFetched)), float64(s.AheadUseful)/float64(max(1, s.AheadMisses)))
			}
			fmt.Fprintf(stderr, "gpu: per token %.1f kernel launches outside graphs (%.2f ms submitting), %.1f stream syncs (%.2f ms waiting)\n",
				float64(s.Launches)/float64(max(1, s.Tokens)), s.LaunchTime.Seconds()*1e3/float64(max(1, s.Tokens)),
				float64(s.Syncs)/float64(max(1, s.Tokens)), s.SyncTime.Seconds()*1e3/float64(max(1, s.Tokens)))
			if s.Graphs > 0 || eng.GraphErr() != nil {
				fmt.Fprintf(stderr, "gpu: %d tokens as one graph launch each (%d captured variants, %.1f node updates/token, %.2f ms/token submitting); graph error: %v\n",
					s.Graphs, s.Captures, float64(s.GraphUpdates)/float64(max(1, s.Graphs)), s.GraphTime.Seconds()*1e3/float64(max(1, s.Graphs)), eng.GraphErr())
			}
		}
		if b.profile != "" {
			if p := eng.ExpertProfile(); p != nil {
				fh, err := os.Create(b.profile)
				if err == nil {
					_, err = p.WriteTo(fh)
					err = errors.Join(err, fh.Close())
				}
				errs = append(errs, err)
			}
		}
		errs = append(errs, eng.Close(), dev.Close())
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintln(stderr, "strata-run:", err)
		}
	}}, nil
}
