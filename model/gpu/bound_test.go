package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// nextLogitNMSE is cmd/strata-run's gpuLogitNMSENext (the GPU-vs-CPU bound for tiny-next),
// restated here so that TestNextLogitBound re-derives it in CI.
const nextLogitNMSE = 8e-3

// boundCase is cmd/strata-run's gpuVsCPU setup: the preset written with seed 11, a
// 40-token prompt from PCG(5, 6), then 32 greedy steps on the CPU engine.
type boundCase struct {
	src    *model.GGUFSource
	prompt []int32
	cpu    [][]float32
	layers int
}

func newBoundCase(t *testing.T, preset string, typ quant.Type) *boundCase {
	src, st, prompt := diagModel(t, preset, typ, 128)
	c := &boundCase{src: src, prompt: prompt, layers: synth.Presets[preset].Layers}
	l, err := st.Forward(c.prompt, false, nil)
	for i := 0; i < 32 && err == nil; i++ {
		c.cpu = append(c.cpu, l)
		l, err = st.Forward([]int32{argmaxF(l)}, false, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run decodes the case on the emulated engine, set configuring the emulator after load,
// and returns the worst logits NMSE against the CPU, and (when per > 0: add-norms per
// layer) the worst NMSE of the residual after layer 0.
func (c *boundCase) run(t *testing.T, per int, set func(*emu, *Engine)) (worst, resid0 float64) {
	dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
	fake.emu = newEmu()
	eng, err := Load(dev, c.src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 128, Budget: 256 << 20, Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	set(fake.emu, eng)
	m, _ := model.Load(c.src)
	st, _ := m.NewState(128)
	if _, err := st.Forward(c.prompt, false, nil); err != nil {
		t.Fatal(err)
	}
	l, err := eng.Forward(c.prompt)
	for i := 0; i < len(c.cpu) && err == nil; i++ {
		worst = max(worst, relErr(l, c.cpu[i]))
		var res [][]float32
		if per > 0 {
			fake.emu.resid = &res
		}
		tr := &model.Trace{}
		if _, err := st.Forward([]int32{argmaxF(c.cpu[i])}, false, tr); err != nil {
			t.Fatal(err)
		}
		l, err = eng.Forward([]int32{argmaxF(c.cpu[i])})
		fake.emu.resid = nil
		if err == nil && per > 0 && len(res) >= per {
			resid0 = max(resid0, relErr(res[per-1], tr.Layers[1]))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if fake.emu.err != nil {
		t.Fatal(fake.emu.err)
	}
	return worst, resid0
}

// TestNextLogitBound re-derives the qwen3next GPU-vs-CPU logits bound on the CPU, as a
// first-order error budget: logits NMSE ≤ e_head + Σ_i A_i·e, where
//   - e is the residual NMSE one layer's own Q8_1 roundings add: measured after layer 0
//     (whose input, the embedding row, is exact), worst over the steps;
//   - A_i is the measured amplification from a relative perturbation of the residual after
//     layer i to the logits (exact composition, residual × (1 + √ν·g) at every token,
//     ν = 1e-6, worst step's logits NMSE / ν);
//   - e_head is the logits NMSE of the output head's own rounding (everything else exact).
//
// Each layer is charged layer 0's e (the same widths and quantized products; the attention
// layer has fewer). The terms add because independent roundings' errors are uncorrelated
// to first order. The sum must stay within nextLogitNMSE; a generator change that breaks
// the budget fails here, before any GPU run.
func TestNextLogitBound(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			c := newBoundCase(t, "tiny-next", typ)
			const per = 3 // add-norms per qwen3next layer: after the mixer, after the shared expert, after the routed experts
			rounded, e := c.run(t, per, func(*emu, *Engine) {})
			const nu = 1e-6
			var amp []float64
			budget := 0.0
			for li := 0; li < c.layers; li++ {
				w, _ := c.run(t, 0, func(m *emu, eng *Engine) {
					m.exact, m.noise, m.noiseAt, m.w0 = true, nu, per*li+per-1, uint64(eng.layers[0].attnNorm)
					m.rng = rand.New(rand.NewPCG(uint64(li), 9))
				})
				amp = append(amp, w/nu)
				budget += w / nu * e
			}
			head, _ := c.run(t, 0, func(m *emu, eng *Engine) {
				m.exact, m.keep, m.exactMoE, m.exactW = false, true, true, map[uint64]bool{}
				for _, l := range eng.layers {
					for _, d := range []dmat{l.in, l.wq, l.wk, l.wv, l.wo, l.router, l.routerSh, l.wqkv, l.wz, l.wba, l.wout, l.shInp} {
						m.exactW[uint64(d.ptr)] = true
					}
				}
			})
			budget += head
			t.Logf("e = %.3g per layer, A_i = %.0f, e_head = %.3g: budget %.3g (declared %.0e); emulated with every rounding: %.3g",
				e, amp, head, budget, nextLogitNMSE, rounded)
			if budget > nextLogitNMSE {
				t.Errorf("the error budget %.3g exceeds the declared bound %.0e", budget, nextLogitNMSE)
			}
			if rounded > budget {
				t.Errorf("the emulated engine's NMSE %.3g exceeds its own budget %.3g: the first-order model does not hold", rounded, budget)
			}
		})
	}
}
