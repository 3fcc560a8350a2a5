package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/model"
	mgpu "github.com/strata-hip/strata/model/gpu"
	"github.com/strata-hip/strata/runtime/gpu"
)

// benchCeilings measures, on the device the benchmark runs on, the two bandwidths a row
// is judged against: a device-to-device copy of 1 GiB (bytes read plus bytes written,
// the rate at which the engine can read the weights it touches) and a 1 GiB copy from
// pinned host memory to the device (the rate at which missed experts can arrive). Each
// the median of 15 event-timed copies after 3 warm-ups; source bytes are random.
func benchCeilings(t *testing.T, dev *gpu.Device) (d2d, h2d float64) {
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
	h, err := dev.HostAlloc(n, false)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	rng := rand.New(rand.NewPCG(1, 2))
	hb := h.Bytes()
	for i := 0; i < len(hb); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			hb[i+k] = byte(v >> (8 * k))
		}
	}
	e0, _ := dev.NewEvent()
	e1, _ := dev.NewEvent()
	defer e0.Destroy()
	defer e1.Destroy()
	med := func(op func() error) float64 {
		var ms []float64
		for i := 0; i < 18; i++ {
			if err := e0.Record(s); err != nil {
				t.Fatal(err)
			}
			if err := op(); err != nil {
				t.Fatal(err)
			}
			if err := e1.Record(s); err != nil {
				t.Fatal(err)
			}
			if err := e1.Sync(); err != nil {
				t.Fatal(err)
			}
			d, err := gpu.Elapsed(e0, e1)
			if err != nil {
				t.Fatal(err)
			}
			if i >= 3 {
				ms = append(ms, d.Seconds())
			}
		}
		slices.Sort(ms)
		return ms[len(ms)/2]
	}
	h2d = n / med(func() error { return s.Upload(a.Ptr, h, 0, n) }) / 1e9
	if err := s.Upload(b.Ptr, h, 0, n); err != nil {
		t.Fatal(err)
	}
	d2d = 2 * n / med(func() error { return s.Copy(a.Ptr, b.Ptr, n) }) / 1e9
	return d2d, h2d
}

// TestGPUBench (STRATA_GPU_BENCH=1, STRATA_BENCH_MODEL=path.gguf): at each budget of
// STRATA_BENCH_BUDGETS_MIB (comma-separated, 0 = unlimited) and policy, load, decode
// STRATA_BENCH_TOKENS greedy tokens after an 8-token prompt, then (STRATA_BENCH_PREFILL,
// comma-separated lengths) restart the sequence and time a prompt of that many random
// tokens. Reports tok/s, hit rate, bytes copied per token, the copy bandwidth, the host's
// launch and synchronisation time, and the per-token bound with the ratio, as Markdown in
// $STRATA_BENCH_OUT/gpu-engine-*.md and tab-separated rows in bench-rows.tsv there.
// The decode row takes each greedy token as strata-run's greedy decode does
// (Engine.ForwardArgmax); STRATA_BENCH_HOSTARGMAX=1 takes it from the logits on the host
// (Forward and argmax), as the rows before session 9 did.
// STRATA_BENCH_MISSES (comma-separated: auto, copy, map; default the engine's default,
// auto) runs each policy once per miss mode (mgpu.Options.Misses; rows labelled
// POLICY/MODE, and for auto POLICY/auto:PATH with the path the engine took), with
// STRATA_BENCH_MAP_PROMOTE as mgpu.Options.MapPromote (map and auto rows). The bound's
// host-to-device term counts each missed expert's bytes once (read through the mapping, or
// copied on the copy path); the last column, bus MB/token, adds the promotions a mapped
// row also copies. STRATA_BENCH_WARM=N adds a row "decode warm N" after the decode row: N
// untimed steps and STRATA_BENCH_TOKENS timed ones on the same (now warmer) cache, fed
// random token ids.
// STRATA_BENCH_HOSTKV=1, STRATA_BENCH_NORESIDENT=1, STRATA_BENCH_NOFUSE=1 and
// STRATA_BENCH_NOROWNORM=1 select the engine's measurement baselines (mgpu.Options.HostKV,
// NoResident, NoFuse, NoRowNorm); all four together are the first engine's kernels, launch
// and sync structure. STRATA_BENCH_CHUNK=N loads the engine with the batched prompt path
// (mgpu.Options.Chunk); STRATA_BENCH_PATHS (comma-separated: batched, token; default the
// loaded engine's) times every prompt on each path, the token path only up to
// STRATA_BENCH_TOKEN_MAX tokens (0: no limit). STRATA_BENCH_MMVQ_AB=1 decodes four times on
// the same engine, alternating mmvq's old grid (ceil(rows/8) blocks, Engine.SetMmvqRows8)
// and the kernel's rows per block, a row each ("decode rows8" / "decode rows16").
// STRATA_BENCH_SPLITS (comma-separated attention split settings, mgpu.Options.AttnSplit: 0
// the policy, n positions per split; 64 is the policy before; a suffix "sync" adds
// mgpu.Options.SyncLookup, the resident lookup's place before) replaces the decode row: for
// each setting in order, Reset, the 8-token prompt, STRATA_BENCH_TOKENS tokens, a row
// "decode split=S", and each token's wall time averaged over bins of STRATA_BENCH_BIN
// tokens (default 32) by position. STRATA_BENCH_KT_SPLITS (the same form): afterwards, per
// setting, a sequence of STRATA_BENCH_TOKENS tokens with the device time per kernel
// (mgpu.Engine.SetKernelTimes) over its first and its last 16 tokens.
// STRATA_BENCH_DECODE (comma-separated modes LAUNCH-OUT, LAUNCH plain, bound, graph or
// graphlate, OUT logits or argmax) also replaces the decode row: for each mode in order, the
// sequence as for STRATA_BENCH_SPLITS, launches bound per call (plain:
// mgpu.Options.PlainLaunch), once per Forward (bound), or a resident token as one replayed
// graph (graph: the engine's default, its node updates made while the token before runs;
// graphlate: made just before its launch, Engine.SetGraphAhead(false); plain and bound turn
// graphs off, mgpu.Options.NoGraph), the greedy token from the
// logits on the host (logits: Forward and argmax) or on the GPU (argmax:
// Engine.ForwardArgmax); a row "decode MODE" and a BINS line with the caller's mean
// ms/token and tok/s, and for graph modes the graph launches, captures and node updates per
// token and the host's µs per token submitting them.
func TestGPUBench(t *testing.T) {
	if os.Getenv("STRATA_GPU_BENCH") != "1" {
		t.Skip("set STRATA_GPU_BENCH=1 and STRATA_BENCH_MODEL")
	}
	dev, dir := openTestGPU(t)
	path := os.Getenv("STRATA_BENCH_MODEL")
	src, err := model.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	env := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	budgets := strings.Split(os.Getenv("STRATA_BENCH_BUDGETS_MIB"), ",")
	policies := strings.Split(os.Getenv("STRATA_BENCH_POLICIES"), ",")
	if v := os.Getenv("STRATA_BENCH_MISSES"); v != "" {
		var pm []string
		for _, pol := range policies {
			for _, mode := range strings.Split(v, ",") {
				mode = strings.TrimSpace(mode) // checked and kept trimmed: the row's mode is parsed again below
				if _, err := mgpu.ParseMissMode(mode); err != nil {
					t.Fatalf("STRATA_BENCH_MISSES: %v", err)
				}
				pm = append(pm, strings.TrimSpace(pol)+"/"+mode)
			}
		}
		policies = pm
	}
	mapPromote := env("STRATA_BENCH_MAP_PROMOTE", 0)
	tokens := env("STRATA_BENCH_TOKENS", 64)
	ctx := env("STRATA_BENCH_CTX", 1024)
	group := env("STRATA_BENCH_GROUP", mgpu.DefaultGroup)
	var prefills []int
	for _, f := range strings.Split(os.Getenv("STRATA_BENCH_PREFILL"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			prefills = append(prefills, n)
		}
	}
	prefetch := os.Getenv("STRATA_BENCH_PREFETCH") == "1"
	// STRATA_BENCH_NOMAPAHEAD=1 loads engines with mgpu.Options.NoMapAhead (mapped misses
	// without the look-ahead; STRATA_BENCH_HOSTGAP's "+ahead" selects it per mode otherwise)
	noAhead := os.Getenv("STRATA_BENCH_NOMAPAHEAD") == "1"
	// STRATA_BENCH_EARLYBATCH=1 loads engines with mgpu.Options.EarlyBatch (a mapped lookup's
	// promotion batch issued before the next launch: the path before idle-s11)
	early := os.Getenv("STRATA_BENCH_EARLYBATCH") == "1"
	// STRATA_BENCH_NOMAPLAND=1 loads engines with mgpu.Options.NoMapLand (the look-ahead
	// without landing, with promotions: the default before land-s11; STRATA_BENCH_HOSTGAP's
	// modes set landing per mode)
	noLand := os.Getenv("STRATA_BENCH_NOMAPLAND") == "1"
	// STRATA_BENCH_LANDPROMOTE=1 loads engines with mgpu.Options.LandPromote (landing and
	// also promotions of the misses that did not land)
	landPromote := os.Getenv("STRATA_BENCH_LANDPROMOTE") == "1"
	hostKV := os.Getenv("STRATA_BENCH_HOSTKV") == "1"
	noRes := os.Getenv("STRATA_BENCH_NORESIDENT") == "1"
	noFuse := os.Getenv("STRATA_BENCH_NOFUSE") == "1"
	noRow := os.Getenv("STRATA_BENCH_NOROWNORM") == "1"
	ktimes := os.Getenv("STRATA_BENCH_KTIMES") == "1"
	label := os.Getenv("STRATA_BENCH_LABEL")
	chunk := env("STRATA_BENCH_CHUNK", 0)
	tokenMax := env("STRATA_BENCH_TOKEN_MAX", 1<<30)
	paths := []string{"token"}
	if chunk > 0 {
		paths = []string{"batched"}
	}
	if v := os.Getenv("STRATA_BENCH_PATHS"); v != "" {
		paths = strings.Split(v, ",")
	}
	// STRATA_BENCH_PTAB (comma-separated mgpu.PrefillTables modes: auto, off, all, host):
	// the batched prompt runs once per mode, in order, on the same engine (a row each,
	// labelled "tables=MODE"); unset, once with the engine's default.
	var ptabs []mgpu.PrefillTables
	if v := os.Getenv("STRATA_BENCH_PTAB"); v != "" {
		for _, f := range strings.Split(v, ",") {
			m, err := mgpu.ParsePrefillTables(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("STRATA_BENCH_PTAB: %v", err)
			}
			ptabs = append(ptabs, m)
		}
	}
	// STRATA_BENCH_PTILES (comma-separated mgpu.PrefillTiles modes: best, t64, t32, s8): the batched
	// prompt runs once per mode, in order, on the same engine (a row each, labelled
	// "tiles=MODE"; the kernels each mode picks are logged); unset, once in the engine's
	// default. STRATA_BENCH_PKTIMES (comma-separated prompt lengths): after a length's timed
	// rows, one more batched prompt per distinct tile mode with the device time per kernel
	// (Engine.SetKernelTimes; a table "prefill N tiles=MODE"). A mode with the suffix
	// "+cols8" runs the mmvq fallback a launch per 8 columns (Engine.SetMmvqCols8); a
	// suffix "+attnold" after it runs attention_prefill's first kernel
	// (Engine.SetAttnPrefillOld), a suffix "+attnf32" after that its f32 kernel instead of
	// the tensor-core one (Engine.SetAttnPrefillF32), a suffix "+attngen" after that the
	// tensor-core kernel for every head size (f16mma) instead of the one for the model's
	// (Engine.SetAttnPrefillGeneric); a suffix "+shdec" runs qwen3next's shared expert
	// through moe_decode over the chunk's tokens (Engine.SetSharedDecode); a last suffix
	// "+gdnold" runs its delta-net recurrence as gated_delta_net/recurrent
	// (Engine.SetDeltaNetOld).
	var ptiles []tileMode
	if v := os.Getenv("STRATA_BENCH_PTILES"); v != "" {
		for _, f := range strings.Split(v, ",") {
			name, gdnOld := strings.CutSuffix(strings.TrimSpace(f), "+gdnold")
			name, shDec := strings.CutSuffix(name, "+shdec")
			name, attnGen := strings.CutSuffix(name, "+attngen")
			name, attnF32 := strings.CutSuffix(name, "+attnf32")
			name, attnOld := strings.CutSuffix(name, "+attnold")
			name, cols8 := strings.CutSuffix(name, "+cols8")
			m, err := mgpu.ParsePrefillTiles(name)
			if err != nil {
				t.Fatalf("STRATA_BENCH_PTILES: %v", err)
			}
			ptiles = append(ptiles, tileMode{m, cols8, attnOld, attnF32, attnGen, shDec, gdnOld})
		}
	}
	pktimes := intList(t, "STRATA_BENCH_PKTIMES")
	d2d, h2d := benchCeilings(t, dev)
	t.Logf("ceilings: device-to-device %.0f GB/s (read + written), pinned host-to-device %.1f GB/s", d2d, h2d)
	var b strings.Builder
	fmt.Fprintf(&b, "model %s on %s (%s); decode: %d greedy tokens after an 8-token prompt; ctx %d; host KV %v, resident mode off %v, fusion off %v, row norm off %v; prompt chunk %d, prompt paths %v\n",
		filepath.Base(path), dev.Info().Name, dev.Info().Arch, tokens, ctx, hostKV, noRes, noFuse, noRow, chunk, paths)
	fmt.Fprintf(&b, "ceilings measured in this run: device-to-device copy %.0f GB/s (read + written), pinned host-to-device %.1f GB/s\n\n", d2d, h2d)
	fmt.Fprintf(&b, "| budget MiB | policy | phase | cache slots | of experts | hit rate | MB copied/token | copy GB/s | launches/token | host µs/launch | sync ms/token | ms/token | tok/s | bound ms | bound/achieved | load s | bus MB/token |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var tsv, kt, bins strings.Builder
	for _, bs := range budgets {
		mibs, err := strconv.Atoi(strings.TrimSpace(bs))
		if err != nil {
			t.Fatalf("STRATA_BENCH_BUDGETS_MIB: %v", err)
		}
		bname := map[bool]string{true: "unlimited", false: strconv.Itoa(mibs)}[mibs == 0]
		for _, pol := range policies {
			t0 := time.Now()
			polName, miss, _ := strings.Cut(strings.TrimSpace(pol), "/")
			misses := mgpu.MissAuto // the engine's default when STRATA_BENCH_MISSES is unset
			if miss != "" {
				if misses, err = mgpu.ParseMissMode(miss); err != nil {
					t.Fatal(err)
				}
			}
			promote := 0
			if misses != mgpu.MissCopy { // the cap applies to map and auto rows only (Load refuses it on the copy path)
				promote = mapPromote
			}
			eng, err := mgpu.Load(dev, src, mgpu.Options{CODir: dir, Ctx: ctx, Budget: uint64(mibs) << 20, Policy: polName,
				Misses: misses, MapPromote: promote, Group: group, Prefetch: prefetch, NoMapAhead: noAhead, EarlyBatch: early, NoMapLand: noLand, LandPromote: landPromote, HostKV: hostKV, NoResident: noRes, NoFuse: noFuse, NoRowNorm: noRow, KernelTimes: ktimes, Chunk: chunk})
			if err != nil {
				fmt.Fprintf(&b, "| %s | %s | load failed: %v |\n", bname, pol, err)
				t.Logf("budget %s: %v", bname, err)
				continue
			}
			path, why := eng.MissPath()
			mapped := path == "map"
			pol := pol // the row's label: an auto row says which path the engine took
			if misses == mgpu.MissAuto && miss != "" {
				pol += ":" + path
			}
			t.Logf("budget %s, %s: expert misses %s %s", bname, pol, path, why)
			load := time.Since(t0)
			c := eng.Config()
			var dense float64
			for _, r := range eng.Plan().Resident {
				if r.Kind == mgpu.KindWeights {
					dense += float64(r.Bytes)
				}
			}
			// The bound per token (issue 11, item 4): the larger of reading the touched
			// weights (dense + the k experts of every layer) at the device copy ceiling and
			// copying the missed expert bytes at the pinned host-to-device ceiling, both
			// measured above. A missed expert's bytes count once: an expert the token did
			// not find in VRAM (Stats.Misses) had to cross the bus at least once, and nothing
			// else had to. Until session 11 a mapped row's bound also counted the promotion
			// copies (the engine's own choice to copy a missed expert a second time), which
			// made the bound larger and the ratio kinder, and a batched prompt's row (whose
			// misses are copied, once per chunk, and counted per use) added its uses that
			// missed to its copies. The last column, bus MB a token, keeps what crossed:
			// misses read + promotions on a mapped token path; the copies elsewhere.
			// For a batched prompt the formula is no lower bound: its touched weights are
			// read once a chunk, not once a token, and compute is not in it (ratios above 1).
			touched := dense + float64(c.Layers*c.ExpertsUsed)*float64(eng.Plan().SlotBytes)
			row := func(phase string, s mgpu.Stats) {
				ms := s.Wall.Seconds() * 1e3 / float64(s.Tokens)
				perTok := float64(s.CopiedBytes) / float64(s.Tokens)
				missed, bus := perTok, perTok
				if mapped && !strings.Contains(phase, " batched") { // the misses cross the bus as kernel reads, the promotions as copies
					missed = float64(s.Misses) * float64(eng.Plan().SlotBytes) / float64(s.Tokens)
					bus += missed
				}
				bound := max(touched/(d2d*1e9), missed/(h2d*1e9)) * 1e3
				hit := float64(s.Hits) / float64(max(1, s.Hits+s.Misses))
				copyBW := float64(s.CopiedBytes) / 1e6 / max(s.CopyMs, 1e-9)
				lpt := float64(s.Launches) / float64(s.Tokens)
				usl := s.LaunchTime.Seconds() * 1e6 / float64(max(1, s.Launches))
				spt := s.SyncTime.Seconds() * 1e3 / float64(s.Tokens)
				line := fmt.Sprintf("| %s | %s | %s | %d | %d | %.3f | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f | %.1f | %.3f | %.3f | %.1f | %.1f |\n",
					bname, pol, phase, eng.Plan().Slots, c.Layers*c.Experts, hit, perTok/1e6, copyBW, lpt, usl, spt, ms, 1e3/ms, bound, bound/ms, load.Seconds(), bus/1e6)
				b.WriteString(line)
				fmt.Print("ROW " + line) // at once, so that a run cut short by its time limit keeps its rows
				fmt.Fprintf(&tsv, "%s\t%d\t%s\t%s\t%.4f\t%.3f\t%.2f\t%.3f\t%.2f\t%.4f\t%.4f\t%.1f\t%.2f\n",
					label, mibs, pol, phase, hit, perTok/1e6, copyBW, ms, 1e3/ms, bound, bound/ms, d2d, h2d)
			}
			prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
			hostArgmax := os.Getenv("STRATA_BENCH_HOSTARGMAX") == "1"
			l, err := eng.Forward(prompt)
			if err != nil {
				t.Fatal(err)
			}
			rounds := []string{""}
			if os.Getenv("STRATA_BENCH_MMVQ_AB") == "1" {
				rounds = []string{" rows8", " rows16", " rows8", " rows16"}
			}
			if splits := splitList(t, "STRATA_BENCH_SPLITS"); len(splits) > 0 {
				rounds = nil
				bin := env("STRATA_BENCH_BIN", 32)
				for _, sp := range splits {
					eng.SetAttnSplit(sp.n)
					eng.SetSyncLookup(sp.sync)
					ms, err := decodeTimed(eng, prompt, tokens)
					if err != nil {
						t.Fatal(err)
					}
					row("decode split="+sp.name, eng.Stats())
					line := fmt.Sprintf("split=%s: ms/token by position:", sp.name)
					line += positionBins(ms, bin, len(prompt))
					fmt.Fprintf(&bins, "%s\n", line)
					fmt.Println("BINS " + line)
				}
				eng.SetAttnSplit(0)
				eng.SetSyncLookup(false)
			}
			if modes := os.Getenv("STRATA_BENCH_DECODE"); modes != "" {
				rounds = nil
				bin := env("STRATA_BENCH_BIN", 32)
				for _, md := range strings.Split(modes, ",") {
					md = strings.TrimSpace(md)
					launch, out, _ := strings.Cut(md, "-")
					graph := launch == "graph" || launch == "graphlate"
					if (launch != "plain" && launch != "bound" && !graph) || (out != "logits" && out != "argmax") {
						t.Fatalf("STRATA_BENCH_DECODE: %q is not plain|bound|graph|graphlate-logits|argmax", md)
					}
					eng.SetPlainLaunch(launch == "plain")
					if err := eng.SetGraph(graph); err != nil {
						t.Fatal(err)
					}
					eng.SetGraphAhead(launch == "graph")
					ms, err := decodeMode(eng, prompt, tokens, out == "argmax")
					if err != nil {
						t.Fatal(err)
					}
					row("decode "+md, eng.Stats())
					var all float64
					for _, v := range ms {
						all += v
					}
					line := fmt.Sprintf("%s: caller ms/token %.3f (tok/s %.1f); by position:", md, all/float64(len(ms)), 1e3*float64(len(ms))/all)
					if s := eng.Stats(); graph {
						tk := float64(s.Tokens)
						line = fmt.Sprintf("%s: graph launches/token %.2f, captures %d, node updates/token %.1f (%.1f ahead), host µs/token submitting graphs %.1f, walking ahead %.1f (error: %v); %s",
							md, float64(s.Graphs)/tk, s.Captures, float64(s.GraphUpdates)/tk, float64(s.AheadUpdates)/tk, s.GraphTime.Seconds()*1e6/tk,
							s.AheadTime.Seconds()*1e6/tk, eng.GraphErr(), line[len(md)+2:])
					}
					line += positionBins(ms, bin, len(prompt))
					fmt.Fprintf(&bins, "%s\n", line)
					fmt.Println("BINS " + line)
				}
				eng.SetPlainLaunch(false)
				if err := eng.SetGraph(true); err != nil {
					t.Fatal(err)
				}
				eng.SetGraphAhead(true)
			}
			if modes := os.Getenv("STRATA_BENCH_HOSTGAP"); modes != "" {
				rounds = nil
				if err := hostGapRows(eng, mapped, promote, prompt, tokens, modes, row, &bins); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range rounds {
				eng.SetMmvqRows8(r == " rows8")
				eng.ResetStats()
				// The greedy token as strata-run's greedy decode takes it (ForwardArgmax: the
				// argmax on the GPU, one id back), or with STRATA_BENCH_HOSTARGMAX=1 from the
				// logits on the host (the decode rows before session 9).
				id := argmax(l) // the prompt's, or the last round's token
				for i := 0; i < tokens && err == nil; i++ {
					if hostArgmax {
						if l, err = eng.Forward([]int32{id}); err == nil {
							id = argmax(l)
						}
					} else {
						id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab())
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				row("decode"+r, eng.Stats())
				if !hostArgmax { // the next round starts from this round's last logits
					if l, err = eng.LastLogits(); err != nil {
						t.Fatal(err)
					}
				}
			}
			eng.SetMmvqRows8(false)
			// STRATA_BENCH_WARM=N: the steady state after the cold rows. N more decode steps
			// (not timed), then tokens timed ones, all fed random token ids rather than the
			// greedy token: a synthetic model's greedy text soon repeats itself, and a
			// repeating text routes to the same experts, which would warm the cache to a hit
			// rate no real text gives. A step's work does not depend on its token id, only
			// its routing does.
			if warm := env("STRATA_BENCH_WARM", 0); warm > 0 {
				wr := rand.New(rand.NewPCG(5, uint64(mibs)))
				step := func() error {
					_, err := eng.ForwardArgmax([]int32{int32(wr.IntN(eng.Vocab()))}, eng.Vocab())
					return err
				}
				if eng.Pos()+warm+tokens > ctx {
					t.Fatalf("STRATA_BENCH_WARM: %d + %d tokens after position %d exceed ctx %d", warm, tokens, eng.Pos(), ctx)
				}
				for i := 0; i < warm && err == nil; i++ {
					err = step()
				}
				eng.ResetStats()
				for i := 0; i < tokens && err == nil; i++ {
					err = step()
				}
				if err != nil {
					t.Fatal(err)
				}
				row(fmt.Sprintf("decode warm %d", warm), eng.Stats())
			}
			if ktimes {
				kernelTable(&kt, fmt.Sprintf("%s, budget %s, decode", filepath.Base(path), bname), eng.Stats())
			}
			for _, sp := range intList(t, "STRATA_BENCH_KT_SPLITS") {
				const win = 16
				eng.SetAttnSplit(sp)
				if err := eng.Reset(); err != nil {
					t.Fatal(err)
				}
				l, err := eng.Forward(prompt)
				for i := 0; i < tokens && err == nil; i++ {
					if i == 0 || i == tokens-win {
						eng.ResetStats()
						err = eng.SetKernelTimes(true)
					}
					if err == nil {
						l, err = eng.Forward([]int32{argmax(l)})
					}
					if err == nil && (i == win-1 || i == tokens-1) {
						if err = eng.SetKernelTimes(false); err == nil {
							kernelTable(&kt, fmt.Sprintf("%s, budget %s, split=%d, decode positions %d–%d", filepath.Base(path), bname, sp, eng.Pos()-win, eng.Pos()-1), eng.Stats())
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				eng.SetAttnSplit(0)
			}
			rng := rand.New(rand.NewPCG(3, uint64(mibs)))
		prompts:
			for _, n := range prefills {
				if n > ctx {
					t.Fatalf("prefill %d > ctx %d", n, ctx)
				}
				p := make([]int32, n)
				for i := range p {
					p[i] = int32(rng.IntN(eng.Vocab()))
				}
				for _, path := range paths {
					path = strings.TrimSpace(path)
					if path != "batched" && path != "token" {
						t.Fatalf("STRATA_BENCH_PATHS: %q is neither batched nor token", path)
					}
					if path == "token" && n > tokenMax {
						continue
					}
					eng.SetTokenByToken(path == "token")
					if path == "batched" && !eng.Batched(n) {
						fmt.Fprintf(&b, "| %s | %s | prefill %d batched | not available for this engine (no chunk, or the model's architecture) |\n", bname, pol, n)
						continue
					}
					modes := []mgpu.PrefillTables{mgpu.TablesAuto}
					if path == "batched" && ptabs != nil {
						modes = ptabs
					}
					tiles := []tileMode{{tiles: mgpu.TilesBest}}
					if path == "batched" && ptiles != nil {
						tiles = ptiles
					}
					for _, run := range prefillRuns(modes, tiles) {
						mode, tile := run.tables, run.tiles
						eng.SetPrefillTables(mode)
						tile.set(eng)
						if path == "batched" && ptiles != nil {
							t.Logf("prefill %d tiles=%s: %s", n, tile, strings.Join(eng.PrefillKernels(min(n, chunk)), ", "))
						}
						if err := eng.Reset(); err != nil {
							t.Fatal(err)
						}
						eng.ResetStats()
						if _, err := eng.Forward(p); err != nil {
							// the engine refuses further use after a failure: record it, go on
							// with the next budget
							line := fmt.Sprintf("| %s | %s | prefill %d %s | failed: %v |\n", bname, pol, n, path, err)
							b.WriteString(line)
							fmt.Print("ROW " + line)
							t.Errorf("budget %s, prompt %d, %s: %v", bname, n, path, err)
							break prompts
						}
						phase := fmt.Sprintf("prefill %d", n)
						if len(paths) > 1 || chunk > 0 {
							phase += " " + path
						}
						if s := eng.Stats(); path == "batched" {
							// layer-chunks whose experts ran through moe_prefill / the moe_decode fallback
							phase += fmt.Sprintf(" (moe_prefill %d, fallback %d)", s.StackLayers, s.FallbackLayers)
							if ptabs != nil {
								phase += " tables=" + mode.String()
							}
							if ptiles != nil {
								phase += " tiles=" + tile.String()
							}
						}
						row(phase, eng.Stats())
					}
					if path == "batched" && slices.Contains(pktimes, n) {
						seen := map[tileMode]bool{}
						for _, tile := range tiles {
							if seen[tile] {
								continue
							}
							seen[tile] = true
							eng.SetPrefillTables(modes[0])
							tile.set(eng)
							err := eng.Reset()
							if err == nil {
								eng.ResetStats()
								err = eng.SetKernelTimes(true)
							}
							if err == nil {
								_, err = eng.Forward(p)
							}
							if err == nil {
								err = eng.SetKernelTimes(false)
							}
							if err != nil {
								t.Fatalf("budget %s, prompt %d, tiles %s, kernel times: %v", bname, n, tile, err)
							}
							kernelTable(&kt, fmt.Sprintf("%s, budget %s, prefill %d tiles=%s", filepath.Base(os.Getenv("STRATA_BENCH_MODEL")), bname, n, tile), eng.Stats())
						}
						tileMode{tiles: mgpu.TilesBest}.set(eng)
					}
				}
				eng.SetTokenByToken(false)
			}
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bins.Len() > 0 {
		b.WriteString("\nper-token wall time by position (mean over each bin):\n\n" + bins.String())
	}
	b.WriteString(kt.String())
	t.Log("\n" + b.String())
	if out := os.Getenv("STRATA_BENCH_OUT"); out != "" {
		// policies may read "decayed/copy" (STRATA_BENCH_MISSES): no path separators in the name
		name := fmt.Sprintf("gpu-engine-%s%s-g%d-prefetch%v.md", label, strings.ReplaceAll(strings.Join(policies, "+"), "/", "-"), group, prefetch)
		if err := os.WriteFile(filepath.Join(out, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(out, "bench-rows.tsv"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(tsv.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// prefillRun is one timed batched prompt's settings.
type prefillRun struct {
	tables mgpu.PrefillTables
	tiles  tileMode
}

// tileMode is one STRATA_BENCH_PTILES entry: the tile mode, whether the mmvq fallback
// launches once per 8 columns ("+cols8"), whether attention_prefill's first kernel runs
// ("+attnold"), whether its f32 kernel runs instead of the tensor-core one ("+attnf32"),
// whether the tensor-core kernel for every head size runs (f16mma, "+attngen"),
// whether qwen3next's shared expert runs through moe_decode ("+shdec") and
// whether its delta-net recurrence runs as gated_delta_net/recurrent ("+gdnold").
type tileMode struct {
	tiles   mgpu.PrefillTiles
	cols8   bool
	attnOld bool
	attnF32 bool
	attnGen bool
	shDec   bool
	gdnOld  bool
}

func (m tileMode) set(eng *mgpu.Engine) {
	eng.SetPrefillTiles(m.tiles)
	eng.SetMmvqCols8(m.cols8)
	eng.SetAttnPrefillOld(m.attnOld)
	eng.SetAttnPrefillF32(m.attnF32)
	eng.SetAttnPrefillGeneric(m.attnGen)
	eng.SetSharedDecode(m.shDec)
	eng.SetDeltaNetOld(m.gdnOld)
}

func (m tileMode) String() string {
	s := m.tiles.String()
	if m.cols8 {
		s += "+cols8"
	}
	if m.attnOld {
		s += "+attnold"
	}
	if m.attnF32 {
		s += "+attnf32"
	}
	if m.attnGen {
		s += "+attngen"
	}
	if m.shDec {
		s += "+shdec"
	}
	if m.gdnOld {
		s += "+gdnold"
	}
	return s
}

// prefillRuns is every (tables, tiles) pair, tables outer.
func prefillRuns(tables []mgpu.PrefillTables, tiles []tileMode) []prefillRun {
	var out []prefillRun
	for _, m := range tables {
		for _, t := range tiles {
			out = append(out, prefillRun{m, t})
		}
	}
	return out
}

// intList parses the comma-separated integers of environment variable k (empty: none).
func intList(t *testing.T, k string) []int {
	var out []int
	for _, sp := range splitList(t, k) {
		if sp.sync {
			t.Fatalf("%s: %q: no sync suffix here", k, sp.name)
		}
		out = append(out, sp.n)
	}
	return out
}

// benchSplit is one STRATA_BENCH_SPLITS setting: positions per split (0: the policy) and
// whether the resident lookup runs right after the sync ("sync" suffix).
type benchSplit struct {
	name string
	n    int
	sync bool
}

// splitList parses environment variable k's comma-separated settings (empty: none).
func splitList(t *testing.T, k string) []benchSplit {
	var out []benchSplit
	for _, f := range strings.Split(os.Getenv(k), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		num, sync := strings.CutSuffix(f, "sync")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			t.Fatalf("%s: %q is not a count (with an optional sync suffix)", k, f)
		}
		out = append(out, benchSplit{f, n, sync})
	}
	return out
}

// decodeTimed restarts the sequence, feeds prompt, then decodes n greedy tokens (stats
// reset after the prompt) and returns each token's wall time in ms.
func decodeTimed(eng *mgpu.Engine, prompt []int32, n int) ([]float64, error) {
	if err := eng.Reset(); err != nil {
		return nil, err
	}
	l, err := eng.Forward(prompt)
	if err != nil {
		return nil, err
	}
	eng.ResetStats()
	ms := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if l, err = eng.Forward([]int32{argmax(l)}); err != nil {
			return nil, err
		}
		ms = append(ms, time.Since(t0).Seconds()*1e3)
	}
	return ms, nil
}

// hostGapRows is STRATA_BENCH_HOSTGAP: for each mode (comma-separated: old or new, with an
// optional suffixes "+nopromote" or "+promoteN", "+lag", "+noev"), in order on one engine, a decode row "decode hostgap=MODE"
// from a cold cache — mapped engines start each run with Engine.ResetCache, then Reset, the
// prompt and n greedy tokens (Forward and the host's argmax, as the decode row took them
// before session 9 and STRATA_BENCH_HOSTARGMAX=1 takes them now) — and a
// PHASES line (after a warm-up of 4 tokens that captures the decode graphs): the host time of each step phase and the device's busy, tail and idle time
// per token (mgpu.StepPhases, Engine.SetTokenTimes), the caller's time per token, and
// whether the greedy tokens equal the first mode's. old: Engine.SetLaunchFirst(false) (the
// token's graph walked before its launch); new: launched first when the ahead walk left
// it current. +nopromote: Engine.SetMapPromote(−1), no expert copied into VRAM (the
// device time without promotion copies); +promoteN: Engine.SetMapPromote(N), at most N
// promotions a token (mapped engines only; without a suffix the loaded engine's cap);
// +lag: Engine.SetStartProbe, the host polls each token's first event after the launch
// (StepPhases.StartLag: when the GPU reached the token; the poll delays the lookup); +noev:
// no token events (SetTokenTimes off: the device columns stay 0), the rows as the plain
// decode row with STRATA_BENCH_HOSTARGMAX=1 times them; +argmax: each greedy token from
// Engine.ForwardArgmax (as the plain decode row takes it); +ahead: the mapped look-ahead on
// (Engine.SetMapAhead; the engine must not be loaded with STRATA_BENCH_NOMAPAHEAD=1), off without
// it, and the PHASES line gets its prediction counts; +aheadN: on, copying only the first N
// of each layer's predicted experts (Engine.SetMapAheadK) (+ahead and +aheadN, as +nopromote
// and +promoteN, are skipped on an engine that does not map); +land: the look-ahead lands its
// copies in reserved VRAM slots (Engine.SetMapLand(K), with +ahead), +landN: at most N a
// layer (skipped on an engine that does not map; the PHASES line gets the landing counts).
// Landing is off in a mode without +land, and promotions run in every mode unless
// +nopromote (Engine.SetLandPromote(true)): the modes mean what they meant in land-s11's
// call, whatever the engine's defaults. The idle settings
// (model/gpu hostgap.go, bench/results/2026-11-30-idle-s11): +poll, Engine.SetSyncPoll (the
// token's sync polls an event instead of cuStreamSynchronize); +nop, SetTablesNop (an empty
// kernel after the lookup's table uploads; mapped only); +late, SetLateBatch (a lookup's
// promotion batch issued after the next launch; mapped only; the default since idle-s11:
// a mode without it runs the path before, as a mode without +ahead runs without the
// look-ahead); +latewait, the same with the next lookup waiting for that batch (no
// back-pressure); +pend, SetSyncProbe (the PHASES line counts syncs that return with the
// batch's last group pending). The engine's settings are restored after the rows.
func hostGapRows(eng *mgpu.Engine, mapped bool, promote int, prompt []int32, n int, modes string, row func(string, mgpu.Stats), bins *strings.Builder) error {
	lateOn, lateWait0 := eng.LateBatch() // the loaded engine's, restored after the rows
	land0, promote0 := eng.MapLand()     // restored after the rows
	// Warm-up: the decode graphs are captured here, not inside the first mode's row (without
	// the look-ahead, and where the engine has its buffers with each of the modes' copy counts).
	warm := []int{-1} // -1: look-ahead off; else SetMapAheadK's n
	for _, md := range strings.Split(modes, ",") {
		for _, suf := range strings.Split(strings.TrimSpace(md), "+")[1:] {
			if n, err := strconv.Atoi(strings.TrimPrefix(suf, "ahead")); suf == "ahead" || (strings.HasPrefix(suf, "ahead") && err == nil && n > 0) {
				if !slices.Contains(warm, n) { // "ahead" alone: n = 0 (Atoi fails), all K
					warm = append(warm, n)
				}
			}
		}
	}
	for _, w := range warm {
		if err := eng.SetMapAhead(w >= 0); err != nil {
			break
		}
		if err := eng.SetMapAheadK(max(w, 0)); err != nil {
			return err
		}
		if err := eng.Reset(); err != nil {
			return err
		}
		l, err := eng.Forward(prompt)
		id := argmax(l)
		for i := 0; i < 4 && err == nil; i++ {
			if strings.Contains(modes, "+argmax") { // the graphs the rows replay
				id, err = eng.ForwardArgmax([]int32{id}, len(l))
				continue
			}
			l, err = eng.Forward([]int32{id})
			id = argmax(l)
		}
		if err != nil {
			return err
		}
	}
	var first []int32
	for _, md := range strings.Split(modes, ",") {
		md = strings.TrimSpace(md)
		parts := strings.Split(md, "+")
		base, pcap, lag, noEv, skip := parts[0], promote, false, false, false
		ahead, aheadK, gpuArgmax, land := false, 0, false, 0
		poll, nop, late, lateWait, pend := false, false, false, false, false
		for _, suf := range parts[1:] {
			k, err := strconv.Atoi(strings.TrimPrefix(suf, "promote"))
			ak, aerr := strconv.Atoi(strings.TrimPrefix(suf, "ahead"))
			lk, lerr := strconv.Atoi(strings.TrimPrefix(suf, "land"))
			switch {
			case suf == "land":
				land, skip = eng.Config().ExpertsUsed, skip || !mapped
			case strings.HasPrefix(suf, "land") && lerr == nil && lk > 0:
				land, skip = lk, skip || !mapped
			case suf == "ahead":
				ahead, skip = true, skip || !mapped
			case strings.HasPrefix(suf, "ahead") && aerr == nil && ak > 0:
				ahead, aheadK, skip = true, ak, skip || !mapped
			case suf == "argmax":
				gpuArgmax = true
			case suf == "lag":
				lag = true
			case suf == "poll":
				poll = true
			case suf == "pend":
				pend = true
			case suf == "nop":
				nop, skip = true, skip || !mapped
			case suf == "late":
				late, skip = true, skip || !mapped
			case suf == "latewait":
				late, lateWait, skip = true, true, skip || !mapped
			case suf == "noev":
				noEv = true
			case suf == "nopromote":
				pcap, skip = -1, skip || !mapped
			case strings.HasPrefix(suf, "promote") && err == nil && k > 0:
				pcap, skip = k, skip || !mapped
			default:
				base = ""
			}
		}
		if base != "old" && base != "new" {
			return fmt.Errorf("STRATA_BENCH_HOSTGAP: %q is not old|new[+nopromote|+promoteN][+lag][+noev][+argmax][+ahead|+aheadN][+land|+landN][+poll][+nop][+late|+latewait][+pend]", md)
		}
		if skip {
			continue
		}
		eng.SetStartProbe(lag)
		eng.SetSyncProbe(pend)
		if err := eng.SetSyncPoll(poll); err != nil {
			return err
		}
		if mapped {
			if err := eng.SetTablesNop(nop); err != nil {
				return err
			}
			if err := eng.SetLateBatch(late, lateWait); err != nil {
				return err
			}
		}
		eng.SetLaunchFirst(base == "new")
		if err := eng.SetMapAhead(ahead); err != nil {
			return err
		}
		if err := eng.SetMapAheadK(aheadK); err != nil {
			return err
		}
		if err := eng.SetMapLand(land); err != nil {
			return err
		}
		eng.SetLandPromote(true)
		if mapped {
			eng.SetMapPromote(pcap)
			if err := eng.ResetCache(); err != nil {
				return err
			}
		}
		if err := eng.Reset(); err != nil {
			return err
		}
		l, err := eng.Forward(prompt)
		if err != nil {
			return err
		}
		if err := eng.SetTokenTimes(!noEv); err != nil {
			return err
		}
		eng.ResetStats()
		toks := make([]int32, 0, n)
		t0 := time.Now()
		id := argmax(l)
		for i := 0; i < n; i++ {
			toks = append(toks, id)
			if gpuArgmax {
				if id, err = eng.ForwardArgmax([]int32{id}, len(l)); err != nil {
					return err
				}
				continue
			}
			if l, err = eng.Forward([]int32{id}); err != nil {
				return err
			}
			id = argmax(l)
		}
		caller := time.Since(t0).Seconds() * 1e3 / float64(n)
		s := eng.Stats()
		if err := eng.SetTokenTimes(false); err != nil {
			return err
		}
		row("decode hostgap="+md, s)
		if first == nil {
			first = toks
		}
		p := s.Phases
		us := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(max(1, p.Steps)) }
		dms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(max(1, p.Tokens)) }
		line := fmt.Sprintf("hostgap=%s: µs/step: between %.1f, embed %.1f, tables %.1f, submit %.1f, start lag %.1f, check %.1f, lookup %.1f, ahead %.1f, sync %.1f, after %.1f; "+
			"steps %d, launched before their walk %d; device ms/token (events, %d tokens): busy %.3f, tail %.3f, idle %.3f; wall ms/token %.3f, caller %.3f; copy ms/token %.3f; tokens equal to %s's: %v",
			md, us(p.Between), us(p.Embed), us(p.Tables), us(p.Submit), us(p.StartLag), us(p.Check), us(p.Lookup), us(p.Ahead), us(p.Sync), us(p.After),
			p.Steps, p.Launched, p.Tokens, dms(p.Busy), dms(p.Tail), dms(p.Idle), s.Wall.Seconds()*1e3/float64(max(1, s.Tokens)), caller,
			s.CopyMs/float64(max(1, s.Tokens)), strings.Split(modes, ",")[0], slices.Equal(toks, first))
		line += fmt.Sprintf("; graph launches %d, captures %d, graph error %v", s.Graphs, s.Captures, eng.GraphErr())
		line += fmt.Sprintf("; idle > 0.5 ms in %d tokens, longest %.3f ms; hit rate %.4f, copied MB/token %.2f, batches %d, lookups held back %d",
			p.IdleLong, p.IdleMax.Seconds()*1e3, float64(s.Hits)/float64(max(1, s.Hits+s.Misses)), float64(s.CopiedBytes)/1e6/float64(max(1, s.Tokens)), s.MapBatches, s.MapHeld)
		if pend {
			line += fmt.Sprintf("; syncs returning with a batch out %d, its last group pending %d", p.BatchSteps, p.BatchAtSync)
		}
		if s.AheadPredicted > 0 {
			line += fmt.Sprintf("; look-ahead: predicted %d, used %d (%.3f), copied %d (%.1f/token), of them used %d; misses %d (%.3f covered)",
				s.AheadPredicted, s.AheadRight, float64(s.AheadRight)/float64(s.AheadPredicted), s.AheadFetched, float64(s.AheadFetched)/float64(max(1, s.Tokens)),
				s.AheadUseful, s.AheadMisses, float64(s.AheadUseful)/float64(max(1, s.AheadMisses)))
		}
		if s.LandReserved > 0 {
			line += fmt.Sprintf("; landing: landed %d (%.1f/token), reserved %d (%.1f/token)", s.Landed, float64(s.Landed)/float64(max(1, s.Tokens)),
				s.LandReserved, float64(s.LandReserved)/float64(max(1, s.Tokens)))
		}
		fmt.Fprintf(bins, "%s\n", line)
		fmt.Println("PHASES " + line)
	}
	if err := eng.SetMapAhead(false); err != nil {
		return err
	}
	if err := eng.SetMapAheadK(0); err != nil {
		return err
	}
	if err := eng.SetMapLand(land0); err != nil {
		return err
	}
	eng.SetLandPromote(promote0)
	eng.SetLaunchFirst(true)
	eng.SetStartProbe(false)
	eng.SetSyncProbe(false)
	if err := eng.SetSyncPoll(false); err != nil {
		return err
	}
	if mapped {
		eng.SetMapPromote(promote)
		if err := eng.SetTablesNop(false); err != nil {
			return err
		}
		if err := eng.SetLateBatch(lateOn, lateWait0); err != nil {
			return err
		}
	}
	return nil
}

// decodeMode is decodeTimed with the greedy token taken either from the logits (Forward
// and the host's argmax, as decodeTimed) or on the GPU (argmax: ForwardArgmax over the
// whole vocabulary); the times are the caller's, around the call and its argmax.
func decodeMode(eng *mgpu.Engine, prompt []int32, n int, gpuArgmax bool) ([]float64, error) {
	if !gpuArgmax {
		return decodeTimed(eng, prompt, n)
	}
	if err := eng.Reset(); err != nil {
		return nil, err
	}
	id, err := eng.ForwardArgmax(prompt, eng.Vocab())
	if err != nil {
		return nil, err
	}
	eng.ResetStats()
	ms := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if id, err = eng.ForwardArgmax([]int32{id}, eng.Vocab()); err != nil {
			return nil, err
		}
		ms = append(ms, time.Since(t0).Seconds()*1e3)
	}
	return ms, nil
}

// kernelTable writes the device time per token by kernel of s (Options.KernelTimes) as a
// Markdown table under title.
func kernelTable(w *strings.Builder, title string, s mgpu.Stats) {
	var keys []string
	var total float64
	for k, v := range s.Kernels {
		keys = append(keys, k)
		total += v.Ms
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(s.Kernels[b].Ms, s.Kernels[a].Ms) })
	fmt.Fprintf(w, "\n%s: device time per token by kernel (events around each launch), %.3f ms in all\n\n| kernel | launches/token | µs/token | µs/launch | share |\n|---|---:|---:|---:|---:|\n", title, total/float64(max(1, s.Tokens)))
	for _, k := range keys {
		v := s.Kernels[k]
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f | %.1f%% |\n", k, float64(v.Launches)/float64(max(1, s.Tokens)), v.Ms*1e3/float64(max(1, s.Tokens)), v.Ms*1e3/float64(v.Launches), 100*v.Ms/total)
	}
	fmt.Print(w.String()[strings.LastIndex(w.String(), "\n"+title):])
}

// positionBins renders per-token times ms (token i at position first+i) as the mean of
// each run of bin tokens: " lo–hi mean;" per bin.
func positionBins(ms []float64, bin, first int) string {
	var line string
	for lo := 0; lo < len(ms); lo += bin {
		hi := min(lo+bin, len(ms))
		var sum float64
		for _, v := range ms[lo:hi] {
			sum += v
		}
		line += fmt.Sprintf(" %d–%d %.3f;", first+lo, first+hi-1, sum/float64(hi-lo))
	}
	return line
}
