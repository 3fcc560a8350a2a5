package gpu

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// TestPrefillTileChoice: every tile the choice table names exists on the emulated target
// (sm_90) with its family's block size and the BN its name says, the AMD targets fall back
// to r64t64 where they lack the chosen tile, tileShape reads every prefill variant of
// kernels/abi, and the picks at the lengths the table brackets.
func TestPrefillTileChoice(t *testing.T) {
	for _, co := range abi.CodeObjects {
		if !slices.Contains(mmqFamilies, co.Family) && co.Family != "moe_prefill" {
			continue
		}
		for _, v := range co.Variants {
			bm, bn, ok := tileShape(v.Name)
			if !ok || !strings.Contains(v.Name, fmt.Sprintf("_r%dt%d", bm, bn)) {
				t.Errorf("%s/%s/%s: tileShape gives %d, %d, %v", co.Target, co.Family, v.Name, bm, bn, ok)
			}
		}
	}
	for _, target := range abi.TargetNames() {
		for typ, c := range mmqChoice {
			m, ok := mmqTilesFor(target, typ)
			if !ok {
				t.Fatalf("%s: no mmq tiles for %s", target, typ)
			}
			if m.t64.bm != 64 || m.t64.bn != 64 || m.t64.threads != abi.MmqThreads {
				t.Errorf("%s %s: t64 tile %+v", target, typ, m.t64)
			}
			for i, p := range []ptile{m.short, m.long} {
				fam, tile, _ := strings.Cut(c[i], "/")
				want := fam + "/" + typeVariant[typ] + "_mma_" + tile
				if _, has := newTile(target, fam, typeVariant[typ]+"_mma_"+tile); !has {
					want = m.t64.key // the target lacks the chosen tile (AMD)
				}
				if p.key != want || p.threads != tileThreads[p.fam] {
					t.Errorf("%s %s column %d: %+v, want %s", target, typ, i, p, want)
				}
			}
			if target == fakeTarget && (m.short.key == m.t64.key || m.long.key == m.t64.key) {
				t.Errorf("%s %s: the choice falls back to r64t64 on the emulated target", target, typ)
			}
		}
	}
	for _, c := range []struct {
		typ  quant.Type
		mode PrefillTiles
		T    int
		want string
	}{{quant.IQ2_XS, TilesBest, 1, "mmq/iq2xs_mma_r64t128"}, {quant.IQ2_XS, TilesBest, 1023, "mmq/iq2xs_mma_r64t128"},
		{quant.IQ2_XS, TilesBest, 1024, "mmq8/iq2xs_mma_r64t128w8"}, {quant.IQ2_XS, TilesT64, 512, "mmq/iq2xs_mma_r64t64"},
		{quant.IQ2_XS, TilesT64, 4096, "mmq/iq2xs_mma_r64t64"}, {quant.IQ2_XS, TilesS8, 512, "mmq/iq2xs_mma_r64t128"},
		{quant.IQ2_XS, TilesS8, 2048, "mmq8/iq2xs_mma_r64t128w8"},
		// Q8_0, Q2_0: mmq8cz, mmq8c in TilesBest; mmq8 in TilesS8 (mmqChoiceS8).
		{quant.Q8_0, TilesBest, 512, "mmq8cz/q80_mma_r64t128w8"}, {quant.Q8_0, TilesBest, 2048, "mmq8cz/q80_mma_r64t128w8"},
		{quant.Q8_0, TilesS8, 512, "mmq8/q80_mma_r64t128w8"}, {quant.Q8_0, TilesS8, 2048, "mmq8/q80_mma_r64t128w8"},
		{quant.Q8_0, TilesT32, 512, "mmq8cz/q80_mma_r64t128w8"}, {quant.Q8_0, TilesT64, 512, "mmq/q80_mma_r64t64"},
		{quant.Q2_0, TilesBest, 512, "mmq8c/q20_mma_r64t128w8"}, {quant.Q2_0, TilesS8, 512, "mmq8/q20_mma_r64t128w8"}} {
		m, _ := mmqTilesFor(fakeTarget, c.typ)
		if p := m.pick(c.mode, c.T); p.key != c.want || p.threads != tileThreads[p.fam] {
			t.Errorf("%s %s at %d tokens: %+v, want %s", c.typ, c.mode, c.T, p, c.want)
		}
	}
	if mo, _ := moeTilesFor(fakeTarget, quant.Q2_0); mo.t48.key != "" || mo.pick(TilesBest, 512*8, 128).bn != 32 {
		t.Errorf("moe_prefill Q2_0 on %s: %+v, r64t48 outside moeT48", fakeTarget, mo)
	}
	mo, _ := moeTilesFor(fakeTarget, quant.IQ2_XS)
	if mo.schedTile() != 32 || mo.t32.threads != abi.MoePrefillThreads || mo.t48.bn != 48 || mo.t48.threads != abi.MoePrefillThreads {
		t.Fatalf("moe_prefill tiles on %s: %+v", fakeTarget, mo)
	}
	for _, c := range []struct {
		mode                   PrefillTiles
		tokens, k, experts, bn int
	}{
		{TilesBest, 512, 8, 128, 48}, {TilesBest, 1023, 8, 128, 48}, {TilesBest, 1024, 8, 128, 64}, {TilesBest, 2048, 8, 128, 64}, // 30B-A3B: 32, 64, 128 pairs per expert
		{TilesBest, 383, 8, 128, 32}, {TilesBest, 384, 8, 128, 48}, // 24 pairs per expert from 384 tokens (moeT48From)
		{TilesBest, 512, 10, 512, 32}, {TilesBest, 1228, 10, 512, 32}, {TilesBest, 1229, 10, 512, 48}, {TilesBest, 3276, 10, 512, 48}, {TilesBest, 3277, 10, 512, 64}, // 80B-A3B: 10 per expert at 512
		{TilesT64, 512, 8, 128, 64}, {TilesT64, 1, 8, 128, 64},
		{TilesT32, 512, 8, 128, 32}, {TilesT32, 1023, 8, 128, 32}, {TilesT32, 1024, 8, 128, 64}, {TilesT32, 3276, 10, 512, 32},
	} {
		if p := mo.pick(c.mode, c.tokens*c.k, c.experts); p.bn != c.bn {
			t.Errorf("%s, %d tokens × %d of %d experts: t%d, want t%d", c.mode, c.tokens, c.k, c.experts, p.bn, c.bn)
		}
	}
	// Q6_K (moePair): TilesBest takes the pair forms r64t32x and r64t48x where it takes r64t32
	// and r64t48, TilesS8 the window forms (session 8's choice), TilesT32 r64t32 throughout.
	q6, _ := moeTilesFor(fakeTarget, quant.Q6_K)
	if q6.p32.key != "moe_prefill/q6k_mma_r64t32"+moePairTile || q6.p48.key != "moe_prefill/q6k_mma_r64t48"+moePairTile || q6.schedTile() != 32 {
		t.Fatalf("moe_prefill Q6_K tiles on %s: %+v", fakeTarget, q6)
	}
	if !slices.Contains(q6.keys(), q6.p48.key) || !slices.Contains(q6.keys(), q6.p32.key) {
		t.Errorf("moe_prefill Q6_K keys %v: the pair tiles are not prepared", q6.keys())
	}
	for _, c := range []struct {
		mode               PrefillTiles
		tokens, k, experts int
		want               string
	}{
		{TilesBest, 512, 8, 128, "q6k_mma_r64t48" + moePairTile}, {TilesBest, 383, 8, 128, "q6k_mma_r64t32" + moePairTile}, {TilesBest, 2048, 8, 128, "q6k_mma_r64t48" + moePairTile},
		{TilesS8, 512, 8, 128, "q6k_mma_r64t48"}, {TilesS8, 383, 8, 128, "q6k_mma_r64t32"}, {TilesS8, 2048, 8, 128, "q6k_mma_r64t64"},
		{TilesT32, 512, 8, 128, "q6k_mma_r64t32"}, {TilesT64, 512, 8, 128, "q6k_mma_r64t64"},
	} {
		if p := q6.pick(c.mode, c.tokens*c.k, c.experts); p.key != "moe_prefill/"+c.want {
			t.Errorf("Q6_K %s, %d tokens × %d of %d experts: %s, want %s", c.mode, c.tokens, c.k, c.experts, p.key, c.want)
		}
	}
	if p := mo.pick(TilesBest, 512*8, 128); p.key != mo.t48.key || mo.p32.key != "" || mo.p48.key != "" {
		t.Errorf("IQ2_XS (outside moePair): %+v, picks %s", mo, p.key)
	}
	for _, target := range abi.TargetNames() {
		if mo, ok := moeTilesFor(target, quant.IQ2_XS); ok && mo.t32.key == "" && mo.pick(TilesBest, 512*8, 128).key != mo.t64.key {
			t.Errorf("%s: no t32 tile, and the pick is not r64t64", target)
		}
	}
}

// TestPrefillScheduleSized: the schedule prefillNeeds plans holds moe_prefill's contract
// (2·n_expert + 1 + 2·max_tiles) for the largest launch of a chunk — every token, every
// expert of the widest launch (maxStack, or n_expert through the tables) — at the smallest
// token tile (t32) at the 30B-A3B and 80B-A3B shapes; sized for t64, it would not.
func TestPrefillScheduleSized(t *testing.T) {
	for _, name := range []string{"qwen3-30b-a3b", "qwen3-next-80b-a3b", "tiny"} {
		s := synth.Presets[name]
		c := model.Config{Arch: s.Arch, Embd: s.Embd, Heads: s.Heads, HeadsKV: s.HeadsKV, HeadDim: s.HeadDim, Experts: s.Experts,
			ExpertsUsed: s.ExpertsUsed, ExpertFF: s.ExpertFF, SharedFF: s.SharedFF, LinKHeads: s.LinKHeads, LinVHeads: s.LinVHeads,
			LinKDim: s.LinKDim, LinVDim: s.LinVDim}
		for _, stack := range []int{maxStack, c.Experts} { // the default, and the emulator tests' exact sizing
			old := maxStack
			maxStack = stack
			for _, n := range []int{16, DefaultChunk} {
				span := max(maxStack, c.Experts)
				sched := func(bn int) uint64 {
					for _, nd := range prefillNeeds(&c, n, bn) {
						if nd.Name == bufPSched {
							return nd.Bytes
						}
					}
					t.Fatal("no schedule planned")
					return 0
				}
				need := func(bn int) uint64 { return 4 * uint64(2*span+1+2*maxTiles(n*c.ExpertsUsed, span, bn)) }
				if sched(32) < need(32) || sched(64) < need(64) {
					t.Errorf("%s, stack %d, chunk %d: schedule %d bytes (t32) / %d (t64), contract %d / %d", name, stack, n, sched(32), sched(64), need(32), need(64))
				}
				if n*c.ExpertsUsed > 32 && sched(64) >= need(32) {
					t.Errorf("%s, stack %d, chunk %d: a t64-sized schedule (%d bytes) holds the t32 contract (%d): this test proves nothing", name, stack, n, sched(64), need(32))
				}
			}
			maxStack = old
		}
	}
}

// tileShapeSource writes a tiny qwen3moe with 4 experts, all 4 used, of type typ: a chunk
// of 64 tokens has 64 pairs per expert (moe_prefill r64t64 in TilesBest), one of 60 has 60
// and one of 8 has 8 (r64t32).
func tileShapeSource(t *testing.T, typ quant.Type) *model.GGUFSource {
	shp := synth.Presets["tiny"]
	shp.Experts = 4
	return shapeSource(t, "tiles-"+typ.String(), shp, synth.Options{ExpertType: typ, Seed: 11})
}

// TestEngineEmulatedTiles runs a 72-token prompt (chunks of 64 and 8) and decode steps on
// the emulator, on one engine per configuration, in TilesT64 then TilesBest (then TilesT64
// again, resident) (SetPrefillTiles between prompts): resident (direct stacks), through the slot tables
// with the experts streamed (token ranges), and with moe_prefill's stack at exactly the
// experts (so the plan's schedule holds exactly the widest launch's). The emulator checks
// every launch's grid against the variant's tile, its block against the family's threads
// and moe_prefill's schedule against the plan. Both modes compute the same products: their
// logits are bitwise equal. TilesT64 launches only r64t64 tiles; TilesBest launches mmq8cz
// for the Q8_0 projections (TilesS8, resident only, mmq8) and moe_prefill r64t32 and r64t64
// (64 tokens: 64 pairs per expert). Then an engine with chunks of 60 (r64t32) and the plan's
// schedule cut to a t64-sized one fails in TilesBest and passes in TilesT64, and engines
// whose mmq8 or mmq8cz tile claims 128 threads fail:
// the checks would catch a t32 tile on a t64 schedule and a 256-thread kernel launched
// with 128.
func TestEngineEmulatedTiles(t *testing.T) {
	src := tileShapeSource(t, quant.Q2_0)
	prompt := make([]int32, 72)
	for i := range prompt {
		prompt[i] = int32(i*37%500 + 3)
	}
	type cfg struct {
		name  string
		chunk int
		slots int
		stack int
		mode  PrefillTables
		src   *model.GGUFSource // nil: src (Q2_0 experts)
	}
	run := func(c cfg, setup func(*Engine, *fakeDriver), modes ...PrefillTiles) ([][][]float32, []map[string]int, error) {
		old := maxStack
		maxStack = c.stack
		defer func() { maxStack = old }()
		dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
		fake.emu = newEmu()
		s := src
		if c.src != nil {
			s = c.src
		}
		eng, err := Load(dev, s, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 96, Budget: 256 << 20, Reserve: 1 << 20, MaxExpert: c.slots,
			Chunk: c.chunk, Misses: MissCopy, PrefillTiles: TilesT64})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		fake.emu.watch(eng)
		eng.SetPrefillTables(c.mode)
		if setup != nil {
			setup(eng, fake)
		}
		if c.slots > 0 && eng.resident {
			t.Fatalf("%s: %d slots hold every expert", c.name, eng.Plan().Slots)
		}
		allocs := len(fake.allocs)
		var logs [][][]float32
		var launched []map[string]int
		for _, mode := range modes {
			eng.SetPrefillTiles(mode)
			if err := eng.Reset(); err != nil {
				t.Fatal(err)
			}
			before := map[string]int{}
			for k, v := range fake.launches {
				before[k] = v
			}
			var ls [][]float32
			l, err := eng.Forward(prompt)
			for i := 0; i < 3 && err == nil; i++ {
				ls = append(ls, l)
				l, err = eng.Forward([]int32{argmaxF(l)})
			}
			if err == nil {
				err = fake.emu.err
			}
			if err != nil {
				return logs, launched, fmt.Errorf("%s: %w", mode, err)
			}
			logs = append(logs, ls)
			got := map[string]int{}
			for k, v := range fake.launches {
				if d := v - before[k]; d > 0 && (strings.HasPrefix(k, "strata_mmq") || strings.HasPrefix(k, "strata_moe_prefill")) {
					got[k] = d
				}
			}
			launched = append(launched, got)
		}
		if len(fake.allocs) != allocs {
			t.Errorf("%s: %d device allocations after sizing", c.name, len(fake.allocs)-allocs)
		}
		return logs, launched, nil
	}
	K := synth.Presets["tiny"].ExpertsUsed
	for _, c := range []cfg{{"resident", 64, 0, 1024, TablesAuto, nil}, {"streamed", 64, K, 1024, TablesAuto, nil}, {"exact-stack", 64, 0, 4, TablesAuto, nil}} {
		t.Run(c.name, func(t *testing.T) {
			modes := []PrefillTiles{TilesT64, TilesBest}
			if c.name == "resident" {
				modes = append(modes, TilesT64, TilesS8)
			}
			logs, launched, err := run(c, nil, modes...)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(logs); i++ {
				sameLogits(t, fmt.Sprintf("mode run %d against the first (t64)", i), logs[i], logs[0])
			}
			for i, got := range launched {
				mode := modes[i]
				best := mode != TilesT64 // TilesBest or TilesS8
				var t32, t64moe, w8, cz, mmq64 int
				for k, n := range got {
					switch {
					case strings.HasPrefix(k, "strata_moe_prefill") && strings.HasSuffix(k, "_r64t32"):
						t32 += n
					case strings.HasPrefix(k, "strata_moe_prefill") && strings.HasSuffix(k, "_r64t64"):
						t64moe += n
					case strings.HasPrefix(k, "strata_mmq8_q80_") && strings.HasSuffix(k, "_r64t128w8"):
						w8 += n
					case strings.HasPrefix(k, "strata_mmq8cz_q80_") && strings.HasSuffix(k, "_r64t128w8"):
						cz += n
					case strings.HasPrefix(k, "strata_mmq_q80_") && strings.HasSuffix(k, "_r64t64"):
						mmq64 += n
					default:
						if !best || !strings.HasPrefix(k, "strata_mmq") {
							t.Errorf("mode run %d launched %s ×%d", i, k, n)
						}
					}
				}
				// Q8_0's projections: mmq8cz in TilesBest, mmq8 in TilesS8, r64t64 in TilesT64.
				if best && (t32 == 0 || t64moe == 0 || mmq64 != 0 || (mode == TilesBest) != (cz > 0) || (mode == TilesS8) != (w8 > 0)) ||
					!best && (t32 != 0 || t64moe == 0 || w8 != 0 || cz != 0 || mmq64 == 0) {
					t.Errorf("mode run %d (%s): moe_prefill t32 %d, t64 %d launches; Q8_0 mmq8 w8 %d, mmq8cz %d, mmq r64t64 %d", i, mode, t32, t64moe, w8, cz, mmq64)
				}
				t.Logf("mode run %d: %v", i, got)
			}
		})
	}
	// The mmvq fallback (the F16 router): a launch per 8 columns (SetMmvqCols8) against
	// every whole group in one launch through grid z — the same products, bitwise equal
	// logits; the 72-token prompt's chunks of 64 and 8 take 8 + 1 router launches a layer
	// against 1 + 1.
	t.Run("mmvq-cols", func(t *testing.T) {
		c := cfg{"resident", 64, 0, 1024, TablesAuto, nil}
		var logs [][][][]float32
		var mmvq []int
		for _, cols8 := range []bool{true, false} {
			var fk *fakeDriver
			var layers int
			l, _, err := run(c, func(eng *Engine, f *fakeDriver) { eng.SetMmvqCols8(cols8); fk, layers = f, eng.cfg.Layers }, TilesBest)
			if err != nil {
				t.Fatalf("cols8 %v: %v", cols8, err)
			}
			n := 0
			for k, v := range fk.launches {
				if strings.HasPrefix(k, "strata_mmvq") {
					n += v
				}
			}
			logs, mmvq = append(logs, l), append(mmvq, n)
			if len(mmvq) == 2 && mmvq[0]-mmvq[1] != 7*layers {
				t.Errorf("mmvq launches: %d a launch per 8 columns, %d by groups; want %d fewer (7 a layer, %d layers)", mmvq[0], mmvq[1], 7*layers, layers)
			}
		}
		sameLogits(t, "by groups against a launch per 8 columns", logs[1][0], logs[0][0])
	})
	// moe_prefill r64t48 (moeT48From, moeT48): a 72-token prompt in chunks of 40 and 32 has 40
	// and 32 pairs per expert: with IQ2_XS experts r64t48 in TilesBest, r64t32 in TilesT32 (the
	// session-7 choice), the same logits as TilesT64.
	t.Run("t48", func(t *testing.T) {
		logs, launched, err := run(cfg{"resident", 40, 0, 1024, TablesAuto, tileShapeSource(t, quant.IQ2_XS)}, nil, TilesT64, TilesBest, TilesT32)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(logs); i++ {
			sameLogits(t, fmt.Sprintf("mode run %d against the first (t64)", i), logs[i], logs[0])
		}
		moe := func(got map[string]int, tile string) (n int) {
			for k, v := range got {
				if strings.HasPrefix(k, "strata_moe_prefill") && strings.HasSuffix(k, "_"+tile) {
					n += v
				}
			}
			return n
		}
		for i, want := range []string{"r64t64", "r64t48", "r64t32"} {
			for _, tile := range []string{"r64t64", "r64t48", "r64t32"} {
				if n := moe(launched[i], tile); (n != 0) != (tile == want) {
					t.Errorf("mode run %d: moe_prefill %s launched %d times, want only %s", i, tile, n, want)
				}
			}
		}
	})
	t.Run("t64-schedule", func(t *testing.T) {
		c := cfg{"exact-stack", 60, 0, 4, TablesAuto, nil}
		cut := func(eng *Engine, fake *fakeDriver) {
			for _, nd := range prefillNeeds(&eng.cfg, eng.chunk, 64) {
				for i, p := range fake.emu.parts {
					if p.name == bufPSched && nd.Name == bufPSched {
						if p.lo+nd.Bytes >= p.hi {
							t.Fatalf("the t64-sized schedule (%d bytes) is no smaller than the plan's (%d)", nd.Bytes, p.hi-p.lo)
						}
						fake.emu.parts[i].hi = p.lo + nd.Bytes
					}
				}
			}
		}
		if _, _, err := run(c, cut, TilesT64); err != nil {
			t.Fatalf("r64t64 on a t64-sized schedule: %v", err)
		}
		if _, _, err := run(c, cut, TilesBest); err == nil || !strings.Contains(err.Error(), "schedule") {
			t.Fatalf("r64t32 on a t64-sized schedule: %v, want the emulator's schedule error", err)
		}
	})
	for _, c := range []struct {
		fam  string
		mode PrefillTiles
	}{{"mmq8", TilesS8}, {"mmq8cz", TilesBest}} {
		t.Run(c.fam+"-128-threads", func(t *testing.T) {
			old := tileThreads[c.fam]
			tileThreads[c.fam] = abi.MmqThreads
			defer func() { tileThreads[c.fam] = old }()
			if _, _, err := run(cfg{"resident", 64, 0, 1024, TablesAuto, nil}, nil, c.mode); err == nil || !strings.Contains(err.Error(), "block") {
				t.Fatalf("%s launched with 128 threads: %v, want the emulator's block error", c.fam, err)
			}
		})
	}
}
