package gpu

import (
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// hostShape has the launch structure of Qwen3-30B-A3B — 48 layers, 128 experts, top 8,
// the full 151,936-token vocabulary, so 674 launches a resident token and the same
// logits download — with narrow matrices, so that it loads in seconds on the build
// machine. The host's work per token does not depend on the matrix widths except
// through the embedding row (Embd values) and the logits (Vocab values).
var hostShape = synth.Shape{Arch: model.ArchQwen3MoE, Layers: 48, Embd: 256, Heads: 16, HeadsKV: 2, HeadDim: 64,
	Experts: 128, ExpertsUsed: 8, ExpertFF: 64, Vocab: 151936, CtxLen: 4096}

// BenchmarkTokenHost is the engine's host cost of one resident decode token on the fake
// device (no kernels run, launches and copies return at once): what the host spends per
// token besides the driver's own work. One op is one token (Forward of one id, then the
// caller's argmax over the logits; argmax: ForwardArgmax), at positions 8 onwards of a 1024-token context
// (restarted when full). Reported: ns/op and allocs/op (the host's per-token cost and
// allocations) and launches/token. logits/plain launches as before Engine's Launcher
// (Options.PlainLaunch); on the fake device binding costs nothing, so the difference to
// logits is the driver's share on a GPU only (runtime/cuda's BenchmarkLaunchBound). The
// /graph rows submit each token as one replayed graph (graph.go): the host's walk of the
// token, the node updates and the graph launch (here the fake runs the graph's launches
// in Go, which counts in: a few ns each).
func BenchmarkTokenHost(b *testing.B) {
	path := filepath.Join(b.TempDir(), "host.gguf")
	if err := synth.Write(path, hostShape, synth.Options{ExpertType: quant.Q2_0, Seed: 3}); err != nil {
		b.Fatal(err)
	}
	src, err := model.OpenGGUF(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dev, fake := newFakeDeviceArch(8<<30, fakeTarget)
	const ctx = 1024
	eng, err := Load(dev, src, Options{CODir: fakeCODir(b, fakeTarget), Ctx: ctx})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	if !eng.resident {
		b.Fatal("the benchmark shape should be resident")
	}
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	restart := func() []float32 {
		if err := eng.Reset(); err != nil {
			b.Fatal(err)
		}
		l, err := eng.Forward(prompt)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name         string
		plain, graph bool
		argmax       bool
	}{{"logits/plain", true, false, false}, {"logits", false, false, false}, {"argmax", false, false, true},
		{"logits/graph", false, true, false}, {"argmax/graph", false, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			eng.SetPlainLaunch(c.plain)
			defer eng.SetPlainLaunch(false)
			if err := eng.SetGraph(c.graph); err != nil {
				b.Fatal(err)
			}
			l := restart()
			tok := argmaxF(l)
			bound := fake.boundLaunches
			eng.ResetStats()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if eng.Pos() == ctx {
					b.StopTimer()
					tok = argmaxF(restart())
					b.StartTimer()
				}
				var err error
				if c.argmax {
					tok, err = eng.ForwardArgmax([]int32{tok % 256}, hostShape.Vocab)
				} else if l, err = eng.Forward([]int32{tok % 256}); err == nil {
					tok = argmaxF(l)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s := eng.Stats()
			b.ReportMetric(float64(s.Launches)/float64(max(1, s.Tokens)), "launches/token")
			b.ReportMetric(float64(s.GraphUpdates)/float64(max(1, s.Tokens)), "updates/token")
			if c.graph {
				if s.Graphs != int64(s.Tokens) {
					b.Fatalf("%d graph launches for %d tokens", s.Graphs, s.Tokens)
				}
			} else if got := fake.boundLaunches > bound; got == c.plain {
				b.Fatalf("bound launches made: %v, plain launch: %v", got, c.plain)
			}
		})
	}
}
