package gpu

import (
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestEngineAttnPrep: decode attention through attention_decode's prep and reduceq (the
// default) computes the same bits as through the separate norm, rope, store and
// quantize_q8_1 launches (Options.NoAttnPrep) — the emulator renders both from the same
// f32 operations — with fewer launches: per attention layer prep replaces the two norms,
// the rope launches (one when q and k are adjacent, qwen3moe's fused q|k|v; two for
// qwen3next) and store, and reduceq replaces reduce and quantize_q8_1. Through graphs, the
// path before prep updates 3 nodes per attention layer a replay (store's position too),
// prep 2; and one engine switched between the two paths every step (Engine.SetAttnPrep)
// captures a graph per path and computes the same bits again.
func TestEngineAttnPrep(t *testing.T) {
	const steps = 8
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			old := runGraph(t, preset, Options{NoGraph: true, NoAttnPrep: true}, nil, steps, true, false)
			if old.err != nil {
				t.Fatal(old.err)
			}
			prep := runGraph(t, preset, Options{NoGraph: true}, nil, steps, true, false)
			if prep.err != nil {
				t.Fatal(prep.err)
			}
			sameLogits(t, "prep against the launches before it", prep.logs, old.logs)
			attn, ropes := 0, int64(1)
			for _, l := range prep.eng.layers {
				if !l.recurrent {
					attn++
				}
			}
			if preset == "tiny-next" {
				ropes = 2
			}
			tokens := int64(7 + steps)
			ost, ps := old.eng.Stats(), prep.eng.Stats()
			if want := (2 + ropes + 1 + 1 + 1 - 2) * int64(attn) * tokens; ost.Launches-ps.Launches != want {
				t.Errorf("%d launches with prep, %d without: want %d fewer", ps.Launches, ost.Launches, want)
			}
			// Graphs on the path before prep (no ahead walk): 3 updates per attention layer and replay.
			og := runGraph(t, preset, Options{NoAttnPrep: true}, nil, steps, false, true)
			if og.err != nil {
				t.Fatal(og.err)
			}
			sameLogits(t, "graphs without prep against prep", og.logs, old.logs)
			gs := og.eng.Stats()
			if want := 3 * int64(attn) * (tokens - gs.Captures); gs.GraphUpdates != want {
				t.Errorf("without prep: %d node updates in %d replays, want %d", gs.GraphUpdates, tokens-gs.Captures, want)
			}
			// One engine, the path switched before every step: a graph per path and variant.
			sw := switchedRun(t, preset, old.logs, steps, (*Engine).SetAttnPrep, nil)
			// The device ran each path where it was set: prep and reduceq for the 7 prompt
			// tokens and the even steps, store and reduce for the odd ones.
			newTok, oldTok := 7+(steps-1)/2, steps/2
			for sym, want := range map[string]int{abi.SymAttentionDecodePrepF16: newTok, abi.SymAttentionDecodeReduceqF16: newTok,
				abi.SymAttentionDecodeStoreF16: oldTok, abi.SymAttentionDecodeReduceF16: oldTok} {
				if got := sw.fake.launches[sym]; got != want*attn {
					t.Errorf("switched engine: %d launches of %s, want %d (%d tokens × %d attention layers)", got, sym, want*attn, want, attn)
				}
			}
			t.Logf("%d attention layers; launches %d → %d over %d tokens", attn, ost.Launches, ps.Launches, tokens)
		})
	}
}
