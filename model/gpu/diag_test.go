package gpu

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
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
			shp := synth.Presets[preset]
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.Write(path, shp, synth.Options{ExpertType: typ, Seed: 11}); err != nil {
				t.Fatal(err)
			}
			src, err := model.OpenGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			const ctx, steps = 128, 32
			rng := rand.New(rand.NewPCG(5, 6))
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(rng.IntN(256))
			}
			st, _ := m.NewState(ctx)
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
			for _, exact := range []bool{false, true} {
				dev, fake := newFakeDeviceArch(1<<30, fakeTarget)
				fake.emu = newEmu()
				fake.emu.exact = exact
				eng, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: ctx, Budget: 256 << 20, Reserve: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				L := shp.Layers
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
					if i < 6 || n > 1e-3 {
						t.Logf("%s %s exact=%v step %d NMSE %.3g", preset, typ, exact, i, n)
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
				t.Logf("%s %s exact=%v: worst NMSE %.3g; worst residual NMSE per layer %.3g (recurrent: %v)", preset, typ, exact, worst, layerErr, func() []bool {
					r := make([]bool, L)
					for i := range r {
						r[i] = eng.cfg.IsRecurrent(i)
					}
					return r
				}())
				eng.Close()
			}
			src.Close()
		}
	}
	_ = math.Abs
}
