package gpu

import (
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestEngineGdnQ81: the decode delta-net's output through gated_delta_net/recurrentq (the
// default) computes the same bits as through recurrent and a quantize_q8_1 launch
// (Options.NoGdnQ81) — the emulator renders recurrentq as recurrent then the same Q8_1
// quantizer — with one launch fewer per delta-net layer and token, in plain launches and
// in graphs; one engine switched between the two paths every step (Engine.SetGdnQ81)
// captures a graph per path, computes the same bits again and runs each kernel where its
// path was set.
func TestEngineGdnQ81(t *testing.T) {
	const steps = 8
	old := runGraph(t, "tiny-next", Options{NoGraph: true, NoGdnQ81: true}, nil, steps, true, false)
	if old.err != nil {
		t.Fatal(old.err)
	}
	neu := runGraph(t, "tiny-next", Options{NoGraph: true}, nil, steps, true, false)
	if neu.err != nil {
		t.Fatal(neu.err)
	}
	sameLogits(t, "recurrentq against recurrent + quantize_q8_1", neu.logs, old.logs)
	rec := 0
	for _, l := range neu.eng.layers {
		if l.recurrent {
			rec++
		}
	}
	if rec == 0 {
		t.Fatal("tiny-next has no delta-net layer")
	}
	tokens := 7 + steps
	if got, want := old.fake.launches[abi.SymGatedDeltaNetRecurrent], rec*tokens; got != want {
		t.Errorf("old path: %d recurrent launches, want %d", got, want)
	}
	if got, want := neu.fake.launches[abi.SymGatedDeltaNetRecurrentq], rec*tokens; got != want || neu.fake.launches[abi.SymGatedDeltaNetRecurrent] != 0 {
		t.Errorf("new path: %d recurrentq launches (want %d), %d recurrent (want 0)", got, want, neu.fake.launches[abi.SymGatedDeltaNetRecurrent])
	}
	if d := old.fake.launches[abi.SymQuantizeQ81F32] - neu.fake.launches[abi.SymQuantizeQ81F32]; d != rec*tokens {
		t.Errorf("quantize_q8_1 launches: %d fewer with recurrentq, want %d", d, rec*tokens)
	}
	if d := old.eng.Stats().Launches - neu.eng.Stats().Launches; d != int64(rec*tokens) {
		t.Errorf("%d launches fewer with recurrentq, want %d", d, rec*tokens)
	}
	// Graphs (no ahead walk) on both paths.
	for _, o := range []Options{{}, {NoGdnQ81: true}} {
		g := runGraph(t, "tiny-next", o, nil, steps, false, true)
		if g.err != nil {
			t.Fatal(g.err)
		}
		sameLogits(t, "graphs", g.logs, old.logs)
	}
	// One engine, the path switched before every step.
	sw := switchedRun(t, "tiny-next", old.logs, steps, (*Engine).SetGdnQ81, nil)
	newTok, oldTok := 7+(steps-1)/2, steps/2
	for sym, want := range map[string]int{abi.SymGatedDeltaNetRecurrentq: newTok, abi.SymGatedDeltaNetRecurrent: oldTok} {
		if got := sw.fake.launches[sym]; got != want*rec {
			t.Errorf("switched engine: %d launches of %s, want %d (%d tokens × %d delta-net layers)", got, sym, want*rec, want, rec)
		}
	}
	t.Logf("%d delta-net layers; launches %d → %d over %d tokens", rec, old.eng.Stats().Launches, neu.eng.Stats().Launches, tokens)
}
