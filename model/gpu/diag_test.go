package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return num / den
}

func TestEmuDiag(t *testing.T) {
	if os.Getenv("STRATA_EMU_DIAG") == "" {
		t.Skip("STRATA_EMU_DIAG")
	}
	for _, preset := range []string{"tiny-next", "tiny"} {
		for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K} {
			const ctx, steps = 128, 32
			src, st, prompt := diagModel(t, preset, typ, ctx)
			var cpuLog [][]float32
			var cpuTr []*model.Trace
			l, err := st.Forward(prompt, false, nil)
			for i := 0; i < steps && err == nil; i++ {
				cpuLog = append(cpuLog, l)
				tr := &model.Trace{}
				l, err = st.Forward([]int32{argmaxF(l)}, false, tr)
				cpuTr = append(cpuTr, tr)
			}
			if err != nil {
				t.Fatal(err)
			}
			type cfg struct {
				name string
				set  func(*emu, *Engine)
			}
			cfgs := []cfg{{"rounded", func(*emu, *Engine) {}}, {"exact", func(m *emu, _ *Engine) { m.exact = true }}}
			if preset == "tiny-next" {
				w := func(pick func(l *gLayer) []dmat) func(m *emu, e *Engine) {
					return func(m *emu, e *Engine) {
						m.keep, m.exactW = true, map[uint64]bool{}
						for i := range e.layers {
							for _, d := range pick(&e.layers[i]) {
								m.exactW[uint64(d.ptr)] = true
							}
						}
					}
				}
				cfgs = append(cfgs,
					cfg{"exact delta-net inputs", w(func(l *gLayer) []dmat {
						if l.recurrent {
							return []dmat{l.in, l.wqkv, l.wz, l.wba}
						}
						return nil
					})},
					cfg{"exact delta-net q|k|v only", w(func(l *gLayer) []dmat {
						if l.recurrent && !l.fusedIn {
							return []dmat{l.wqkv}
						}
						return nil
					})},
					cfg{"exact ssm_out", w(func(l *gLayer) []dmat {
						if l.recurrent {
							return []dmat{l.wout}
						}
						return nil
					})},
					cfg{"exact attention", w(func(l *gLayer) []dmat {
						if !l.recurrent {
							return []dmat{l.in, l.wq, l.wk, l.wv, l.wo}
						}
						return nil
					})},
					cfg{"exact routers", w(func(l *gLayer) []dmat { return []dmat{l.router, l.routerSh, l.shInp} })},
					cfg{"exact experts", func(m *emu, e *Engine) { m.keep, m.exactMoE = true, true }},
				)
			}
			for _, cf := range cfgs {
				exact := cf.name
				dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
				fake.emu = newEmu()
				eng, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: ctx, Budget: 256 << 20, Reserve: 1 << 20, NoFuse: os.Getenv("STRATA_EMU_NOFUSE") != ""})
				if err != nil {
					t.Fatal(err)
				}
				cf.set(fake.emu, eng)
				L := synth.Presets[preset].Layers
				per := 2
				if preset == "tiny-next" {
					per = 3
				}
				l, err := eng.Forward(prompt)
				worst := 0.0
				layerErr := make([]float64, L)
				for i := 0; i < steps && err == nil; i++ {
					n := relErr(l, cpuLog[i])
					worst = max(worst, n)
					if os.Getenv("STRATA_EMU_STEPS") != "" {
						t.Logf("%s %s %s step %d NMSE %.3g", preset, typ, exact, i, n)
					}
					var res [][]float32
					fake.emu.resid = &res
					l, err = eng.Forward([]int32{argmaxF(cpuLog[i])})
					fake.emu.resid = nil
					if err == nil && i+1 < steps {
						for li := 0; li < L; li++ {
							layerErr[li] = max(layerErr[li], relErr(res[per*li+per-1], cpuTr[i].Layers[li+1]))
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if fake.emu.err != nil {
					t.Fatal(fake.emu.err)
				}
				t.Logf("%s %s %s: worst NMSE %.3g; worst residual NMSE per layer %.3g (recurrent: %v)", preset, typ, exact, worst, layerErr, func() []bool {
					r := make([]bool, L)
					for i := range r {
						r[i] = eng.cfg.IsRecurrent(i)
					}
					return r
				}())
				eng.Close()
			}
		}
	}
	_ = math.Abs
}

// TestEmuAmplification measures, on the CPU, how much a relative perturbation of the
// residual stream after layer i grows by the logits: the composition runs exactly (every
// Q8_1 buffer read back as the f32 it came from, so it equals the CPU engine to ~1e-10),
// the residual after layer i is multiplied by 1 + √ν·g at every token, and the logits'
// NMSE against the unperturbed CPU engine over 32 decode steps (after a 40-token prompt)
// is divided by ν: A_i, the amplification from layer i's output to the logits. Printed
// per preset, type and layer: mean and worst over the steps.
func TestEmuAmplification(t *testing.T) {
	if os.Getenv("STRATA_EMU_DIAG") == "" {
		t.Skip("STRATA_EMU_DIAG")
	}
	const nu = 1e-6
	for _, preset := range []string{"tiny", "tiny-next"} {
		for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K} {
			const ctx, steps = 128, 32
			src, st, prompt := diagModel(t, preset, typ, ctx)
			var cpuLog [][]float32
			l, err := st.Forward(prompt, false, nil)
			for i := 0; i < steps && err == nil; i++ {
				cpuLog = append(cpuLog, l)
				l, err = st.Forward([]int32{argmaxF(l)}, false, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			per := 2
			if preset == "tiny-next" {
				per = 3
			}
			var line []string
			for li := 0; li < synth.Presets[preset].Layers; li++ {
				dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
				fake.emu = newEmu()
				eng, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: ctx, Budget: 256 << 20, Reserve: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				em := fake.emu
				em.exact, em.noise, em.noiseAt, em.w0 = true, nu, per*li+per-1, uint64(eng.layers[0].attnNorm)
				em.rng = rand.New(rand.NewPCG(uint64(li), 9))
				var cancel []float64
				if li == 0 && preset == "tiny-next" {
					em.cancel = &cancel
				}
				l, err := eng.Forward(prompt)
				var sum, worst float64
				for i := 0; i < steps && err == nil; i++ {
					n := relErr(l, cpuLog[i])
					sum += n
					worst = max(worst, n)
					l, err = eng.Forward([]int32{argmaxF(cpuLog[i])})
				}
				if err != nil || em.err != nil {
					t.Fatal(err, em.err)
				}
				eng.Close()
				if len(cancel) > 0 {
					slices.Sort(cancel)
					t.Logf("%s %s: cancellation of the delta-net output o = Sᵀq over %d heads×layers×tokens: median %.1f, 99th percentile %.1f, max %.1f",
						preset, typ, len(cancel), cancel[len(cancel)/2], cancel[len(cancel)*99/100], cancel[len(cancel)-1])
				}
				line = append(line, fmt.Sprintf("layer %d (recurrent %v): mean %.0f worst %.0f", li, eng.cfg.IsRecurrent(li), sum/steps/nu, worst/nu))
			}
			t.Logf("%s %s: amplification of a residual NMSE to the logits NMSE: %s", preset, typ, strings.Join(line, "; "))
		}
	}
}

// diagModel writes the synthetic model of the GPU-vs-CPU tests (preset, expert type, seed 11),
// opens it, and returns its source, a CPU state of ctx positions and the tests' 40-token
// prompt.
func diagModel(t *testing.T, preset string, typ quant.Type, ctx int) (*model.GGUFSource, *model.State, []int32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.Write(path, synth.Presets[preset], synth.Options{ExpertType: typ, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.NewState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(256))
	}
	return src, st, prompt
}
