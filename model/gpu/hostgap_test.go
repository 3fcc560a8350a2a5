package gpu

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// TestLaunchFirst: a graph the ahead walk brought current is launched before its walk
// (hostgap.go) with the same bits as the walk-first order; a step whose argmax n differs
// from the one the ahead walk saw walks first; a setting changed through its setter
// between tokens keeps the bits of the walk-first order with the same change; and a
// change the ahead walk's record misses (the graph ran stale) is an error, not a divergence.
func TestLaunchFirst(t *testing.T) {
	const steps = 10
	eachPresetMode(t, func(t *testing.T, preset string, greedy bool) {
		old := runGraph(t, preset, Options{WalkFirst: true}, nil, steps, greedy, false)
		if old.err != nil {
			t.Fatal(old.err)
		}
		nw := runGraph(t, preset, Options{}, nil, steps, greedy, false)
		if nw.err != nil {
			t.Fatal(nw.err)
		}
		sameLogits(t, "launch first against walk first", nw.logs, old.logs)
		os, ns := old.eng.Stats(), nw.eng.Stats()
		if os.Phases.Launched != 0 {
			t.Errorf("walk first: %d graphs launched before their walk", os.Phases.Launched)
		}
		// The prompt's tokens 2–5 find their graph walked ahead (tokens 0 and 1
		// capture the two graphs without logits; token 6 is the first with logits).
		// runGraph's ForwardArgmax alternates n by step, so no decode step finds its
		// graph walked for its own n; with Forward every step after the first does.
		want := 4
		if !greedy {
			want += steps - 1
		}
		if ns.Phases.Launched != want {
			t.Errorf("launch first: %d steps launched before their walk, want %d", ns.Phases.Launched, want)
		}
		if ns.Graphs != os.Graphs || nw.fake.graphLaunch != old.fake.graphLaunch {
			t.Errorf("graph launches: %d (fake %d) launch first, %d (fake %d) walk first", ns.Graphs, nw.fake.graphLaunch, os.Graphs, old.fake.graphLaunch)
		}
		if ns.GraphUpdates > os.GraphUpdates || int64(nw.fake.graphSets) != ns.GraphUpdates {
			t.Errorf("node updates: %d (fake %d) launch first, %d walk first", ns.GraphUpdates, nw.fake.graphSets, os.GraphUpdates)
		}
		if greedy {
			return
		}
		// A setting changed through its setter between tokens: both orders, the same
		// bits (two steps first: Stats made the pending lookup, so the first of them
		// takes the other ids row than the ahead walk did).
		more := func(r graphRun) [][]float32 {
			var logs [][]float32
			l, err := r.eng.LastLogits()
			for i := 0; i < 6 && err == nil; i++ {
				logs = append(logs, append([]float32(nil), l...))
				if i == 2 {
					if r.eng.aheadTg == nil && !r.eng.walkFirst {
						t.Fatal("no ahead walk to launch before the setting changes")
					}
					r.eng.SetAttnSplit(4)
				}
				l, err = r.eng.Forward([]int32{argmaxF(l)})
			}
			if err != nil {
				t.Fatal(err)
			}
			return logs
		}
		sameLogits(t, "after SetAttnSplit", more(nw), more(old))
		// A change the ahead walk's record misses (as a setting kept outside launchSettings
		// would be): the launched graph is stale, the check says so.
		attn := false
		for _, l := range nw.eng.layers {
			attn = attn || !l.recurrent
		}
		if !attn {
			t.Fatal("the preset has no attention layer to change")
		}
		nw.eng.attnSplit = 2
		nw.eng.aheadSet = nw.eng.launchSettings
		l, err := nw.eng.LastLogits()
		if err == nil {
			_, err = nw.eng.Forward([]int32{argmaxF(l)})
		}
		if err == nil || !strings.Contains(err.Error(), "launched before its walk") {
			t.Fatalf("a setting the ahead walk's record misses: %v", err)
		}
	})
}

// TestMappedLaunchFirst: with mapped misses the launch-first order changes neither the
// bits nor the cache's work: every token's lookup, promotion and copy are those of the
// walk-first order (the order the promotion tests check is unchanged).
func TestMappedLaunchFirst(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			o := Options{MaxExpert: p.Layers * p.Experts / 2, Misses: MissMap}
			o.WalkFirst = true
			old := runMapped(t, preset, quant.Q8_0, o, nil)
			o.WalkFirst = false
			nw := runMapped(t, preset, quant.Q8_0, o, nil)
			if !nw.mapped || nw.resident {
				t.Fatalf("mapped %v, resident %v", nw.mapped, nw.resident)
			}
			sameLogits(t, "mapped, launch first against walk first", nw.logs, old.logs)
			os, ns := old.stats, nw.stats
			if ns.Hits != os.Hits || ns.Misses != os.Misses || ns.CopiedBytes != os.CopiedBytes || ns.Groups != os.Groups || ns.Syncs != os.Syncs {
				t.Errorf("cache work: launch first hits %d misses %d copied %d groups %d syncs %d; walk first %d %d %d %d %d",
					ns.Hits, ns.Misses, ns.CopiedBytes, ns.Groups, ns.Syncs, os.Hits, os.Misses, os.CopiedBytes, os.Groups, os.Syncs)
			}
			if os.Phases.Launched != 0 || ns.Phases.Launched == 0 {
				t.Errorf("launched before their walk: %d walk first, %d launch first", os.Phases.Launched, ns.Phases.Launched)
			}
			t.Logf("launch first: %d of %d steps launched before their walk; hits %d misses %d", ns.Phases.Launched, ns.Phases.Steps, ns.Hits, ns.Misses)
		})
	}
}

// TestResetCache: a mapped engine's ResetCache makes the next run from a cold cache the
// first run again (the same logits, hits, misses and copies); SetMapPromote(−1) then reads
// every miss from host memory (no copy, no hit) with the same logits; a resident engine
// refuses ResetCache. The token events measure every decode step.
func TestResetCache(t *testing.T) {
	p := synth.Presets["tiny-next"]
	src := presetSource(t, "tiny-next", quant.Q8_0)
	dev, fake := newFakeDeviceMap(1<<30, fakeTarget, true)
	fake.emu = newEmu()
	eng, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20,
		MaxExpert: p.Layers * p.Experts / 2, Misses: MissMap, Group: 2, NoMapLand: true}) // promotions (landing and ResetCache: TestMapLandSetter)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := eng.SetTokenTimes(true); err != nil {
		t.Fatal(err)
	}
	const steps = 8
	// run: the prompt, then steps greedy tokens; their logits and stats (with the last
	// token's lookup).
	run := func() ([][]float32, Stats) {
		t.Helper()
		if err := eng.Reset(); err != nil {
			t.Fatal(err)
		}
		l, err := eng.Forward([]int32{104, 101, 108, 108, 111, 32, 119})
		eng.ResetStats()
		var logs [][]float32
		for i := 0; i < steps && err == nil; i++ {
			logs = append(logs, append([]float32(nil), l...))
			l, err = eng.Forward([]int32{argmaxF(l)})
		}
		if err != nil {
			t.Fatal(err)
		}
		eng.flushLookup()
		if fake.emu.err != nil {
			t.Fatal(fake.emu.err)
		}
		return logs, eng.Stats()
	}
	l1, s1 := run()
	if s1.Hits == 0 || s1.CopiedBytes == 0 {
		t.Fatalf("first run: %d hits, %d bytes copied: nothing promoted", s1.Hits, s1.CopiedBytes)
	}
	if s1.Phases.Tokens != steps || s1.Phases.Steps != steps {
		t.Errorf("token events: %d tokens measured, %d steps; want %d", s1.Phases.Tokens, s1.Phases.Steps, steps)
	}
	if err := eng.ResetCache(); err != nil {
		t.Fatal(err)
	}
	eng.SetStartProbe(true) // polls each token's first event: the same work
	l2, s2 := run()
	eng.SetStartProbe(false)
	sameLogits(t, "after ResetCache", l2, l1)
	if s2.Hits != s1.Hits || s2.Misses != s1.Misses || s2.CopiedBytes != s1.CopiedBytes || s2.Groups != s1.Groups {
		t.Errorf("after ResetCache: hits %d misses %d copied %d groups %d; first run %d %d %d %d",
			s2.Hits, s2.Misses, s2.CopiedBytes, s2.Groups, s1.Hits, s1.Misses, s1.CopiedBytes, s1.Groups)
	}
	// A warm run differs (it hits from its first token): the reset did something.
	l3, s3 := run()
	sameLogits(t, "warm", l3, l1)
	if s3.Hits <= s1.Hits {
		t.Errorf("warm run: %d hits, cold %d", s3.Hits, s1.Hits)
	}
	eng.SetMapPromote(-1)
	if err := eng.ResetCache(); err != nil {
		t.Fatal(err)
	}
	l4, s4 := run()
	sameLogits(t, "no promotion", l4, l1)
	if s4.Hits != 0 || s4.CopiedBytes != 0 || s4.Misses != s1.Hits+s1.Misses {
		t.Errorf("no promotion: hits %d, %d bytes copied, misses %d (want %d)", s4.Hits, s4.CopiedBytes, s4.Misses, s1.Hits+s1.Misses)
	}

	res := runGraph(t, "tiny", Options{}, nil, 1, false, false)
	if err := res.eng.ResetCache(); err == nil {
		t.Error("ResetCache on a resident engine: no error")
	}
}

// TestLaunchFirstAfterSetter: a setting changed through its setter between two decode
// tokens makes the next token walk its graph before launching it (the ahead walk brought
// the graph current under the settings before), with the bits of the walk-first order
// under the same change; the token after it launches first again. The setters change
// launches inside one graph (SetMmvqRows8: mmvq's grids; SetAttnSplit: attention_decode's
// split) and the graph key (SetMmvqOld, whose new key is captured at two tokens, the
// alternating ids rows, before it launches first). A setter whose change reached a graph launched
// before its walk would fail the check ("launched before its walk").
func TestLaunchFirstAfterSetter(t *testing.T) {
	setters := []struct {
		name string
		set  func(*Engine)
	}{
		{"SetMmvqRows8", func(e *Engine) { e.SetMmvqRows8(!e.mmvqRows8) }},
		{"SetAttnSplit", func(e *Engine) { e.SetAttnSplit(4) }},
		{"SetMmvqOld", func(e *Engine) { e.SetMmvqOld(!e.mmvqOld) }},
	}
	const flip = 2 // the step before which the setting changes
	for _, preset := range []string{"tiny", "tiny-next"} {
		for _, s := range setters {
			t.Run(preset+"/"+s.name, func(t *testing.T) {
				var logs [2][][]float32
				for i, o := range []Options{{WalkFirst: true}, {}} {
					r := runGraph(t, preset, o, nil, 2, false, false)
					if r.err != nil {
						t.Fatal(r.err)
					}
					e := r.eng
					l, err := e.LastLogits()
					for step := 0; step < 5 && err == nil; step++ {
						logs[i] = append(logs[i], append([]float32(nil), l...))
						before := e.stats.Phases.Launched
						if step == flip {
							if !o.WalkFirst && e.aheadTg == nil {
								t.Fatal("no ahead walk to launch before the setting changes")
							}
							s.set(e)
						}
						l, err = e.Forward([]int32{argmaxF(l)})
						if err != nil || o.WalkFirst || step == 0 {
							continue // step 0 follows runGraph's own steps: not checked
						}
						// step 1 launches first (the control), the flip walks first, the
						// last launches first again (a new graph key: captured twice first)
						if launched := e.stats.Phases.Launched > before; (step == flip) == launched && step != 3 {
							t.Errorf("step %d (%s before step %d): launched before its walk %v", step, s.name, flip, launched)
						}
					}
					if err != nil {
						t.Fatalf("walk first %v: %v", o.WalkFirst, err)
					}
				}
				sameLogits(t, "after "+s.name, logs[1], logs[0])
			})
		}
	}
}

// TestSettersChangeLaunchSettings: every Engine.Set* method writes, of the engine's own
// fields, only launchSettings' (which the ahead walk records with its graph: launch first
// never runs a graph walked under other settings, TestLaunchFirstAfterSetter) or those
// listed here, which change no launch of a decode token. A new setter that keeps its
// setting elsewhere fails here: put the setting in launchSettings, or list it with why it
// changes no launch. (The setters' own writes; the methods they call keep engine state,
// not settings.)
func TestSettersChangeLaunchSettings(t *testing.T) {
	noLaunch := map[string]string{
		"tokTimes":    "SetTokenTimes: events recorded around the launch, outside the graph",
		"tokEv":       "SetTokenTimes: its events",
		"tokPrev":     "SetTokenTimes: its events",
		"tokRec":      "SetTokenTimes: its events",
		"startProbe":  "SetStartProbe: a poll after the launch",
		"mapPromote":  "SetMapPromote: promotions after the launch (mapped.go)",
		"syncPoll":    "SetSyncPoll: the sync after the launch",
		"syncEv":      "SetSyncPoll: its event, recorded after the token",
		"syncProbe":   "SetSyncProbe: a poll after the sync",
		"tablesNop":   "SetTablesNop: a kernel after promote's table uploads, outside the graph",
		"kern":        "SetTablesNop: its kernel's record (fill), launched outside the graph",
		"lateBatch":   "SetLateBatch: promotion copies on the copy stream after the launch",
		"lateWait":    "SetLateBatch: the lookup after the launch waits for them",
		"landM":       "SetMapLand: landing slots are data uploaded before the launch (land.go); expert_fetch's arguments do not change",
		"landPromote": "SetLandPromote: promotions after the launch (mapped.go)",
		"kRow":        "SetOldNorm: the rmsnorm_row kernels launchSettings.oldRowQ81 picks",
	}
	settings := map[string]bool{}
	ty := reflect.TypeOf(launchSettings{})
	for i := 0; i < ty.NumField(); i++ {
		settings[ty.Field(i).Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	setters := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !strings.HasPrefix(fd.Name.Name, "Set") || fd.Body == nil || len(fd.Recv.List[0].Names) == 0 {
				continue
			}
			if st, ok := fd.Recv.List[0].Type.(*ast.StarExpr); !ok {
				continue
			} else if id, ok := st.X.(*ast.Ident); !ok || id.Name != "Engine" {
				continue
			}
			setters++
			recv := fd.Recv.List[0].Names[0].Name
			// field is the engine field x writes (e.f, e.f[i], e.f.g, ...), "" for none.
			field := func(x ast.Expr) string {
				for {
					switch v := x.(type) {
					case *ast.IndexExpr:
						x = v.X
					case *ast.StarExpr:
						x = v.X
					case *ast.ParenExpr:
						x = v.X
					case *ast.SelectorExpr:
						if id, ok := v.X.(*ast.Ident); ok && id.Name == recv {
							return v.Sel.Name
						}
						x = v.X
					default:
						return ""
					}
				}
			}
			check := func(x ast.Expr) {
				f := field(x)
				if f == "" || settings[f] || noLaunch[f] != "" {
					return
				}
				t.Errorf("%s: Engine.%s writes %s, which is not in launchSettings (engine.go): the ahead walk does not record it, so launch first may run a graph walked before it changed", fset.Position(x.Pos()), fd.Name.Name, f)
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch v := n.(type) {
				case *ast.AssignStmt:
					if v.Tok != token.DEFINE {
						for _, l := range v.Lhs {
							check(l)
						}
					}
				case *ast.IncDecStmt:
					check(v.X)
				}
				return true
			})
		}
	}
	if setters < 25 {
		t.Errorf("found %d Engine.Set* methods: the parse missed some", setters)
	}
}
