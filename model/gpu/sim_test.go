package gpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model"
)

// TestCacheReplay (STRATA_SIM_MODEL=model.gguf): routes STRATA_SIM_TOKENS random tokens
// through the CPU engine (one prefill; the expert choices are the same as decode's) and
// replays the expert choices through the slot cache at the slot counts the memory plan
// gives at several VRAM budgets (ctx 1024), for both policies: hit rate and MB copied
// per token after a warm-up of STRATA_SIM_WARM tokens (default 8). A CPU-side estimate of what the GPU engine's cache
// does on that model; no device is involved.
func TestCacheReplay(t *testing.T) {
	path := os.Getenv("STRATA_SIM_MODEL")
	if path == "" {
		t.Skip("set STRATA_SIM_MODEL")
	}
	src, err := model.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	n := 40
	fmt.Sscan(os.Getenv("STRATA_SIM_TOKENS"), &n)
	st, err := m.NewState(n)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(256))
	}
	var tr model.Trace
	if _, err := st.Forward(ids, false, &tr); err != nil {
		t.Fatal(err)
	}
	e := &Engine{cfg: m.Cfg, vocab: m.Vocab, src: src}
	shape, _, err := e.shape()
	if err != nil {
		t.Fatal(err)
	}
	in, err := shape.PlanInput(1024)
	if err != nil {
		t.Fatal(err)
	}
	warm := 8
	fmt.Sscan(os.Getenv("STRATA_SIM_WARM"), &warm)
	if warm >= n {
		t.Fatalf("warm-up %d ≥ %d tokens", warm, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d tokens (first %d warm-up), ctx 1024, slot %.2f MB, %d experts\n\n", path, n, warm, float64(in.SlotBytes)/1e6, in.MaxSlots)
	fmt.Fprintf(&b, "| budget MiB | slots | of experts | decayed hit rate | decayed MB/token | LRU hit rate | LRU MB/token |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, mibs := range []uint64{4096, 6144, 8192, 12288, 16384} {
		p, err := NewPlan(in, mibs<<20)
		if err != nil {
			fmt.Fprintf(&b, "| %d | does not fit: %v |\n", mibs, err)
			continue
		}
		row := fmt.Sprintf("| %d | %d | %d |", mibs, p.Slots, in.MaxSlots)
		for _, pol := range []Policy{NewDecayed(0.98, 8, nil), NewLRU()} {
			c := NewCache(p.Slots, pol)
			var hits, misses int64
			for tok := 0; tok < n; tok++ {
				for l := range tr.Experts {
					if _, _, err := c.Lookup(l, tr.Experts[l][tok], nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				c.Step()
				if tok == warm-1 {
					hits, misses = c.Hits, c.Misses
				}
			}
			h, ms := c.Hits-hits, c.Misses-misses
			row += fmt.Sprintf(" %.3f | %.1f |", float64(h)/float64(h+ms), float64(ms)*float64(p.SlotBytes)/1e6/float64(n-warm))
		}
		fmt.Fprintln(&b, row)
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("STRATA_SIM_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
