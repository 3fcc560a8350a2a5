package gpu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// graphRun decodes a prompt and steps greedy tokens on the emulated fake device and
// returns every step's logits; the engine and fake stay open for the caller's checks.
type graphRun struct {
	eng  *Engine
	fake *fakeDriver
	logs [][]float32
	err  error
}

// switchedRun decodes steps−1 greedy tokens after the prompt on one fresh engine of preset with
// set(e, i%2 == 0) called before step i: the path switched every step. Each step's logits must
// equal ref[i] bitwise (ref: the same model's steps on one path), the emulator must report no
// error, and the engine must have run every token as a graph, with a graph per path (≥ 2
// captures) and no graph error. each, when not nil, runs after every step with the stats
// from before it.
func switchedRun(t *testing.T, preset string, ref [][]float32, steps int, set func(e *Engine, on bool), each func(i int, e *Engine, before Stats)) graphRun {
	t.Helper()
	sw := runGraph(t, preset, Options{}, nil, 0, false, false)
	if sw.err != nil {
		t.Fatal(sw.err)
	}
	l := ref[0]
	for i := 1; i < steps; i++ {
		set(sw.eng, i%2 == 0)
		before := sw.eng.Stats()
		got, err := sw.eng.Forward([]int32{argmaxF(l)})
		if err != nil {
			t.Fatal(err)
		}
		sameLogits(t, "switched engine", [][]float32{got}, [][]float32{ref[i]})
		if each != nil {
			each(i, sw.eng, before)
		}
		l = got
	}
	if sw.fake.emu.err != nil {
		t.Fatal(sw.fake.emu.err)
	}
	if s := sw.eng.Stats(); s.Graphs != int64(7+steps-1) || sw.eng.GraphErr() != nil || s.Captures < 2 {
		t.Errorf("switched engine: %d graph launches (want %d), %d captures, error %v", s.Graphs, 7+steps-1, s.Captures, sw.eng.GraphErr())
	}
	return sw
}

func runGraph(t *testing.T, preset string, o Options, setup func(*fakeDriver), steps int, greedy, noAhead bool) graphRun {
	t.Helper()
	src := presetSource(t, preset, quant.Q4_K)
	dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
	fake.emu = newEmu()
	if setup != nil {
		setup(fake)
	}
	o.CODir, o.Ctx, o.Budget, o.Reserve = fakeCODir(t, fakeTarget), 64, 256<<20, 1<<20
	eng, err := Load(dev, src, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	eng.SetGraphAhead(!noAhead)
	r := graphRun{eng: eng, fake: fake}
	prompt := []int32{104, 101, 108, 108, 111, 32, 119}
	var l []float32
	next := func(toks []int32, i int) {
		if !greedy {
			l, r.err = eng.Forward(toks)
			return
		}
		var id int32
		if id, r.err = eng.ForwardArgmax(toks, eng.Vocab()/(1+i%2)); r.err == nil {
			if l, r.err = eng.LastLogits(); r.err == nil && argmaxF(l[:eng.Vocab()/(1+i%2)]) != id {
				t.Errorf("step %d: ForwardArgmax %d is not the logits' argmax", i, id)
			}
		}
	}
	next(prompt, 0)
	for i := 0; i < steps && r.err == nil; i++ {
		r.logs = append(r.logs, append([]float32(nil), l...))
		next([]int32{argmaxF(l)}, i+1)
	}
	if fake.emu.err != nil {
		t.Fatal(fake.emu.err)
	}
	return r
}

func sameLogits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d steps against %d", what, len(a), len(b))
	}
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: step %d logit %d: %v against %v", what, i, j, a[i][j], b[i][j])
			}
		}
	}
}

// TestEngineGraph: resident decode through replayed graphs computes the same bits as
// launch by launch (qwen3moe and qwen3next, Forward and ForwardArgmax over alternating
// vocabulary prefixes), with and without the ahead walk; each token is one graph launch;
// a decode loop captures two variants (the alternating ids row, and conv state) and then
// only updates the kernel nodes that change: attention_decode's split and reduceq per
// attention layer (prep reads the position from the device), and sample/argmax when its n
// changes; ahead, while the token before runs. TestEngineAttnPrep covers the path before
// prep (store, split and reduce change).
// eachPresetMode runs f as the subtests PRESET/forward (logits to the host) and PRESET/argmax
// (greedy, ForwardArgmax) of both tiny presets, the decode modes a graph test covers.
func eachPresetMode(t *testing.T, f func(t *testing.T, preset string, greedy bool)) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		for _, greedy := range []bool{false, true} {
			name := preset + "/forward"
			if greedy {
				name = preset + "/argmax"
			}
			t.Run(name, func(t *testing.T) { f(t, preset, greedy) })
		}
	}
}

func TestEngineGraph(t *testing.T) {
	const steps = 12
	eachPresetMode(t, func(t *testing.T, preset string, greedy bool) {
		plain := runGraph(t, preset, Options{NoGraph: true}, nil, steps, greedy, false)
		if plain.err != nil {
			t.Fatal(plain.err)
		}
		g := runGraph(t, preset, Options{}, nil, steps, greedy, true)
		if g.err != nil {
			t.Fatal(g.err)
		}
		sameLogits(t, "graph against launches", g.logs, plain.logs)
		ahead := runGraph(t, preset, Options{}, nil, steps, greedy, false)
		if ahead.err != nil {
			t.Fatal(ahead.err)
		}
		sameLogits(t, "graph with the ahead walk against launches", ahead.logs, plain.logs)
		as := ahead.eng.Stats()
		// Ahead, every update but those the caller's alternating argmax n makes (argmaxp's
		// grid and arguments, argmaxf's arguments: two nodes) is done while the previous
		// token runs.
		if late := as.GraphUpdates - as.AheadUpdates; (!greedy && late != 0) || late > 2*int64(steps) {
			t.Errorf("ahead: %d of %d node updates made at their own token", late, as.GraphUpdates)
		}
		t.Logf("ahead: %d node updates, %d of them ahead", as.GraphUpdates, as.AheadUpdates)
		ps, gs := plain.eng.Stats(), g.eng.Stats()
		if ps.Graphs != 0 || plain.fake.graphLaunch != 0 {
			t.Errorf("NoGraph: %d graph launches", ps.Graphs)
		}
		// The prompt's 7 tokens and every step: one graph each.
		tokens := int64(7 + steps)
		if gs.Graphs != tokens || int64(g.fake.graphLaunch) != tokens || g.eng.GraphErr() != nil {
			t.Fatalf("%d tokens: %d graph launches (fake %d), error %v", tokens, gs.Graphs, g.fake.graphLaunch, g.eng.GraphErr())
		}
		// Variants: the prompt's tokens without logits (both ids rows), the tokens
		// with logits (both rows).
		if gs.Captures != 4 {
			t.Errorf("%d captures, want 4", gs.Captures)
		}
		attn := 0
		for _, l := range g.eng.layers {
			if !l.recurrent {
				attn++
			}
		}
		// Every replay updates 2 nodes per attention layer; ForwardArgmax's n alternates
		// by step (runGraph), so a replay with logits may update argmax's two nodes
		// (argmaxp, argmaxf) too: at most two updates more a step.
		replays := tokens - gs.Captures
		want := 2 * int64(attn) * replays
		if greedy {
			if gs.GraphUpdates < want || gs.GraphUpdates > want+2*int64(steps) {
				t.Errorf("%d node updates in %d replays, want %d to %d", gs.GraphUpdates, replays, want, want+2*int64(steps))
			}
		} else if gs.GraphUpdates != want {
			t.Errorf("%d node updates in %d replays, want %d (2 per attention layer)", gs.GraphUpdates, replays, want)
		}
		if int64(g.fake.graphSets) != gs.GraphUpdates {
			t.Errorf("%d driver updates, %d counted", g.fake.graphSets, gs.GraphUpdates)
		}
		// Only the captures launched through the Launcher.
		if gs.Launches >= ps.Launches/3 {
			t.Errorf("%d launches with graphs, %d without", gs.Launches, ps.Launches)
		}
		t.Logf("%d tokens: %d captures, %d graph launches, %d node updates, %d launches (without graphs %d)",
			tokens, gs.Captures, gs.Graphs, gs.GraphUpdates, gs.Launches, ps.Launches)
	})
}

// TestEngineGraphOff: where graphs do not apply the engine launches as before with the
// same bits — a backend without graphs (the capture fails once, GraphErr says why), the
// non-resident path, KernelTimes, SetGraph(false) mid-sequence — and a fault a graph launch
// reports poisons the engine as a launch's would.
func TestEngineGraphOff(t *testing.T) {
	const steps = 6
	ref := runGraph(t, "tiny-next", Options{NoGraph: true}, nil, steps, false, false)
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	none := runGraph(t, "tiny-next", Options{}, func(f *fakeDriver) { f.noGraphs = true }, steps, false, false)
	if none.err != nil || !errors.Is(none.eng.GraphErr(), rt.ErrNoGraphs) || none.eng.Stats().Graphs != 0 {
		t.Fatalf("no graphs: %v, graph error %v, %d graph launches", none.err, none.eng.GraphErr(), none.eng.Stats().Graphs)
	}
	sameLogits(t, "backend without graphs", none.logs, ref.logs)
	kt := runGraph(t, "tiny-next", Options{KernelTimes: true}, nil, steps, false, false)
	if kt.err != nil || kt.eng.Stats().Graphs != 0 {
		t.Fatalf("KernelTimes: %v, %d graph launches", kt.err, kt.eng.Stats().Graphs)
	}
	sameLogits(t, "KernelTimes", kt.logs, ref.logs)
	K := synth.Presets["tiny-next"].ExpertsUsed
	streamed := runGraph(t, "tiny-next", Options{MaxExpert: 3 * K, Group: 2}, nil, steps, false, false)
	if streamed.err != nil || streamed.eng.resident || streamed.eng.Stats().Graphs != 0 {
		t.Fatalf("streamed: %v, resident %v, %d graph launches", streamed.err, streamed.eng.resident, streamed.eng.Stats().Graphs)
	}

	// SetGraph(false) after some tokens: the rest launch by launch, the same bits.
	g := runGraph(t, "tiny-next", Options{}, nil, 0, false, false)
	eng := g.eng
	var logs [][]float32
	lg, err := eng.LastLogits()
	for i := 0; i < steps && err == nil; i++ {
		logs = append(logs, append([]float32(nil), lg...))
		if i == steps/2 {
			if err := eng.SetGraph(false); err != nil {
				t.Fatal(err)
			}
		}
		lg, err = eng.Forward([]int32{argmaxF(lg)})
	}
	if err != nil {
		t.Fatal(err)
	}
	sameLogits(t, "SetGraph(false) midway", logs, ref.logs)
	if n := eng.Stats().Graphs; n != int64(7+steps/2) {
		t.Errorf("%d graph launches, want %d", n, 7+steps/2)
	}
	if len(g.fake.graphs) != 0 {
		t.Errorf("SetGraph(false) left %d graphs", len(g.fake.graphs))
	}

	// A device fault reported by a graph launch.
	f := runGraph(t, "tiny", Options{}, nil, 2, false, false)
	f.fake.graphFailing = &rt.Error{Backend: "fake", Call: "graphlaunch", Code: 700, Name: "IllegalAddress"}
	if _, err := f.eng.Forward([]int32{1}); !errors.Is(err, rt.ErrDeviceFault) {
		t.Fatalf("graph launch fault: %v", err)
	}
	if _, err := f.eng.Forward([]int32{1}); !errors.Is(err, rt.ErrDeviceFault) {
		t.Fatalf("after the fault: %v", err)
	}
	if err := f.eng.dev.Synchronize(); err == nil || !strings.Contains(err.Error(), "restart the process") {
		t.Fatalf("the device after the fault: %v", err)
	}
}

// TestEngineGraphKeys: a prompt's tokens without logits replay the same graphs whether
// the caller asked for logits (Forward) or the argmax (ForwardArgmax): only steps with
// logits differ by output mode. A Forward prompt, a ForwardArgmax prompt and a step of
// each capture 2 (no logits, both ids rows) + 1 + 1 graphs; with the output mode in every
// key the second prompt captured its own two.
func TestEngineGraphKeys(t *testing.T) {
	src := presetSource(t, "tiny", quant.Q4_K)
	dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
	fake.emu = newEmu()
	eng, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	prompt := []int32{104, 101, 108, 108, 111, 32, 119}
	if _, err := eng.Forward(prompt); err != nil {
		t.Fatal(err)
	}
	if err := eng.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ForwardArgmax(prompt, eng.Vocab()); err != nil {
		t.Fatal(err)
	}
	if s := eng.Stats(); s.Captures != 4 || eng.GraphErr() != nil {
		t.Fatalf("two prompts, one Forward and one ForwardArgmax: %d captures (want 4), error %v", s.Captures, eng.GraphErr())
	}
	if fake.emu.err != nil {
		t.Fatal(fake.emu.err)
	}
}
