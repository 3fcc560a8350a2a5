package oracle

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/npy"
)

// q4Prompt is what a qwen4exp oracle records per prompt beyond Prompt.
type q4Prompt struct {
	Selected map[string][][]int    `json:"qsa_selected_gpu"`
	Gaps     map[string][]*float64 `json:"qsa_block_score_gap_gpu"`
	PLERows  map[string][][]uint64 `json:"ple_row_ids"`
	MTP      *q4MTPOracle          `json:"mtp"`
}

type q4MTPOracle struct {
	InputIDs []int32        `json:"input_ids"`
	Top10    [][][2]float64 `json:"top10_per_position"`
	Argmax   []int32        `json:"argmax_per_position"`
	Selected [][]int        `json:"qsa_selected_gpu"`
	Gaps     []*float64     `json:"qsa_block_score_gap_gpu"`
	Router   struct {
		Experts [][]int `json:"topk_experts"` // [t][k]
	} `json:"router_topk_gpu"`
}

// selectionTieGap: an indexer selection whose boundary gap (2nd-kept minus best-dropped
// block score, recorded by the oracle) is below this is ambiguous — float32 rounding of
// the scores (~1e-6 here) could order the blocks either way — and is reported, not
// compared. The spec's tie rule (higher score, then lower block index) is exact only for
// exact ties; the tiny oracle's seeds were chosen with every gap ≥ 1e-3.
const selectionTieGap = 1e-5

// checkQwen4Exp compares a qwen4exp model with an oracle directory in the tiny-qwen4exp
// layout (model/testdata/tiny-qwen4exp/README.md): every stored tensor under the bounds,
// router choices, indexer selections and PLE row ids exactly, greedy ids through the cache,
// and the MTP head.
func checkQwen4Exp(m *model.Model, dir string, b Bounds, f *File, w io.Writer) (Result, error) {
	c := &checker{w: w}
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		return c.res, fmt.Errorf("oracle: %w", err)
	}
	var extra struct {
		Prompts []q4Prompt `json:"prompts"`
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		return c.res, fmt.Errorf("oracle: %s: %w", filepath.Join(dir, "oracle.json"), err)
	}
	H, V, L := m.Cfg.Embd, m.Vocab, m.Cfg.Layers
	HC := m.Streams()
	HH := HC * H
	if b.Quantized {
		fmt.Fprintf(w, "bounds for %s: stored tensors NMSE %.0e, logits NMSE %.0e on positions before the first router or indexer flip; PLE row ids exact; router, selections and greedy ids reported (%s)\n", b.Type, b.LayerNMSE, b.LogitNMSE, b.Why)
	} else {
		fmt.Fprintf(w, "bounds for %s: hidden states, block io, injection weights, PLE and MTP outputs max-rel %.0e; logits %.0e of range; router, indexer selections, PLE row ids and greedy ids exact (%s)\n", b.Type, b.LayerRel, b.LogitRange, b.Why)
	}
	for pi, p := range f.Prompts {
		x := extra.Prompts[pi]
		T := len(p.IDs)
		load := func(name string, shape ...int) (*npy.Array, error) {
			a, err := loadNpy(dir, p.Name+"."+name)
			if err != nil {
				return nil, err
			}
			if !slices.Equal(a.Shape, shape) {
				return nil, fmt.Errorf("oracle: %s.%s has shape %v, the model and prompt imply %v", p.Name, name, a.Shape, shape)
			}
			return a, nil
		}
		st, err := m.NewState(T + len(p.GreedyIDs) + 1)
		if err != nil {
			return c.res, err
		}
		var tr model.Q4Trace
		logits, err := st.ForwardQ4(p.IDs, true, &tr)
		if err != nil {
			return c.res, err
		}
		layers, err := load("layer_outputs", L+1, T, HH)
		if err != nil {
			return c.res, err
		}
		bio, err := load("block_io", L, 4, T, H)
		if err != nil {
			return c.res, err
		}
		inj, err := load("hc_inject", L, 2, T, HC)
		if err != nil {
			return c.res, err
		}
		fh, err := load("final_hidden", T, H)
		if err != nil {
			return c.res, err
		}
		S := (V + 15) / 16
		last, err := load("logits_last", V)
		if err != nil {
			return c.res, err
		}
		stride, err := load("logits_stride16", T, S)
		if err != nil {
			return c.res, err
		}

		// Discrete choices first: they explain any numeric failure below. lim is the first
		// position where a router or indexer choice differs (quantized weights compare
		// smoothly only before it).
		flips, lim := 0, T
		for l := 0; l < L && l < len(p.Router.Experts); l++ {
			for t := 0; t < T; t++ {
				if t >= len(p.Router.Experts[l]) || !sameSet(tr.Experts[l][t], p.Router.Experts[l][t]) {
					flips++
					lim = min(lim, t)
				}
			}
		}
		c.discrete(b, flips == 0 && len(p.Router.Experts) == L, "%s: router top-%d choices at every layer and position: %d differ", p.Name, m.Cfg.ExpertsUsed, flips)
		layerIDs := make([]int, 0, len(x.Selected))
		for k := range x.Selected {
			li, err := strconv.Atoi(k)
			if err != nil || li < 0 || li >= L {
				return c.res, fmt.Errorf("oracle: %s: qsa_selected_gpu has layer %q", p.Name, k)
			}
			layerIDs = append(layerIDs, li)
		}
		sort.Ints(layerIDs)
		for _, li := range layerIDs {
			key := strconv.Itoa(li)
			got, ok := tr.Selected[li]
			if !ok {
				c.report(false, "%s: layer %d: the oracle has indexer selections, the model no QSA layer there", p.Name, li)
				continue
			}
			lim = min(lim, c.selections(b, fmt.Sprintf("%s: layer %d indexer selections", p.Name, li), got, x.Selected[key], x.Gaps[key]))
		}
		for k, want := range x.PLERows {
			bad := 0
			first := -1
			for t := 0; t < T; t++ {
				if t >= len(want) || t >= len(tr.PLERows) || fmt.Sprint(tr.PLERows[t]) != fmt.Sprint(want[t]) {
					bad++
					if first < 0 {
						first = t
					}
				}
			}
			msg := ""
			if first >= 0 && first < len(tr.PLERows) && first < len(want) {
				msg = fmt.Sprintf(" (first at t=%d: got %v want %v)", first, tr.PLERows[first], want[first])
			}
			c.report(bad == 0, "%s: layer %s PLE table row ids at every position: %d differ%s", p.Name, k, bad, msg)
		}

		hidden := func(what string, got, ref []float32, width int) {
			if b.Quantized {
				c.nmse(b.LayerNMSE, p.Name+": "+what, got, ref, width, lim, T)
				return
			}
			rel, at := maxRel(got, ref)
			c.report(rel <= b.LayerRel, "%s: %s: max rel error %.2e (bound %.0e) at [t=%d, %d]", p.Name, what, rel, b.LayerRel, at/width, at%width)
		}
		for l := 0; l <= L; l++ {
			what := "embedding stacks"
			if l > 0 {
				what = fmt.Sprintf("layer %d output stacks", l-1)
			}
			hidden(what, tr.Layers[l], layers.Data[l*T*HH:(l+1)*T*HH], HH)
		}
		names := [4]string{"attention input", "attention output", "MoE input", "MoE output"}
		for l := 0; l < L; l++ {
			for k := 0; k < 4; k++ {
				o := (l*4 + k) * T * H
				hidden(fmt.Sprintf("layer %d %s", l, names[k]), tr.BlockIO[l][k], bio.Data[o:o+T*H], H)
			}
			for k, side := range [2]string{"attention", "MoE"} {
				o := (l*2 + k) * T * HC
				hidden(fmt.Sprintf("layer %d %s hyper-connection injection weights", l, side), tr.Inject[l][k], inj.Data[o:o+T*HC], HC)
			}
		}
		if tr.PLEOut != nil || fileExists(dir, p.Name+".ple_out") {
			po, err := load("ple_out", T, HH)
			if err != nil {
				return c.res, err
			}
			if tr.PLEOut == nil {
				c.report(false, "%s: the oracle has a PLE output, the model no PLE layer", p.Name)
			} else {
				hidden("PLE output", tr.PLEOut, po.Data, HH)
			}
		}
		hidden("final mixer output (lm_head input)", tr.FinalHidden, fh.Data, H)
		tol := c.logits(p.Name, "", logits, T, V, last.Data, stride.Data, p.Top10, b, lim)

		// MTP: cell t pairs the pre-mixer stacks of position t with mtp.input_ids[t].
		if x.MTP != nil && m.HasMTP() {
			mo := x.MTP
			if len(mo.InputIDs) != T {
				return c.res, fmt.Errorf("oracle: %s: mtp.input_ids has %d ids, the prompt %d", p.Name, len(mo.InputIDs), T)
			}
			mfh, err := load("mtp_final_hidden", T, H)
			if err != nil {
				return c.res, err
			}
			mlast, err := load("mtp_logits_last", V)
			if err != nil {
				return c.res, err
			}
			var mt model.MTPTrace
			ml, _, err := st.MTPForward(tr.Layers[L], mo.InputIDs, true, &mt)
			if err != nil {
				return c.res, err
			}
			bad, mlim := 0, lim
			for t := 0; t < T && t < len(mo.Router.Experts); t++ {
				if !sameSet(mt.Experts[t], mo.Router.Experts[t]) {
					bad++
					mlim = min(mlim, t)
				}
			}
			c.discrete(b, bad == 0 && len(mo.Router.Experts) == T, "%s: MTP router choices at every cell: %d differ", p.Name, bad)
			if mo.Selected != nil {
				mlim = min(mlim, c.selections(b, p.Name+": MTP indexer selections", mt.Selected, mo.Selected, mo.Gaps))
			}
			if b.Quantized {
				c.nmse(b.LayerNMSE, p.Name+": MTP mixer output", mt.FinalHidden, mfh.Data, H, mlim, T)
				if mlim == T {
					e := nmse(ml[(T-1)*V:], mlast.Data)
					c.report(e <= b.LogitNMSE, "%s: MTP logits last cell, all ids: NMSE %.2e (bound %.0e)", p.Name, e, b.LogitNMSE)
				}
			} else {
				hidden("MTP mixer output", mt.FinalHidden, mfh.Data, H)
				lo, hi := minMax(mlast.Data)
				mtol := b.LogitRange * float64(hi-lo)
				d, id := maxAbs(ml[(T-1)*V:], mlast.Data)
				c.report(d <= mtol, "%s: MTP logits last cell, all ids: max |diff| %.2e (bound %.2e) at id %d", p.Name, d, mtol, id)
				mism := 0
				for t := 0; t < T && t < len(mo.Top10); t++ {
					top := mo.Top10[t]
					if top[0][1]-top[1][1] > 2*mtol && argmax(ml[t*V:(t+1)*V]) != int(top[0][0]) {
						mism++
					}
				}
				c.report(mism == 0, "%s: MTP argmax at every cell whose reference margin exceeds 2×bound: %d mismatches", p.Name, mism)
			}
		} else if x.MTP != nil {
			c.report(false, "%s: the oracle has MTP results, the model no MTP head", p.Name)
		}

		// Greedy continuation through the cache.
		if err := c.greedy(&p, b.Quantized, tol, logits[(T-1)*V:T*V], func(next int32) ([]float32, error) {
			return st.ForwardQ4([]int32{next}, false, nil)
		}); err != nil {
			return c.res, err
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", c.res.Passed, c.res.Failed)
	return c.res, nil
}

// discrete reports an exact comparison of discrete choices; for quantized weights, whose
// choices may legitimately flip, it is information only.
func (c *checker) discrete(b Bounds, ok bool, format string, args ...any) {
	if b.Quantized {
		fmt.Fprintf(c.w, "info "+format+"\n", args...)
		return
	}
	c.report(ok, format, args...)
}

// nmse reports ‖got−ref‖²/‖ref‖² over the first n of T rows (width values each).
func (c *checker) nmse(bound float64, what string, got, ref []float32, width, n, T int) {
	if n == 0 {
		fmt.Fprintf(c.w, "info %s: no position precedes the first flip; not compared\n", what)
		return
	}
	e := nmse(got[:n*width], ref[:n*width])
	c.report(e <= bound, "%s: NMSE %.2e over %d of %d clean positions (bound %.0e)", what, e, n, T, bound)
}

// selections compares indexer selections exactly, skipping (and counting) queries whose
// recorded boundary gap is below selectionTieGap; it returns the first query that differs
// (len(want) if none).
func (c *checker) selections(b Bounds, what string, got, want [][]int, gaps []*float64) int {
	bad, ambiguous, first := 0, 0, -1
	for t := range want {
		if t < len(gaps) && gaps[t] != nil && *gaps[t] < selectionTieGap {
			ambiguous++
			continue
		}
		if t >= len(got) || fmt.Sprint(got[t]) != fmt.Sprint(want[t]) {
			bad++
			if first < 0 {
				first = t
			}
		}
	}
	msg := ""
	if first >= 0 && first < len(got) {
		msg = fmt.Sprintf(" (first at t=%d: got %v want %v)", first, got[first], want[first])
	}
	c.discrete(b, bad == 0 && len(got) == len(want), "%s at %d queries: %d differ, %d ambiguous (gap < %.0e) not compared%s", what, len(want), bad, ambiguous, selectionTieGap, msg)
	if first < 0 {
		return len(want)
	}
	return first
}

// logits checks the stride-16 logits of every position, the full last-position logits and
// the argmax where the reference margin is clear; it returns the absolute tolerance.
func (c *checker) logits(name, what string, logits []float32, T, V int, last, stride []float32, top10 [][][2]float64, b Bounds, lim int) float64 {
	S := (V + 15) / 16
	sub := make([]float32, T*S)
	for t := 0; t < T; t++ {
		for col := 0; col < S; col++ {
			sub[t*S+col] = logits[t*V+16*col]
		}
	}
	lo, hi := minMax(last)
	rng := float64(hi - lo)
	tol := b.LogitRange * rng
	if b.Quantized {
		c.nmse(b.LogitNMSE, name+": "+what+"logits ids 0,16,32,...", sub, stride, S, lim, T)
		if lim == T {
			e := nmse(logits[(T-1)*V:T*V], last)
			c.report(e <= b.LogitNMSE, "%s: %slogits last position, all ids: NMSE %.2e (bound %.0e)", name, what, e, b.LogitNMSE)
		}
		return tol
	}
	d, at := maxAbs(sub, stride)
	c.report(d <= tol, "%s: %slogits every position, ids 0,16,32,...: max |diff| %.2e (bound %.2e = %.0e of range %.2f) at [t=%d, id %d]", name, what, d, tol, b.LogitRange, rng, at/S, 16*(at%S))
	d, id := maxAbs(logits[(T-1)*V:T*V], last)
	c.report(d <= tol, "%s: %slogits last position, all ids: max |diff| %.2e (bound %.2e) at id %d", name, what, d, tol, id)
	mism := 0
	for t := 0; t < T && t < len(top10); t++ {
		top := top10[t]
		if top[0][1]-top[1][1] > 2*tol && argmax(logits[t*V:(t+1)*V]) != int(top[0][0]) {
			mism++
		}
	}
	c.report(mism == 0, "%s: %sargmax at every position whose reference margin exceeds 2×bound: %d mismatches", name, what, mism)
	return tol
}

func fileExists(dir, name string) bool {
	for _, n := range []string{name + ".npy", name + ".npy.gz"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// Q8_0 for qwen4exp, declared from a measurement on tiny-qwen4exp (all three prompts,
// positions before the first router or indexer flip): Q8_0 rounding is ≈ 2.5e-5 NMSE per
// matrix product (see the qwen3moe entry); a qwen4exp layer chains about 20 products (two
// hyper-connection reads of three products each, the mixer's four to six, the MoE's three
// plus the shared expert's), and its DeltaNet layers amplify input errors 3-10× as
// qwen3next's do. Measured: typical 2e-4 … 4e-3, worst 2.6e-2 (eos, layer 1 DeltaNet
// output at the single clean position). Declared 1e-1 as for qwen3next: it still fails a
// wrong decode, scale or layout by orders of magnitude (NMSE ≳ 1); the fine check of the
// engine is the F32 one.
func init() {
	bounds["Q8_0/"+model.ArchQwen4Exp] = Bounds{Type: "Q8_0", Quantized: true, LayerNMSE: 1e-1, LogitNMSE: 1e-1,
		Why: "Q8_0 rounding ≈ 2.5e-5 NMSE per product, ~20 products a layer, DeltaNet amplification 3-10×; measured worst 2.6e-2"}
}
