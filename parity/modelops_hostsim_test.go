package parity

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestModelOpsHostSim runs the generated NVIDIA sources of the model-op families on the CPU
// through the host simulation of TestPrefillHostSim (testdata/hostsim), with one change:
// function-scope __shared__ arrays (which these families use) become static locals, so
// the threads of a block share them as on a GPU. Each variant runs through its ordinary
// Run function, harness and bounds, on small cases (CPU threads are slow); by default a
// subset, every listed case with STRATA_HOSTSIM_ALL=1. It proves the kernels' logic
// (indexing, LDS staging, barriers, shuffles, split/reduce, chunk/scan) without a GPU; the
// f32 rounding of the GPU's exp2/log2 differs (std::exp2f here), so it does not replace the
// GPU run.
func TestModelOpsHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	all := os.Getenv("STRATA_HOSTSIM_ALL") == "1"
	prelude := hostSimPrelude(t, root)
	if !strings.Contains(string(prelude), "#define __shared__\n") {
		t.Fatal("testdata/hostsim/strata_prelude.h no longer defines __shared__ as empty; update this test")
	}
	prelude = []byte(strings.Replace(string(prelude), "#define __shared__\n", "#define __shared__ static\n", 1))
	c := func(name string, dims ...int) Case { return Case{name, dims} }
	for _, fc := range []struct {
		family string
		cases  []Case // the first (a variant takes) runs by default, all with STRATA_HOSTSIM_ALL=1
	}{
		{"rmsnorm", []Case{c("tokens=3,heads=4,hd=128", 3, 4, 128, 512, 128, 0), c("tokens=5,heads=16,hd=256,gatedq", 5, 16, 256, 16*512, 512, 0),
			c("rows=9,n=2048,inplace", 9, 1, 2048, 2048, 2048, 1)}},
		{"rmsnorm_row", []Case{c("rows=9,n=2048,inplace", 9, 1, 2048, 2048, 2048, 1), c("tokens=3,heads=4,hd=128", 3, 4, 128, 512, 128, 0),
			c("rows=3,n=4096", 3, 1, 4096, 4096, 4096, 0), c("rows=2,n=5120", 2, 1, 5120, 5120, 5120, 0), c("rows=1,n=32", 1, 1, 32, 32, 32, 0)}},
		{"rope", []Case{c("tokens=7,heads=2,hd=256,rot=64", 7, 2, 256, 64, 512, 256, 262144, 10000000),
			c("tokens=3,heads=16,hd=256,rot=64,gatedq", 3, 16, 256, 64, 16*512, 512, 262144, 10000000)}},
		{"embed", []Case{c("vocab=300,n=256,tokens=7,stride=320", 300, 256, 7, 320), c("vocab=50,n=32,tokens=1", 50, 32, 1, 32)}},
		{"sample", []Case{c("rows=3,n=7,k=7,t=2,minp=0.2", 3, 7, 7, 0, 7, 200, 0, 20), c("rows=4,n=1000,stride=1024,-inf", 4, 1000, 1024, 2, 1, 100, 100, 0),
			c("rows=2,n=3000,k=20,t=0.7,p=0.5,ties", 2, 3000, 3000, 1, 20, 70, 50, 0), c("rows=3,n=9000,nan", 3, 9000, 9000, 3, 1, 100, 100, 0),
			c("rows=2,n=12289,last", 2, 12289, 12289, 4, 1, 100, 100, 0)}},
		{"attention_decode", []Case{c("n=200,nh=4,nkv=2,hd=128,gate,split=1", 200, 4, 2, 128, 1, 1, 1), c("n=7,nh=4,nkv=4,hd=128", 7, 4, 4, 128, 0, 1),
			c("n=14,nh=8,nkv=1,hd=64,split=1", 14, 8, 1, 64, 0, 1, 1), c("n=256,nh=2,nkv=1,hd=256,gate,split=1", 256, 2, 1, 256, 1, 1, 1), c("n=300,nh=8,nkv=1,hd=64,gate", 300, 8, 1, 64, 1, 1),
			c("n=200,nh=24,nkv=2,hd=256,gate,12_per_group", 200, 24, 2, 256, 1, 1), c("n=129,nh=4,nkv=2,hd=128,large_qk", 129, 4, 2, 128, 0, 12)}},
		{"attention_prefill", []Case{c("t=7,n=7,nh=4,nkv=4,hd=64", 7, 7, 4, 4, 64, 0, 1), c("t=9,n=40,nh=4,nkv=2,hd=128,gate", 9, 40, 4, 2, 128, 1, 1),
			c("t=21,n=53,nh=16,nkv=2,hd=256,gate", 21, 53, 16, 2, 256, 1, 1), c("t=33,n=70,nh=32,nkv=4,hd=128", 33, 70, 32, 4, 128, 0, 1),
			c("t=5,n=5,nh=3,nkv=1,hd=64,large_qk", 5, 5, 3, 1, 64, 0, 12)}},
		{"gated_delta_net", []Case{c("t=7,nk=1,nv=2,d=128", 7, 0, 1, 2, 128, 128, 0, 1), c("t=20+3,nk=1,nv=2,d=128", 23, 20, 1, 2, 128, 128, 0, 1),
			c("t=18,saturating,nk=1,nv=2,d=128", 18, 0, 1, 2, 128, 128, 1, 1), c("t=5,nk=1,nv=2,dk=64,dv=96", 5, 0, 1, 2, 64, 96, 0, 1)}},
	} {
		t.Run(fc.family, func(t *testing.T) {
			bin := buildHostSim(t, cxx, root, target, fc.family, prelude, "-O1")
			co, ok := abi.Find(target, fc.family)
			if !ok {
				t.Fatalf("no %s code object for %s", fc.family, target)
			}
			fam := families[fc.family]
			for _, v := range co.Variants {
				ran := 0
				for _, cs := range fc.cases {
					if ran > 0 && !all {
						break
					}
					if strings.HasPrefix(v.Name, "prep") && strings.Contains(cs.Name, "split=") {
						// prep takes no split, and its cache pointers are moved back by pos rows
						// (prepShape), which the host simulation, translating each pointer by the
						// allocation it falls in, cannot follow at these positions.
						continue
					}
					if fam.Applies != nil && !fam.Applies(v.Name, cs) {
						continue // a variant with a narrower contract (attention_prefill/f16mma256)
					}
					ran++
					t.Run(v.Name+"/"+cs.Name, func(t *testing.T) {
						// Every symbol of the module, so a Run that launches two kernels finds both.
						var syms []string
						for _, w := range co.Variants {
							syms = append(syms, w.Symbol)
						}
						h := simHarness(t, bin, fc.family, syms...)
						defer h.Close()
						seed := runSeed(t)
						o, err := fam.Run(h, v.Symbol, cs, fam.Bounds[v.Name], rand.New(rand.NewPCG(seed, 7)))
						if err != nil {
							t.Fatalf("seed %d: %v", seed, err)
						}
						t.Log(summarize(t.Name(), o))
					})
				}
			}
		})
	}
}
