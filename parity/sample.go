package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// sample/argmax: the greedy token, as model/sample.go's Temp ≤ 0 path without a
// repetition penalty: the first index holding the largest logit (its loop keeps the first
// strictly larger value), NaN never chosen, 0 when nothing beats −inf.
var sampleArgmax = Bound{Name: "id", Exact: true, Why: `
	A comparison, no arithmetic: the chosen index must be the reference's exactly,
	ties included (lowest index).`}

// sample/topk: model/sample.go's draw (top-k, then top-p and min-p on the temperature-1
// probabilities, softmax at temp, the first candidate where r − Σp < 0), restated in
// float64 by sampleTopKRef with the same host-drawn uniform r per row.
var sampleTopK = Bound{Name: "id", Exact: true, Why: `
	The candidates are a selection (exact), and the kernel's probabilities are float64 with
	an exp within 2 ulp of Go's, in the CPU's order of operations: each cumulative sum is
	within ~64·2⁻⁵² ≈ 1.4e-14 of the reference's. Rows whose r, top-p cut or min-p cut lies
	within 1e-12 of a boundary (where that difference could choose the neighbour; about
	1e-10 of rows) are excluded and counted in the case's log; every other id must be equal.`}

// sample/argmaxp, argmaxf: argmax in two launches (per-block bests, then the best of them),
// each variant's run launching both; the same contract and reference as argmax.
var sampleArgmax2 = Bound{Name: "id", Exact: true, Why: `
	A comparison, no arithmetic: the parts are disjoint shares of the row, each block's
	best is argmax's over its share, and the final step orders the parts' bests as argmax
	orders values (larger value, then lower index; none, −inf and NaN never win), so the
	chosen index must be the reference's exactly, ties included.`}

// argmaxParts is the engine's parts per row for argmaxp (model/gpu: one block per 4096
// logits); the argmaxf variant's cases run min(n, 5) parts instead, so that uneven and
// empty shares are exercised too.
func argmaxParts(n int, final bool) int {
	if final {
		return min(n, 5)
	}
	return (n + 4095) / 4096
}

func init() {
	register(&Family{
		Name:   "sample",
		Bounds: map[string][]Bound{"argmax": {sampleArgmax}, "topk": {sampleTopK}, "argmaxp": {sampleArgmax2}, "argmaxf": {sampleArgmax2}},
		// Dims: rows, n, stride, special (0 none, 1 ties at the max, 2 an all −inf row,
		// 3 NaNs sprinkled, 4 the max in the last element), then topk's settings: top_k,
		// temp·100, top_p·100, min_p·100 (argmax ignores them; top_k = 1 makes topk greedy,
		// so the edge cases prove it too).
		Cases: []Case{
			{"rows=1,n=151936", []int{1, 151936, 151936, 0, 1, 100, 100, 0}},
			{"rows=1,n=151936,ties", []int{1, 151936, 151936, 1, 1, 100, 100, 0}},
			{"rows=4,n=1000,stride=1024,-inf", []int{4, 1000, 1024, 2, 1, 100, 100, 0}},
			{"rows=3,n=32000,nan", []int{3, 32000, 32000, 3, 1, 100, 100, 0}},
			{"rows=2,n=7,last", []int{2, 7, 7, 4, 1, 100, 100, 0}},
			{"rows=1,n=1", []int{1, 1, 1, 0, 1, 100, 100, 0}},
			{"rows=64,n=151936", []int{64, 151936, 151936, 1, 1, 100, 100, 0}},
			{"rows=16,n=151936,k=40,t=0.8,p=0.95,minp=0.05", []int{16, 151936, 151936, 0, 40, 80, 95, 5}},
			{"rows=8,n=151936,k=64,t=1.5", []int{8, 151936, 151936, 0, 64, 150, 100, 0}},
			{"rows=8,n=32000,k=20,t=0.7,p=0.5,ties", []int{8, 32000, 32000, 1, 20, 70, 50, 0}},
			{"rows=4,n=1000,k=1,t=1", []int{4, 1000, 1000, 0, 1, 100, 100, 0}},
			{"rows=3,n=7,k=7,t=2,minp=0.2", []int{3, 7, 7, 0, 7, 200, 0, 20}},
		},
		Run: runSample,
	})
}

// argmaxRef is the greedy choice per row.
func argmaxRef(x []float32, rows, n, stride int) []int32 {
	out := make([]int32, rows)
	for r := 0; r < rows; r++ {
		best, bl := int32(0), math.Inf(-1)
		for i := 0; i < n; i++ {
			if l := float64(x[r*stride+i]); l > bl {
				best, bl = int32(i), l
			}
		}
		out[r] = best
	}
	return out
}

func sampleLogits(rng *rand.Rand, rows, n, stride, special int) []float32 {
	x := make([]float32, rows*stride)
	for r := 0; r < rows; r++ {
		row := x[r*stride : r*stride+n]
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 4)
		}
		switch special {
		case 1: // the max value three times
			m := float32(30)
			for k := 0; k < 3; k++ {
				row[rng.IntN(n)] = m
			}
		case 2:
			if r == 1 {
				for i := range row {
					row[i] = float32(math.Inf(-1))
				}
			}
		case 3:
			for k := 0; k < n/100; k++ {
				row[rng.IntN(n)] = float32(math.NaN())
			}
		case 4:
			row[n-1] = 100
		}
	}
	return x
}

// samplerParams are a topk case's settings (argmax cases: greedy defaults).
type samplerParams struct {
	k                int
	temp, topP, minP float64
}

func sampleParams(c Case) samplerParams {
	return samplerParams{k: c.Dims[4], temp: float64(c.Dims[5]) / 100, topP: float64(c.Dims[6]) / 100, minP: float64(c.Dims[7]) / 100}
}

// sampleTopKRef is model/sample.go's Sample for Temp > 0 without a repetition penalty,
// restated: it returns the id and whether r or a cut lies within tol of a boundary. NaN
// logits are never candidates (the CPU sampler's handling of NaN depends on where it
// stands; the kernel's contract excludes them).
func sampleTopKRef(logits []float32, sp samplerParams, r, tol float64) (int32, bool) {
	type cand struct {
		id int32
		l  float64
	}
	var cs []cand
	for i, v := range logits {
		if !math.IsNaN(float64(v)) {
			cs = append(cs, cand{int32(i), float64(v)})
		}
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].l > cs[b].l || (cs[a].l == cs[b].l && cs[a].id < cs[b].id) })
	if sp.k > 0 && sp.k < len(cs) {
		cs = cs[:sp.k]
	}
	softmax := func(cs []cand, t float64) []float64 {
		out := make([]float64, len(cs))
		var sum float64
		for i, c := range cs {
			out[i] = math.Exp((c.l - cs[0].l) / t)
			sum += out[i]
		}
		for i := range out {
			out[i] /= sum
		}
		return out
	}
	near := false
	probs := softmax(cs, 1)
	if sp.topP < 1 && sp.topP > 0 {
		var cum float64
		for i, p := range probs {
			cum += p
			near = near || math.Abs(cum-sp.topP) < tol
			if cum >= sp.topP {
				cs = cs[:i+1]
				break
			}
		}
	}
	if sp.minP > 0 {
		limit := probs[0] * sp.minP
		n := 1
		for n < len(cs) && probs[n] >= limit {
			n++
		}
		for _, p := range probs[:min(len(probs), len(cs)+1)] {
			near = near || math.Abs(p-limit) < tol
		}
		cs = cs[:n]
	}
	probs = softmax(cs, sp.temp)
	for i, p := range probs {
		r -= p
		near = near || math.Abs(r) < tol
		if r < 0 {
			return cs[i].id, near
		}
	}
	return cs[len(cs)-1].id, near
}

func runSample(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	rows, n, stride, special := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3]
	sp := sampleParams(c)
	topk := symbol == abi.SymSampleTopk
	x := sampleLogits(rng, rows, n, stride, special)
	want := argmaxRef(x, rows, n, stride)
	uniform := make([]float64, rows)
	skip := make([]bool, rows)
	if topk {
		for r := range uniform {
			uniform[r] = rng.Float64()
			var near bool
			want[r], near = sampleTopKRef(x[r*stride:r*stride+n], sp, uniform[r], 1e-12)
			skip[r] = near
		}
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.Input(f32Bytes(x))
	if err != nil {
		return Outcome{}, err
	}
	ub, err := h.Input(moF64Bytes(uniform))
	if err != nil {
		return Outcome{}, err
	}
	out, err := h.Output(4 * rows)
	if err != nil {
		return Outcome{}, err
	}
	args := abi.SampleArgs{Logits: in.Ptr(), Out: out.Ptr(), Uniform: ub.Ptr(), Temp: math.Float64bits(sp.temp),
		TopP: math.Float64bits(sp.topP), MinP: math.Float64bits(sp.minP), N: int32(n), Stride: int32(stride), TopK: int32(sp.k)}
	var got [][]byte
	var el time.Duration
	two := symbol == abi.SymSampleArgmaxp || symbol == abi.SymSampleArgmaxf
	if two {
		parts := argmaxParts(n, symbol == abi.SymSampleArgmaxf)
		part, err := h.Output(8 * rows * parts)
		if err != nil {
			return Outcome{}, err
		}
		fp, err := h.Mod.Func(abi.SymSampleArgmaxp)
		if err != nil {
			return Outcome{}, err
		}
		ff, err := h.Mod.Func(abi.SymSampleArgmaxf)
		if err != nil {
			return Outcome{}, err
		}
		args.Part, args.Parts = part.Ptr(), int32(parts)
		got, el, err = h.runSeq([]seqLaunch{
			{fp, gpu.Dim3{X: uint32(parts), Y: uint32(rows), Z: 1}, moBlock(abi.SampleThreads), args.Bytes()},
			{ff, gpu.Dim3{X: uint32(rows), Y: 1, Z: 1}, moBlock(abi.SampleThreads), args.Bytes()},
		}, out)
	} else {
		got, el, err = h.Run(fn, gpu.Dim3{X: uint32(rows), Y: 1, Z: 1}, moBlock(abi.SampleThreads), args.Bytes(), out)
	}
	if err != nil {
		return Outcome{}, err
	}
	ids := bytesInt32(got[0])
	var g, w []int32
	skipped := 0
	for r := range ids {
		if skip[r] {
			skipped++
			continue
		}
		g, w = append(g, ids[r]), append(w, want[r])
	}
	rep := CompareExact(g, w)
	if skipped > 0 {
		rep.Worst += fmt.Sprintf(" (%d rows within 1e-12 of a boundary not compared)", skipped)
	}
	reports := map[string]Report{"id": rep}
	moved := int64(4*rows*n + 4*rows)
	if topk {
		moved = int64(4*rows*n*sp.k + 12*rows)
	}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: moved}
	return o, checkAll(bounds, reports)
}
