package gpu

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// TestDecodeProfile (STRATA_DECODE_PROFILE=1, STRATA_BENCH_MODEL=path.gguf,
// STRATA_CO_DIR): on a real GPU, one engine with every expert resident (ctx
// STRATA_BENCH_CTX, default 1024) decodes greedily (ForwardArgmax, graphs: the engine's
// defaults) in each mode of STRATA_DECODE_MODES (comma-separated, in order; default
// "base"; "none": no timed run): Reset, an 8-token prompt, STRATA_BENCH_TOKENS (default 128) tokens timed one
// by one by the caller, one ROW line per mode as TestPrepBench prints it. Then, for each
// mode of STRATA_PROFILE_MODES (default none): Reset, the prompt, 4 tokens (the graphs
// captured and replayed), then STRATA_PROFILE_TOKENS (default 2) tokens inside a
// profiler range (Device.ProfileRange: with `ncu --profile-from-start off` only those
// tokens' kernels, graph nodes included, are profiled), each line "PROFILED mode
// launches" saying what the range held. Modes: "base" and "pdl" are the engine's default
// path, "nopdl" the same without programmatic dependent launch (Engine.SetPDL), "attnold"
// the default path with attention_decode's split policy before (AttnSplitOld), "oldnorm"
// the default with rmsnorm_row's previous Q8_1 step and the one-block argmax, "oldrow" and
// "oldargmax" with only one of them (Engine.SetOldNorm), "mmvqold" the default with mmvq's
// default path for every shape (Engine.SetMmvqOld), "mmvqoldnopdl" that without programmatic
// launch, "shoff" the default with qwen3next's shared expert on the one chain and "shplain"
// with it a branch of full dependencies (Engine.SetSharedBranch), "attnoff"
// with qwen3next's attention inputs one after the other (Engine.SetAttnBranch), "s8" with
// both (session 8's decode path), "gdnqoff" the default with the decode delta-net's output
// through recurrent and quantize_q8_1 (Engine.SetGdnQ81), "s9" with every change of
// session 10 off (session 9's decode path). Each timed
// mode also replays its last token's graph 100 times back to back between two events (the
// device ms of a token without the host's share), and every timed mode but attnold (other
// rounding) must produce the same greedy tokens as the first and the same last logits, bit
// for bit. STRATA_DECODE_KT_MODES (comma-separated) adds, per mode after the timed ones, a
// table of device µs per token by kernel over STRATA_DECODE_KT_TOKENS (default 8) tokens
// with events around each launch (graphs off), as TestPrepBench prints it.
func TestDecodeProfile(t *testing.T) {
	if os.Getenv("STRATA_DECODE_PROFILE") != "1" {
		t.Skip("set STRATA_DECODE_PROFILE=1, STRATA_BENCH_MODEL and STRATA_CO_DIR")
	}
	dev, src, dir := benchDevice(t)
	modes := splitModes(cmp.Or(os.Getenv("STRATA_DECODE_MODES"), "base"))
	prof := splitModes(os.Getenv("STRATA_PROFILE_MODES"))
	d2d := 0.0
	if len(modes) > 0 {
		d2d = d2dCeiling(t, dev)
	}
	decodeProfile(t, dev, src, Options{CODir: dir, Ctx: benchEnv("STRATA_BENCH_CTX", 1024)}, d2d, modes, prof,
		benchEnv("STRATA_BENCH_TOKENS", 128), benchEnv("STRATA_PROFILE_TOKENS", 2), filepath.Base(os.Getenv("STRATA_BENCH_MODEL")))
}

// splitModes splits a comma-separated list of modes; "none" is the empty list.
func splitModes(s string) []string {
	if s == "none" {
		return nil
	}
	var out []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// TestDecodeProfileFake runs TestDecodeProfile's sequence on the fake device (the
// emulator's kernels, tiny models) and checks that the profiler range holds exactly the
// profiled tokens' kernels: one graph launch per token, as many nodes as a token has.
func TestDecodeProfileFake(t *testing.T) {
	fakeUnits = 132 // mmvq's decode geometries, against mmvqold's default path
	t.Cleanup(func() { fakeUnits = 0 })
	for _, preset := range []string{"tiny", "tiny-next"} {
		dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
		fake.emu = newEmu()
		o := Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20}
		decodeProfile(t, dev, presetSource(t, preset, quant.Q4_K), o, 1, []string{"nopdl", "pdl", "attnold", "oldnorm", "oldrow", "oldargmax", "mmvqold", "mmvqoldnopdl", "shoff", "shplain", "attnoff", "s8", "gdnqoff", "s9"}, []string{"base"}, 4, 2, preset)
		if fake.emu.err != nil {
			t.Fatal(fake.emu.err)
		}
		if fake.profiling {
			t.Fatalf("%s: the profiler range was left open", preset)
		}
		if fake.profiledGraphs != 2 || fake.profiledLaunches != 0 {
			t.Fatalf("%s: the profiler range held %d graph launches and %d plain launches, want 2 and 0",
				preset, fake.profiledGraphs, fake.profiledLaunches)
		}
	}
}

// setDecodeMode sets the engine's decode path for a mode name of TestDecodeProfile.
func setDecodeMode(t *testing.T, eng *Engine, mode string) {
	eng.SetMmvqOld(mode == "mmvqold" || mode == "mmvqoldnopdl")
	eng.SetGdnQ81(mode != "gdnqoff" && mode != "s9" && mode != "s8")
	eng.SetAttnBranch(BranchDep)
	if mode == "attnoff" || mode == "s8" {
		eng.SetAttnBranch(BranchOff)
	}
	switch mode {
	case "shoff", "s8":
		eng.SetSharedBranch(BranchOff)
	case "shplain":
		eng.SetSharedBranch(BranchPlain)
	default:
		eng.SetSharedBranch(BranchDep)
	}
	switch mode {
	case "base", "pdl", "mmvqold", "shoff", "shplain", "attnoff", "s8", "gdnqoff", "s9": // the engine's defaults (mmvqold: but SetMmvqOld, above; shoff, shplain: but SetSharedBranch; attnoff: SetAttnBranch; s8: both old; gdnqoff, s9: SetGdnQ81)
		eng.SetPDL(true)
		eng.SetAttnSplit(0)
		eng.SetOldNorm(false, false)
	case "nopdl", "mmvqoldnopdl":
		eng.SetPDL(false)
		eng.SetAttnSplit(0)
		eng.SetOldNorm(false, false)
	case "attnold": // the defaults with attention_decode's split policy before 2026-11-30
		eng.SetPDL(true)
		eng.SetAttnSplit(AttnSplitOld)
		eng.SetOldNorm(false, false)
	case "oldnorm", "oldrow", "oldargmax": // the defaults with rmsnorm_row's wave Q8_1 step and/or the one-block argmax
		eng.SetPDL(true)
		eng.SetAttnSplit(0)
		eng.SetOldNorm(mode != "oldargmax", mode != "oldrow")
	default:
		t.Fatalf("decode mode %q: want base, pdl, nopdl, attnold, oldnorm, oldrow, oldargmax, mmvqold, mmvqoldnopdl, shoff, shplain, attnoff, s8, gdnqoff or s9", mode)
	}
}

// replayGraph launches the engine's last token graph n times back to back between two
// events on the compute stream and returns the device ms per replay: the token's device
// time without the host's share (it rewrites the same position's cache row and outputs).
func replayGraph(eng *Engine, n int) (float64, error) {
	if eng.gLast == nil {
		return 0, fmt.Errorf("no graph replayed")
	}
	e0, err := eng.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e0.Destroy()
	e1, err := eng.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e1.Destroy()
	if err := eng.ln.Begin(); err != nil {
		return 0, err
	}
	defer eng.ln.End()
	if err := e0.Record(eng.compute); err != nil {
		return 0, err
	}
	for i := 0; i < n; i++ {
		if err := eng.gLast.g.Launch(); err != nil {
			return 0, err
		}
	}
	if err := e1.Record(eng.compute); err != nil {
		return 0, err
	}
	if err := e1.Sync(); err != nil {
		return 0, err
	}
	d, err := rt.Elapsed(e0, e1)
	return d.Seconds() * 1e3 / float64(n), err
}

// decodeProfile is TestDecodeProfile after the device, the model and the d2d ceiling.
func decodeProfile(t *testing.T, dev *rt.Device, src model.Source, o Options, d2d float64, modes, prof []string, tokens, profTokens int, name string) {
	t0 := time.Now()
	eng, weights, bound := loadResident(t, dev, src, o, d2d)
	defer eng.Close()
	fmt.Printf("model %s on %s: loaded in %.1f s; d2d %.0f GB/s (read + written, this run); weights read per token %.1f MB; bound %.3f ms/token\n",
		name, dev.Info().Name, time.Since(t0).Seconds(), d2d, weights/1e6, bound)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	start := func(mode string) int32 { // the prompt's greedy token, stats reset after it
		setDecodeMode(t, eng, mode)
		return promptArgmax(t, eng, prompt)
	}
	if len(modes) > 0 {
		fmt.Println("| mode | mean ms/token | median ms/token | tok/s (mean) | host launches/token | node updates/token | graphs/token | programmatic launches/capture | graph replay ms (device) | bound ms | bound/achieved |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	}
	var firstIDs []int32
	var firstLogits []float32
	var firstMode string
	for _, mode := range modes {
		id := start(mode)
		mean, median, ids := timeDecode(t, eng, id, tokens)
		// Every mode but attnold computes the same bits: their greedy tokens must be the
		// same. attnold sums attention over other split lengths, so its logits differ in
		// rounding (within attention_decode's parity bound), and a synthetic model's random
		// weights leave near-ties that such differences flip (final-s6: its tokens parted from
		// base's at the third): it is compared with nothing.
		// Those modes' last logits must be the same bits too.
		ll, err := eng.LastLogits()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case mode == "attnold":
		case firstIDs == nil:
			firstIDs, firstMode, firstLogits = ids, mode, slices.Clone(ll)
		case !slices.Equal(ids, firstIDs):
			t.Errorf("%s: greedy tokens differ from %s's: %v against %v", mode, firstMode, ids, firstIDs)
		default:
			for i := range ll {
				if math.Float32bits(ll[i]) != math.Float32bits(firstLogits[i]) {
					t.Errorf("%s: last token's logit %d is %v, %s's %v: not bitwise equal", mode, i, ll[i], firstMode, firstLogits[i])
					break
				}
			}
		}
		s := eng.Stats()
		tk := float64(s.Tokens)
		gms, err := replayGraph(eng, 100)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ROW | %s | %.3f | %.3f | %.1f | %.1f | %.1f | %.2f | %.1f | %.3f | %.3f | %.3f |\n", mode, mean, median, 1e3/mean,
			float64(s.Launches)/tk, float64(s.GraphUpdates)/tk, float64(s.Graphs)/tk, float64(s.DepLaunches)/float64(max(1, s.Captures)),
			gms, bound, bound/mean)
		if err := eng.GraphErr(); err != nil {
			t.Fatalf("%s: graphs stopped: %v", mode, err)
		}
	}
	// STRATA_DECODE_KT_MODES: per mode, a table of device µs per token by kernel (events
	// around each launch, graphs off) over STRATA_DECODE_KT_TOKENS (default 8) tokens.
	for _, mode := range splitModes(os.Getenv("STRATA_DECODE_KT_MODES")) {
		setDecodeMode(t, eng, mode)
		kernelTimes(t, eng, prompt, mode, benchEnv("STRATA_DECODE_KT_TOKENS", 8))
	}
	for _, mode := range prof {
		id := start(mode)
		var err error
		for i := 0; i < 4; i++ {
			if id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab()); err != nil {
				t.Fatal(err)
			}
		}
		if err := eng.sync(); err != nil {
			t.Fatal(err)
		}
		eng.ResetStats()
		if err := dev.ProfileRange(true); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < profTokens && err == nil; i++ {
			id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab())
		}
		if err == nil {
			err = eng.sync()
		}
		if e := dev.ProfileRange(false); err == nil {
			err = e
		}
		if err != nil {
			t.Fatal(err)
		}
		s := eng.Stats()
		fmt.Printf("PROFILED %s: %d tokens, %d host launches, %d graph launches, %d node updates\n",
			mode, s.Tokens, s.Launches, s.Graphs, s.GraphUpdates)
		if err := eng.GraphErr(); err != nil {
			t.Fatalf("%s: graphs stopped: %v", mode, err)
		}
	}
}
