// Package oracle compares the engine with a reference implementation's stored outputs:
// a directory holding oracle.json (prompts, token ids, top-10 logits per position, greedy
// continuations with per-step top-10 logits) and NumPy files of per-layer hidden states,
// final-norm outputs and logits (layout: model/testdata/README.md). Every comparison has
// a bound declared here, per weight type, with its derivation.
package oracle

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/npy"
)

// Bounds are the tolerances of one weight type. Float types (the reference's own
// weights) are held to element-wise bounds; quantized types, whose weights differ from the
// reference's, to NMSE bounds on the positions the quantization has not re-routed.
type Bounds struct {
	Type string
	// Quantized selects the NMSE checks below instead of LayerRel/LogitRange.
	Quantized bool
	// LayerRel bounds max|got−ref| / max|ref| over each stored hidden-state tensor
	// (embedding rows, each layer's output, the final-norm output).
	LayerRel float64
	// LogitRange bounds max|got−ref| over stored logits, as a fraction of the reference
	// logit range (max − min) of that prompt.
	LogitRange float64
	// LayerNMSE and LogitNMSE bound ‖got−ref‖²/‖ref‖² over the clean positions: those
	// before the first position where any layer's router chose a different expert set than
	// the reference (a flip swaps a whole expert's output, and attention and the delta-net
	// recurrence carry it to every later position, so no smooth bound covers it).
	LayerNMSE, LogitNMSE float64
	Why                  string
}

// bounds are declared per weight type.
var bounds = map[string]Bounds{
	// The reference ran in float32 from BF16 weights upcast exactly; F32/BF16 GGUFs (and
	// F16 for these models, whose values are all exact in F16) hold the same weights, so
	// only the order of float32 accumulation differs: dots of ≤ 151936·64 terms with a
	// float64 accumulator here and float32 GEMM there differ by ~1e-6 relative; softmax,
	// rsqrt and exp add a few ulps. 1e-4 relative per layer and 1e-3 of the logit range
	// leave two orders of magnitude of margin and still catch any wrong op or weight.
	// Router choices and greedy ids must be identical.
	"F32":  {Type: "F32", LayerRel: 1e-4, LogitRange: 1e-3, Why: "same weights as the reference; float32 accumulation order only"},
	"BF16": {Type: "BF16", LayerRel: 1e-4, LogitRange: 1e-3, Why: "same weights as the reference; float32 accumulation order only"},
	"F16":  {Type: "F16", LayerRel: 1e-4, LogitRange: 1e-3, Why: "the tiny models' weights are exact in F16; accumulation order only"},
	// Q8_0 rounds each weight to a step of absmax/127 within its 32-block: error uniform in
	// ±absmax/254, RMS absmax/(254·√3) ≈ 2.3e-3·absmax, ≈ 5e-3 of the weight RMS for these
	// weights (|w| in [1/64, 1/4)): NMSE ≈ 2.5e-5 per matrix product. A layer chains about
	// eight products and four layers add up, with RMSNorm and softmax amplifying the errors
	// of small vectors: ~30 × 2.5e-5 × up to 10 ≈ 1e-2 for qwen3moe, declared 2e-2.
	//
	// History, kept visible: the first Q8_0 declaration (max-rel 6e-2 per tensor) failed
	// on router flips, which move a token's MoE output by a whole expert; the comparison
	// now stops at the first flip. The second (NMSE 2e-2 for both) failed for qwen3next:
	// quantizing one tensor class at a time shows each contributes ~1e-4 NMSE at layer 0,
	// and every gated delta-net layer multiplies an input perturbation by ~3-10 on this
	// random model (its recurrent state feeds errors forward), reaching 2e-2 by layer 3
	// before any flip. qwen3next is therefore declared 1e-1: that still fails a wrong
	// decode, scale or layout by orders of magnitude (NMSE ≳ 1), but it is a bound on
	// the model's sensitivity to Q8_0, not a fine check of the engine; the F32 check is that.
	// Greedy ids and step logits are reported, not bounded.
	"Q8_0/qwen3moe":  {Type: "Q8_0", Quantized: true, LayerNMSE: 2e-2, LogitNMSE: 2e-2, Why: "Q8_0 rounding ≈ 2.5e-5 NMSE per product, ~30 products, amplified ≤ 10×"},
	"Q8_0/qwen3next": {Type: "Q8_0", Quantized: true, LayerNMSE: 1e-1, LogitNMSE: 1e-1, Why: "as qwen3moe, times the delta-net layers' measured 3-10× amplification per layer"},
}

// BoundsFor returns the declared bounds for a model of architecture arch whose matrices
// are of weight type t.
func BoundsFor(t, arch string) (Bounds, error) {
	t = strings.ToUpper(t)
	if b, ok := bounds[t]; ok {
		return b, nil
	}
	if b, ok := bounds[t+"/"+arch]; ok {
		return b, nil
	}
	return Bounds{}, fmt.Errorf("oracle: no bound is declared for weight type %s with %s (declared: F32, F16, BF16, Q8_0)", t, arch)
}

// File is oracle.json.
type File struct {
	Seed    int      `json:"seed"`
	Prompts []Prompt `json:"prompts"`
}

// Prompt is one prompt's expected outputs.
type Prompt struct {
	Name      string         `json:"name"`
	Text      string         `json:"text"`
	IDs       []int32        `json:"ids"`
	Top10     [][][2]float64 `json:"top10_per_position"`
	Argmax    []int32        `json:"argmax_per_position"`
	GreedyIDs []int32        `json:"greedy_ids"`
	Router    struct {
		Experts [][][]int `json:"topk_experts"` // [layer][t][k]
	} `json:"router_topk_gpu"`
	GreedySteps []struct {
		Top10     [][2]float64 `json:"top10"`
		LogSumExp float64      `json:"logsumexp"`
	} `json:"greedy_steps"`
}

// Read parses dir/oracle.json.
func Read(dir string) (*File, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("oracle: %s: %w", filepath.Join(dir, "oracle.json"), err)
	}
	if len(f.Prompts) == 0 {
		return nil, fmt.Errorf("oracle: %s has no prompts", filepath.Join(dir, "oracle.json"))
	}
	return &f, nil
}

// Result counts checks.
type Result struct{ Passed, Failed int }

type checker struct {
	w   io.Writer
	res Result
}

func (c *checker) report(ok bool, format string, args ...any) {
	status := "ok  "
	if ok {
		c.res.Passed++
	} else {
		c.res.Failed++
		status = "FAIL"
	}
	fmt.Fprintf(c.w, "%s %s\n", status, fmt.Sprintf(format, args...))
}

// loadNpy reads P.name.npy or P.name.npy.gz from dir.
func loadNpy(dir, name string) (*npy.Array, error) {
	p := filepath.Join(dir, name+".npy")
	if _, err := os.Stat(p); err != nil {
		p += ".gz"
	}
	return npy.ReadFile(p)
}

// Check runs every prompt of the oracle in dir through m and compares all stored
// tensors under b, writing one line per check to w.
func Check(m *model.Model, dir string, b Bounds, w io.Writer) (Result, error) {
	f, err := Read(dir)
	if err != nil {
		return Result{}, err
	}
	if m.Cfg.Arch == model.ArchQwen4Exp {
		return checkQwen4Exp(m, dir, b, f, w)
	}
	c := &checker{w: w}
	H, V, L := m.Cfg.Embd, m.Vocab, m.Cfg.Layers
	if b.Quantized {
		fmt.Fprintf(w, "bounds for %s: hidden-state NMSE %.0e, logit NMSE %.0e on positions before the first router flip (%s)\n", b.Type, b.LayerNMSE, b.LogitNMSE, b.Why)
	} else {
		fmt.Fprintf(w, "bounds for %s: hidden states max-rel %.0e, logits %.0e of range, router and greedy ids exact (%s)\n", b.Type, b.LayerRel, b.LogitRange, b.Why)
	}
	for _, p := range f.Prompts {
		T := len(p.IDs)
		arrays := map[string]*npy.Array{}
		for _, n := range []string{"layer_outputs", "final_norm", "logits_last", "logits_stride16"} {
			if arrays[n], err = loadNpy(dir, p.Name+"."+n); err != nil {
				return c.res, err
			}
		}
		layers, fnorm, last, stride := arrays["layer_outputs"], arrays["final_norm"], arrays["logits_last"], arrays["logits_stride16"]
		if want := []int{L + 1, T, H}; !slices.Equal(layers.Shape, want) {
			return c.res, fmt.Errorf("oracle: %s.layer_outputs has shape %v, the model and prompt imply %v", p.Name, layers.Shape, want)
		}
		S := (V + 15) / 16
		if !slices.Equal(fnorm.Shape, []int{T, H}) || !slices.Equal(last.Shape, []int{V}) || !slices.Equal(stride.Shape, []int{T, S}) {
			return c.res, fmt.Errorf("oracle: %s: final_norm %v, logits_last %v or logits_stride16 %v disagree with T=%d, vocab=%d", p.Name, fnorm.Shape, last.Shape, stride.Shape, T, V)
		}
		if len(p.Router.Experts) != 0 && len(p.Router.Experts) != L {
			return c.res, fmt.Errorf("oracle: %s: router_topk_gpu has %d layers, the model %d", p.Name, len(p.Router.Experts), L)
		}
		st, err := m.NewState(T + len(p.GreedyIDs) + 1)
		if err != nil {
			return c.res, err
		}
		var tr model.Trace
		logits, err := st.Forward(p.IDs, true, &tr)
		if err != nil {
			return c.res, err
		}

		// Router choices; clean[l] = positions before the first flip in layers ≤ l.
		clean := make([]int, L)
		flips, lim := 0, T
		for l := 0; l < L; l++ {
			for t := 0; t < T && len(p.Router.Experts) > 0; t++ {
				if t >= len(p.Router.Experts[l]) || !sameSet(tr.Experts[l][t], p.Router.Experts[l][t]) {
					flips++
					lim = min(lim, t)
				}
			}
			clean[l] = lim
		}
		if len(p.Router.Experts) > 0 {
			if b.Quantized {
				fmt.Fprintf(w, "info %s: router choices differ from the reference at %d (layer, position) pairs; first flip at position %d\n", p.Name, flips, lim)
			} else {
				c.report(flips == 0, "%s: router top-%d choices at every layer and position: %d differ", p.Name, m.Cfg.ExpertsUsed, flips)
			}
		}

		// Hidden states.
		hidden := func(what string, got, ref []float32, n int) {
			if b.Quantized {
				if n == 0 {
					fmt.Fprintf(w, "info %s: %s: no position precedes the first router flip; not compared\n", p.Name, what)
					return
				}
				e := nmse(got[:n*H], ref[:n*H])
				c.report(e <= b.LayerNMSE, "%s: %s: NMSE %.2e over %d clean positions (bound %.0e)", p.Name, what, e, n, b.LayerNMSE)
				return
			}
			rel, at := maxRel(got, ref)
			c.report(rel <= b.LayerRel, "%s: %s: max rel error %.2e (bound %.0e) at [t=%d, %d]", p.Name, what, rel, b.LayerRel, at/H, at%H)
		}
		for l := 0; l <= L; l++ {
			what, n := "embedding", T
			if l > 0 {
				what, n = fmt.Sprintf("layer %d output", l-1), clean[l-1]
			}
			hidden(what, tr.Layers[l], layers.Data[l*T*H:(l+1)*T*H], n)
		}
		hidden("final norm", tr.FinalNorm, fnorm.Data, clean[L-1])

		// Logits.
		sub := make([]float32, T*S)
		for t := 0; t < T; t++ {
			for col := 0; col < S; col++ {
				sub[t*S+col] = logits[t*V+16*col]
			}
		}
		lastGot := logits[(T-1)*V : T*V]
		lo, hi := minMax(last.Data)
		rng := float64(hi - lo)
		tol := b.LogitRange * rng
		if b.Quantized {
			n := clean[L-1]
			e := nmse(sub[:n*S], stride.Data[:n*S])
			if n > 0 {
				c.report(e <= b.LogitNMSE, "%s: logits at %d clean positions, ids 0,16,32,...: NMSE %.2e (bound %.0e)", p.Name, n, e, b.LogitNMSE)
			}
			if n == T {
				e := nmse(lastGot, last.Data)
				c.report(e <= b.LogitNMSE, "%s: logits last position, all ids: NMSE %.2e (bound %.0e)", p.Name, e, b.LogitNMSE)
			} else {
				fmt.Fprintf(w, "info %s: last position follows a router flip; full logits NMSE %.2e (not bounded)\n", p.Name, nmse(lastGot, last.Data))
			}
		} else {
			d, at := maxAbs(sub, stride.Data)
			c.report(d <= tol, "%s: logits every position, ids 0,16,32,...: max |diff| %.2e (bound %.2e = %.0e of range %.2f) at [t=%d, id %d]", p.Name, d, tol, b.LogitRange, rng, at/S, 16*(at%S))
			d, id := maxAbs(lastGot, last.Data)
			c.report(d <= tol, "%s: logits last position, all ids: max |diff| %.2e (bound %.2e) at id %d", p.Name, d, tol, id)
			mism := 0
			for t := 0; t < T && t < len(p.Top10); t++ {
				top := p.Top10[t]
				if top[0][1]-top[1][1] > 2*tol && argmax(logits[t*V:(t+1)*V]) != int(top[0][0]) {
					mism++
				}
			}
			c.report(mism == 0, "%s: argmax at every position whose reference margin exceeds 2×bound: %d mismatches", p.Name, mism)
		}

		// Greedy continuation through the cache: step k's logits produce greedy_ids[k].
		if err := c.greedy(&p, b.Quantized, tol, lastGot, func(next int32) ([]float32, error) {
			return st.Forward([]int32{next}, false, nil)
		}); err != nil {
			return c.res, err
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", c.res.Passed, c.res.Failed)
	return c.res, nil
}

// greedy checks the greedy continuation of p through the cache: from cur, the logits
// after the prompt, each step's argmax must be p.GreedyIDs[k] and its logits must match
// the step's top-10 and logsumexp within tol; step feeds a token and returns the next
// logits. For quantized weights the ids are information only and the logits unbounded.
func (c *checker) greedy(p *Prompt, quantized bool, tol float64, cur []float32, step func(int32) ([]float32, error)) error {
	var got []int32
	worstStep, worstLSE := 0.0, 0.0
	for k := 0; k < len(p.GreedyIDs) && k < len(p.GreedySteps); k++ {
		for _, e := range p.GreedySteps[k].Top10 {
			worstStep = math.Max(worstStep, math.Abs(float64(cur[int(e[0])])-e[1]))
		}
		worstLSE = math.Max(worstLSE, math.Abs(logSumExp(cur)-p.GreedySteps[k].LogSumExp))
		next := int32(argmax(cur))
		got = append(got, next)
		if next != p.GreedyIDs[k] {
			break
		}
		var err error
		if cur, err = step(next); err != nil {
			return err
		}
	}
	if quantized {
		fmt.Fprintf(c.w, "info %s: greedy ids through the cache: got %v want %v (step logits max |diff| %.2e; not bounded)\n", p.Name, got, p.GreedyIDs, worstStep)
		return nil
	}
	c.report(slices.Equal(got, p.GreedyIDs), "%s: greedy ids (prefill, then decode through the cache): got %v want %v", p.Name, got, p.GreedyIDs)
	c.report(worstStep <= tol && worstLSE <= tol, "%s: greedy step logits (top-10 ids) max |diff| %.2e, logsumexp max |diff| %.2e (bound %.2e)", p.Name, worstStep, worstLSE, tol)
	return nil
}

// nmse is ‖got−ref‖²/‖ref‖² (infinite for NaN, or for an empty comparison).
func nmse(got, ref []float32) float64 {
	var num, den float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		num += d * d
		den += float64(ref[i]) * float64(ref[i])
	}
	if len(ref) == 0 || math.IsNaN(num) || den == 0 {
		return math.Inf(1)
	}
	return num / den
}

// maxRel is max|got−ref| / max|ref| and the index of the worst element; NaN counts as infinite.
func maxRel(got, ref []float32) (float64, int) {
	var scale float64
	for _, v := range ref {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	d, i := maxAbs(got, ref)
	if scale == 0 {
		return d, i
	}
	return d / scale, i
}

func maxAbs(got, ref []float32) (float64, int) {
	if len(got) != len(ref) {
		return math.Inf(1), 0
	}
	worst, at := 0.0, 0
	for i := range ref {
		d := math.Abs(float64(got[i]) - float64(ref[i]))
		if math.IsNaN(d) {
			return math.Inf(1), i
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

func minMax(v []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func logSumExp(v []float32) float64 {
	mx := math.Inf(-1)
	for _, x := range v {
		mx = math.Max(mx, float64(x))
	}
	var s float64
	for _, x := range v {
		s += math.Exp(float64(x) - mx)
	}
	return mx + math.Log(s)
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}
