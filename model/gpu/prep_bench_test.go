package gpu

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	_ "github.com/strata-hip/strata/runtime/cuda" // the backends TestPrepBench opens a device through
	rt "github.com/strata-hip/strata/runtime/gpu"
	_ "github.com/strata-hip/strata/runtime/hip"
)

// TestPrepBench (STRATA_PREP_BENCH=1, STRATA_BENCH_MODEL=path.gguf, STRATA_CO_DIR): on
// a real GPU, one engine with every expert resident (unlimited budget, ctx
// STRATA_BENCH_CTX, default 1024) decodes greedily (ForwardArgmax, graphs with the ahead
// walk: the engine's default) in the paths of STRATA_PREP_MODES (comma-separated, in
// order; "old": Options.NoAttnPrep, the separate norm, rope, store and quantize_q8_1
// launches; "new": attention_decode's prep and reduceq): each mode Reset, an 8-token
// prompt, STRATA_BENCH_TOKENS (default 128) tokens timed one by one by the caller. A ROW
// line per mode: mean and median ms/token, tok/s, host launches per token (those made
// outside a graph: Stats.Launches counts no captured or replayed launch, so 0 when every
// token replays one), node updates per token, graph launches per token, against the bound
// (the dense weights and the k experts of every layer read once at the device-to-device
// copy rate measured first, as TestGPUBench in cmd/strata-run computes it). Then, per
// path, STRATA_BENCH_KT_TOKENS (default 16) tokens with events around each launch (graphs
// off), a table of device µs per token by kernel, headed by the launches per token.
func TestPrepBench(t *testing.T) {
	if os.Getenv("STRATA_PREP_BENCH") != "1" {
		t.Skip("set STRATA_PREP_BENCH=1, STRATA_BENCH_MODEL and STRATA_CO_DIR")
	}
	dev, src, dir := benchDevice(t)
	d2d := d2dCeiling(t, dev)
	modes := strings.Split(cmp.Or(os.Getenv("STRATA_PREP_MODES"), "old,new,old,new"), ",")
	prepBench(t, dev, src, Options{CODir: dir, Ctx: benchEnv("STRATA_BENCH_CTX", 1024)}, d2d, modes,
		benchEnv("STRATA_BENCH_TOKENS", 128), benchEnv("STRATA_BENCH_KT_TOKENS", 16), filepath.Base(os.Getenv("STRATA_BENCH_MODEL")))
}

// TestPrepBenchFake runs TestPrepBench's sequence on the fake device (the emulator's
// kernels, tiny models), so that a device call does not find its mistakes.
func TestPrepBenchFake(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
		fake.emu = newEmu()
		o := Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20}
		prepBench(t, dev, presetSource(t, preset, quant.Q4_K), o, 1, []string{"old", "new"}, 4, 2, preset)
		if fake.emu.err != nil {
			t.Fatal(fake.emu.err)
		}
	}
}

// prepBench is TestPrepBench after the device, the model and the d2d ceiling (GB/s).
func prepBench(t *testing.T, dev *rt.Device, src model.Source, o Options, d2d float64, modes []string, tokens, ktTokens int, name string) {
	t0 := time.Now()
	eng, _, bound := loadResident(t, dev, src, o, d2d)
	defer eng.Close()
	fmt.Printf("model %s on %s: loaded in %.1f s; d2d %.0f GB/s (read + written, this run); bound %.3f ms/token\n",
		name, dev.Info().Name, time.Since(t0).Seconds(), d2d, bound)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	setPath := func(mode string) {
		if mode != "old" && mode != "new" {
			t.Fatalf("STRATA_PREP_MODES: %q is neither old nor new", mode)
		}
		eng.SetAttnPrep(mode == "new")
	}
	fmt.Println("| path | mean ms/token | median ms/token | tok/s (mean) | host launches/token | node updates/token | graphs/token | bound ms | bound/achieved |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, mode := range modes {
		mode = strings.TrimSpace(mode)
		setPath(mode)
		mean, median, _ := timeDecode(t, eng, promptArgmax(t, eng, prompt), tokens)
		s := eng.Stats()
		tk := float64(s.Tokens)
		fmt.Printf("ROW | %s | %.3f | %.3f | %.1f | %.1f | %.1f | %.2f | %.3f | %.3f |\n", mode, mean, median, 1e3/mean,
			float64(s.Launches)/tk, float64(s.GraphUpdates)/tk, float64(s.Graphs)/tk, bound, bound/mean)
		if err := eng.GraphErr(); err != nil {
			t.Fatalf("%s: graphs stopped: %v", mode, err)
		}
	}
	for _, mode := range []string{"old", "new"} {
		setPath(mode)
		kernelTimes(t, eng, prompt, mode, ktTokens)
	}
	setPath("new")
}

// promptArgmax restarts the sequence, feeds prompt and returns its greedy token, with the
// engine's stats reset after it.
func promptArgmax(t *testing.T, eng *Engine, prompt []int32) int32 {
	if err := eng.Reset(); err != nil {
		t.Fatal(err)
	}
	id, err := eng.ForwardArgmax(prompt, eng.Vocab())
	if err != nil {
		t.Fatal(err)
	}
	eng.ResetStats()
	return id
}

// kernelTimes decodes prompt, then tokens greedy tokens with events around each launch
// (graphs off), and prints a table of device µs per token by kernel headed "KT mode".
func kernelTimes(t *testing.T, eng *Engine, prompt []int32, mode string, tokens int) {
	id := promptArgmax(t, eng, prompt)
	err := eng.SetKernelTimes(true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tokens && err == nil; i++ {
		id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab())
	}
	if err == nil {
		err = eng.SetKernelTimes(false)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := eng.Stats()
	var keys []string
	var total float64
	for k, v := range s.Kernels {
		keys = append(keys, k)
		total += v.Ms
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(s.Kernels[b].Ms, s.Kernels[a].Ms) })
	tk := float64(max(1, s.Tokens))
	fmt.Printf("\nKT %s: device time per token by kernel (events around each launch, graphs off), positions 9–%d, %.3f ms in all, %.1f launches\n\n",
		mode, 8+tokens, total/tk, float64(s.Launches)/tk)
	fmt.Println("| kernel | launches/token | µs/token | µs/launch |")
	fmt.Println("|---|---:|---:|---:|")
	for _, k := range keys {
		v := s.Kernels[k]
		fmt.Printf("| %s | %.1f | %.1f | %.2f |\n", k, float64(v.Launches)/tk, v.Ms*1e3/tk, v.Ms*1e3/float64(v.Launches))
	}
}

// d2dCeiling is a 1 GiB device-to-device copy's rate (bytes read + written), the median
// of 15 event-timed copies after 3.
func d2dCeiling(t *testing.T, dev *rt.Device) float64 {
	const n = 1 << 30
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	a, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	b, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	e0, err := dev.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Destroy()
	e1, err := dev.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Destroy()
	var sec []float64
	for i := 0; i < 18; i++ {
		if err := e0.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Copy(a.Ptr, b.Ptr, n); err != nil {
			t.Fatal(err)
		}
		if err := e1.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := e1.Sync(); err != nil {
			t.Fatal(err)
		}
		d, err := rt.Elapsed(e0, e1)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 3 {
			sec = append(sec, d.Seconds())
		}
	}
	slices.Sort(sec)
	return 2 * n / sec[len(sec)/2] / 1e9
}

// benchEnv is the positive integer in environment variable k, else def.
func benchEnv(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchDevice opens what the device benchmarks of this package (TestPrepBench,
// TestDecodeProfile) run on: the GPU that STRATA_CO_DIR's code objects are built for, and the
// model STRATA_BENCH_MODEL. Both close with the test.
func benchDevice(t *testing.T) (*rt.Device, *model.GGUFSource, string) {
	dir := os.Getenv("STRATA_CO_DIR")
	var have []string
	for _, c := range abi.CodeObjects {
		if _, err := os.Stat(filepath.Join(dir, c.Path)); err == nil && !slices.Contains(have, c.Target) {
			have = append(have, c.Target)
		}
	}
	dev, err := rt.Open(rt.Request{Have: have})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	src, err := model.OpenGGUF(os.Getenv("STRATA_BENCH_MODEL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return dev, src, dir
}

// loadResident loads the engine for a resident-decode benchmark (every expert in VRAM, or
// the test fails) and returns it with the bytes one token reads (the dense weights and
// the k experts of every layer once) and their time at the device-to-device copy rate d2d
// (GB/s), in ms: the bound each ROW is judged against.
func loadResident(t *testing.T, dev *rt.Device, src model.Source, o Options, d2d float64) (*Engine, float64, float64) {
	eng, err := Load(dev, src, o)
	if err != nil {
		t.Fatal(err)
	}
	if !eng.resident {
		eng.Close()
		t.Fatal("the model's experts do not all fit: the bench is of resident decode")
	}
	var dense float64
	for _, r := range eng.Plan().Resident {
		if r.Kind == KindWeights {
			dense += float64(r.Bytes)
		}
	}
	c := eng.Config()
	weights := dense + float64(c.Layers*c.ExpertsUsed)*float64(eng.Plan().SlotBytes)
	return eng, weights, weights / (d2d * 1e9) * 1e3
}

// timeDecode decodes tokens greedy tokens after id, each timed by the caller, and returns
// the mean and median ms per token and the tokens.
func timeDecode(t *testing.T, eng *Engine, id int32, tokens int) (mean, median float64, ids []int32) {
	ms := make([]float64, 0, tokens)
	ids = make([]int32, 0, tokens)
	var err error
	for i := 0; i < tokens; i++ {
		t1 := time.Now()
		if id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab()); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, time.Since(t1).Seconds()*1e3)
		ids = append(ids, id)
	}
	var sum float64
	for _, v := range ms {
		sum += v
	}
	slices.Sort(ms)
	return sum / float64(len(ms)), ms[len(ms)/2], ids
}
