package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refDecayed is the decayed policy as it was written first, with maps and a comparator
// that reads both scores: the reference the dense Decayed must match step for step.
type refDecayed struct {
	decay  float64
	rerank int
	score  map[Key]float64
	ranked int
	order  []Key
	next   int
	stale  bool
	bumped map[Key]bool
}

func newRefDecayed(decay float64, rerank int, profile map[Key]float64) *refDecayed {
	p := &refDecayed{decay: decay, rerank: max(1, rerank), score: map[Key]float64{}, stale: true, bumped: map[Key]bool{}}
	for k, v := range profile {
		p.score[k] = v
	}
	return p
}

func (p *refDecayed) Name() string { return "ref-decayed" }

func (p *refDecayed) Used(k Key, step int) {
	if step-p.ranked >= p.rerank {
		f := math.Pow(p.decay, float64(step-p.ranked))
		for k, v := range p.score {
			p.score[k] = v * f
		}
		p.ranked = step
		p.stale = true
	}
	p.score[k]++
	p.bumped[k] = true
}

func (p *refDecayed) Victim(resident map[Key]int, evictable func(Key) bool, step int) (Key, bool) {
	for pass := 0; pass < 2; pass++ {
		if p.stale || p.next >= len(p.order) {
			p.order = p.order[:0]
			for k := range resident {
				p.order = append(p.order, k)
			}
			sort.Slice(p.order, func(i, j int) bool {
				a, b := p.score[p.order[i]], p.score[p.order[j]]
				if a != b {
					return a < b
				}
				return less(p.order[i], p.order[j])
			})
			p.next, p.stale = 0, false
			clear(p.bumped)
		}
		for ; p.next < len(p.order); p.next++ {
			k := p.order[p.next]
			if _, in := resident[k]; in && evictable(k) && !p.bumped[k] {
				p.next++
				return k, true
			}
		}
		clear(p.bumped)
		p.stale = true
	}
	return Key{}, false
}

// TestDecayedMatchesReference: on Zipf traces (seeded and not, several cache sizes, decay
// and re-rank settings, admission caps), the dense Decayed gives every lookup the same
// slots, misses and evictions as the reference, and the same scores at the end.
func TestDecayedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const layers, experts, k = 6, 64, 6
	trace, p := zipfTrace(rng, 300, layers, experts, k, 1)
	prof := map[Key]float64{}
	for l := range p {
		for e, v := range p[l] {
			if v > 0.05 {
				prof[Key{int32(l), int32(e)}] = 100 * v
			}
		}
	}
	for _, tc := range []struct {
		slots, rerank, admit int
		decay                float64
		seed                 map[Key]float64
	}{
		{40, 8, math.MaxInt, 0.98, nil}, {40, 1, math.MaxInt, 0.9, nil}, {120, 8, 3, 0.98, nil},
		{120, 4, math.MaxInt, 0.95, prof}, {200, 8, 5, 0.98, prof}, {k, 2, math.MaxInt, 0.5, nil},
	} {
		t.Run(fmt.Sprintf("slots%d_rerank%d_admit%d_decay%g_seeded%v", tc.slots, tc.rerank, tc.admit, tc.decay, tc.seed != nil), func(t *testing.T) {
			dense := NewDecayed(tc.decay, tc.rerank, tc.seed)
			ref := newRefDecayed(tc.decay, tc.rerank, tc.seed)
			a, b := NewCache(tc.slots, dense), NewCache(tc.slots, ref)
			evictions := 0
			for step, tok := range trace {
				for l, ids := range tok {
					sa, ma, err := a.LookupAdmit(l, ids, nil, nil, tc.admit)
					if err != nil {
						t.Fatal(err)
					}
					sb, mb, err := b.LookupAdmit(l, ids, nil, nil, tc.admit)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(sa, ma) != fmt.Sprint(sb, mb) {
						t.Fatalf("step %d layer %d: dense %v %v, reference %v %v", step, l, sa, ma, sb, mb)
					}
					for _, m := range ma {
						if m.Evicted.Layer >= 0 {
							evictions++
						}
					}
				}
				a.Step()
				b.Step()
			}
			if tc.slots < layers*experts && evictions == 0 {
				t.Fatal("no eviction happened: the trace does not exercise Victim")
			}
			got := dense.Scores()
			if len(got) != len(ref.score) {
				t.Fatalf("Scores has %d keys, the reference %d", len(got), len(ref.score))
			}
			for key, v := range ref.score {
				if got[key] != v {
					t.Fatalf("score of %v: %v, reference %v", key, got[key], v)
				}
			}
		})
	}
}

// BenchmarkDecayedLookup is the host's lookup work of a mapped 80B-A3B token (48 layers of
// 512 experts, top-10, Zipf s = 1) at the cache sizes of the 12 / 16 / 24 GiB budgets,
// after a warm-up, for the dense policy and the map reference.
func BenchmarkDecayedLookup(b *testing.B) {
	const layers, experts, k = 48, 512, 10
	rng := rand.New(rand.NewPCG(1, 2))
	trace, _ := zipfTrace(rng, 256, layers, experts, k, 1)
	for _, slots := range []int{10153, 14877, 24087} {
		for _, name := range []string{"dense", "reference"} {
			b.Run(fmt.Sprintf("%s/slots%d", name, slots), func(b *testing.B) {
				var pol Policy = NewDecayed(0.98, 8, nil)
				if name == "reference" {
					pol = newRefDecayed(0.98, 8, nil)
				}
				c := NewCache(slots, pol)
				var slotBuf []int
				var missBuf []Miss
				step := func(tok [][]int) int {
					n := 0
					for l, ids := range tok {
						var err error
						if slotBuf, missBuf, err = c.LookupAdmit(l, ids, slotBuf, missBuf, math.MaxInt); err != nil {
							b.Fatal(err)
						}
						n += len(missBuf)
					}
					c.Step()
					return n
				}
				for _, tok := range trace[:128] {
					step(tok)
				}
				b.ResetTimer()
				n := 0
				for i := 0; i < b.N; i++ {
					n += step(trace[128+i%128])
				}
				b.ReportMetric(float64(n)/float64(b.N), "promotions/token")
			})
		}
	}
}
