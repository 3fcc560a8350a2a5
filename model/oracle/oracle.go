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

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/npy"
)

// Bounds are the tolerances of one weight type.
type Bounds struct {
	Type string
	// LayerRel bounds max|got−ref| / max|ref| over each stored hidden-state tensor
	// (embedding rows, each layer's output, the final-norm output).
	LayerRel float64
	// LogitRange bounds max|got−ref| over stored logits, as a fraction of the reference
	// logit range (max − min) of that prompt.
	LogitRange float64
	// GreedyExact: greedy ids must match at every step; otherwise they must match up to
	// the first step whose reference top1−top2 margin is within 2·LogitRange·range, where
	// a flip is allowed by the bound (later steps then follow a different sequence).
	GreedyExact bool
	Why         string
}

// bounds are declared per weight type before measurement.
var bounds = map[string]Bounds{
	// The reference ran in float32 from BF16 weights upcast exactly; F32/BF16 GGUFs (and
	// F16 for these models, whose values are all exact in F16) hold the same weights, so
	// only the order of float32 accumulation differs: dots of ≤ 151936·64 terms with a
	// float64 accumulator here and float32 GEMM there differ by ~1e-6 relative; softmax,
	// rsqrt and exp add a few ulps. 1e-4 relative per layer and 1e-3 of the logit range
	// leave two orders of magnitude of margin and still catch any wrong op or weight.
	"F32":  {Type: "F32", LayerRel: 1e-4, LogitRange: 1e-3, GreedyExact: true, Why: "same weights as the reference; float32 accumulation order only"},
	"BF16": {Type: "BF16", LayerRel: 1e-4, LogitRange: 1e-3, GreedyExact: true, Why: "same weights as the reference; float32 accumulation order only"},
	"F16":  {Type: "F16", LayerRel: 1e-4, LogitRange: 1e-3, GreedyExact: true, Why: "the tiny models' weights are exact in F16; accumulation order only"},
	// Q8_0 rounds each weight to a step of absmax/127 within its 32-block: error uniform in
	// ±absmax/254, RMS absmax/(254·√3) ≈ 2.3e-3·absmax. For these weights (|w| in
	// [1/64, 1/4), block absmax ≈ 0.24, RMS ≈ 0.11) that is ≈ 5e-3 of the weight RMS, and a
	// dot product's relative error is about the same. Four layers of attention + MoE
	// through the residual stream compound it to ~1-2e-2 RMS; the max over a tensor is
	// ~3× the RMS. Declared: 6e-2 relative per layer, 5e-2 of the logit range; greedy ids
	// must match until the reference margin falls within the bound.
	"Q8_0": {Type: "Q8_0", LayerRel: 6e-2, LogitRange: 5e-2, Why: "Q8_0 weight rounding ≈ 5e-3 relative per dot, compounded over 4 layers, max ≈ 3× RMS"},
}

// BoundsFor returns the declared bounds for a model whose matrices are of weight type t.
func BoundsFor(t string) (Bounds, error) {
	b, ok := bounds[t]
	if !ok {
		return Bounds{}, fmt.Errorf("oracle: no bound is declared for weight type %s (declared: F32, F16, BF16, Q8_0)", t)
	}
	return b, nil
}

// File is oracle.json.
type File struct {
	Seed    int      `json:"seed"`
	Prompts []Prompt `json:"prompts"`
}

// Prompt is one prompt's expected outputs.
type Prompt struct {
	Name        string         `json:"name"`
	Text        string         `json:"text"`
	IDs         []int32        `json:"ids"`
	Top10       [][][2]float64 `json:"top10_per_position"`
	Argmax      []int32        `json:"argmax_per_position"`
	GreedyIDs   []int32        `json:"greedy_ids"`
	GreedyGap   []float64      `json:"greedy_top1_minus_top2"`
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
	c := &checker{w: w}
	H, V := m.Cfg.Embd, m.Vocab
	fmt.Fprintf(w, "bounds for %s: hidden states max-rel %.0e, logits %.0e of range, greedy %s (%s)\n", b.Type, b.LayerRel, b.LogitRange, map[bool]string{true: "exact", false: "until a margin within the bound"}[b.GreedyExact], b.Why)
	for _, p := range f.Prompts {
		T := len(p.IDs)
		layers, err := loadNpy(dir, p.Name+".layer_outputs")
		if err != nil {
			return c.res, err
		}
		fnorm, err := loadNpy(dir, p.Name+".final_norm")
		if err != nil {
			return c.res, err
		}
		last, err := loadNpy(dir, p.Name+".logits_last")
		if err != nil {
			return c.res, err
		}
		stride, err := loadNpy(dir, p.Name+".logits_stride16")
		if err != nil {
			return c.res, err
		}
		if want := []int{m.Cfg.Layers + 1, T, H}; !eqShape(layers.Shape, want) {
			return c.res, fmt.Errorf("oracle: %s.layer_outputs has shape %v, the model and prompt imply %v", p.Name, layers.Shape, want)
		}
		if !eqShape(fnorm.Shape, []int{T, H}) || !eqShape(last.Shape, []int{V}) || len(stride.Shape) != 2 || stride.Shape[0] != T || stride.Shape[1] != (V+15)/16 {
			return c.res, fmt.Errorf("oracle: %s: final_norm %v, logits_last %v or logits_stride16 %v disagree with T=%d, vocab=%d", p.Name, fnorm.Shape, last.Shape, stride.Shape, T, V)
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
		for l := 0; l <= m.Cfg.Layers; l++ {
			rel, at := maxRel(tr.Layers[l], layers.Data[l*T*H:(l+1)*T*H])
			what := "embedding"
			if l > 0 {
				what = fmt.Sprintf("layer %d output", l-1)
			}
			c.report(rel <= b.LayerRel, "%s: %s: max rel error %.2e (bound %.0e) at [t=%d, %d]", p.Name, what, rel, b.LayerRel, at/H, at%H)
		}
		rel, at := maxRel(tr.FinalNorm, fnorm.Data)
		c.report(rel <= b.LayerRel, "%s: final norm: max rel error %.2e (bound %.0e) at [t=%d, %d]", p.Name, rel, b.LayerRel, at/H, at%H)

		lo, hi := minMax(last.Data)
		rng := float64(hi - lo)
		tol := b.LogitRange * rng
		var worst float64
		worstAt := 0
		for t := 0; t < T; t++ {
			for col := 0; col < stride.Shape[1]; col++ {
				d := math.Abs(float64(logits[t*V+16*col] - stride.Data[t*stride.Shape[1]+col]))
				if d > worst || math.IsNaN(d) {
					worst, worstAt = d, t*V+16*col
				}
			}
		}
		c.report(worst <= tol, "%s: logits every position, ids 0,16,32,...: max |diff| %.2e (bound %.2e = %.0e of range %.2f) at [t=%d, id %d]", p.Name, worst, tol, b.LogitRange, rng, worstAt/V, worstAt%V)
		d, id := maxAbs(logits[(T-1)*V:T*V], last.Data)
		c.report(d <= tol, "%s: logits last position, all ids: max |diff| %.2e (bound %.2e) at id %d", p.Name, d, tol, id)
		// argmax per position, where the reference margin exceeds what the bound allows.
		mism := 0
		for t := 0; t < T && t < len(p.Top10); t++ {
			top := p.Top10[t]
			if top[0][1]-top[1][1] <= 2*tol {
				continue
			}
			if argmax(logits[t*V:(t+1)*V]) != int(top[0][0]) {
				mism++
			}
		}
		c.report(mism == 0, "%s: argmax at every position with a margin above 2×bound: %d mismatches", p.Name, mism)

		// Greedy continuation through the cache: step k's logits produce greedy_ids[k].
		cur := logits[(T-1)*V : T*V]
		var got []int32
		worstStep, worstLSE := 0.0, 0.0
		stopAt := len(p.GreedyIDs)
		for k := 0; k < len(p.GreedyIDs) && k < len(p.GreedySteps); k++ {
			step := p.GreedySteps[k]
			for _, e := range step.Top10 {
				worstStep = math.Max(worstStep, math.Abs(float64(cur[int(e[0])])-e[1]))
			}
			worstLSE = math.Max(worstLSE, math.Abs(logSumExp(cur)-step.LogSumExp))
			next := int32(argmax(cur))
			got = append(got, next)
			if !b.GreedyExact && k < len(p.GreedyGap) && p.GreedyGap[k] <= 2*tol {
				stopAt = k + 1 // a flip here is within the bound; later steps are not comparable
				break
			}
			if next != p.GreedyIDs[k] {
				break
			}
			if cur, err = st.Forward([]int32{next}, false, nil); err != nil {
				return c.res, err
			}
		}
		want := p.GreedyIDs[:stopAt]
		if len(got) > len(want) {
			got = got[:len(want)]
		}
		c.report(eqIDs(got, want), "%s: greedy ids (prefill then decode through the cache), %d steps compared: got %v want %v", p.Name, len(want), got, want)
		c.report(worstStep <= tol && worstLSE <= tol, "%s: greedy step logits (top-10 ids) max |diff| %.2e, logsumexp max |diff| %.2e (bound %.2e)", p.Name, worstStep, worstLSE, tol)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", c.res.Passed, c.res.Failed)
	return c.res, nil
}

func eqShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func eqIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
