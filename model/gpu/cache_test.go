package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// zipfTrace draws tokens×layers expert sets: per layer, k distinct experts drawn without
// replacement with P(expert of popularity rank r) ∝ 1/(r+1)^s, ranks permuted per layer.
func zipfTrace(rng *rand.Rand, tokens, layers, experts, k int, s float64) (trace [][][]int, p [][]float64) {
	p = make([][]float64, layers)
	for l := range p {
		p[l] = make([]float64, experts)
		perm := rng.Perm(experts)
		for r, e := range perm {
			p[l][e] = 1 / math.Pow(float64(r+1), s)
		}
	}
	trace = make([][][]int, tokens)
	w := make([]float64, experts)
	for t := range trace {
		trace[t] = make([][]int, layers)
		for l := 0; l < layers; l++ {
			copy(w, p[l])
			for j := 0; j < k; j++ {
				var sum float64
				for _, v := range w {
					sum += v
				}
				x := rng.Float64() * sum
				e := 0
				for ; e < experts-1 && x >= w[e]; e++ {
					x -= w[e]
				}
				trace[t][l] = append(trace[t][l], e)
				w[e] = 0
			}
		}
	}
	return trace, p
}

func replay(t *testing.T, c *Cache, trace [][][]int) float64 {
	t.Helper()
	var slots []int
	var misses []Miss
	for _, tok := range trace {
		for l, es := range tok {
			var err error
			slots, misses, err = c.Lookup(l, es, slots, misses)
			if err != nil {
				t.Fatal(err)
			}
			// Every needed expert ends up in its own slot, and the slot map agrees.
			seen := map[int]bool{}
			for i, e := range es {
				if seen[slots[i]] {
					t.Fatalf("layer %d: two experts share slot %d", l, slots[i])
				}
				seen[slots[i]] = true
				if s, ok := c.Resident(Key{int32(l), int32(e)}); !ok || s != slots[i] {
					t.Fatalf("layer %d expert %d: slot %d, resident %v at %d", l, e, slots[i], ok, s)
				}
			}
		}
		c.Step()
	}
	return c.HitRate()
}

// TestPolicyZipf replays a Zipf(s = 1) trace (48 layers × 128 experts, top-8, a cache of a
// quarter of the experts) through both policies: the decayed count must beat LRU, and
// seeding it with the true popularity (a profile) must not do worse than starting cold.
func TestPolicyZipf(t *testing.T) {
	seed := uint64(20261129)
	rng := rand.New(rand.NewPCG(seed, 1))
	const layers, experts, k, tokens = 48, 128, 8, 400
	trace, p := zipfTrace(rng, tokens, layers, experts, k, 1)
	slots := layers * experts / 4
	lru := replay(t, NewCache(slots, NewLRU()), trace)
	dec := replay(t, NewCache(slots, NewDecayed(0.98, 8, nil)), trace)
	prof := map[Key]float64{}
	for l := range p {
		for e, v := range p[l] {
			prof[Key{int32(l), int32(e)}] = v * 10
		}
	}
	seeded := replay(t, NewCache(slots, NewDecayed(0.98, 8, prof)), trace)
	t.Logf("seed %d, %d slots of %d: hit rate lru %.3f, decayed %.3f, decayed+profile %.3f", seed, slots, layers*experts, lru, dec, seeded)
	if !(dec > lru+0.02) {
		t.Errorf("decayed count %.3f does not beat LRU %.3f by 2 points on a Zipf trace", dec, lru)
	}
	if seeded < dec-0.005 {
		t.Errorf("seeding with the true popularity made it worse: %.3f < %.3f", seeded, dec)
	}
}

// TestLookupProtectsCurrentLayer: with exactly as many slots as one layer needs, a layer's
// own experts are never evicted by its later misses; more experts than slots is an error.
func TestLookupProtectsCurrentLayer(t *testing.T) {
	for _, pol := range []Policy{NewLRU(), NewDecayed(0.9, 2, nil)} {
		c := NewCache(4, pol)
		slots, misses, err := c.Lookup(0, []int{1, 2, 3, 4}, nil, nil)
		if err != nil || len(misses) != 4 {
			t.Fatalf("%s: %v, %d misses", pol.Name(), err, len(misses))
		}
		c.Step()
		slots, misses, err = c.Lookup(1, []int{5, 6, 7, 8}, slots, misses)
		if err != nil || len(misses) != 4 {
			t.Fatalf("%s: %v, %d misses", pol.Name(), err, len(misses))
		}
		for _, m := range misses {
			if m.Evicted.Layer != 0 {
				t.Fatalf("%s: evicted %v while loading layer 1", pol.Name(), m.Evicted)
			}
		}
		if _, _, err := c.Lookup(2, []int{0, 1, 2, 3, 4}, slots, misses); err == nil || !strings.Contains(err.Error(), "5 experts at once") {
			t.Fatalf("%s: %v", pol.Name(), err)
		}
	}
}

// TestLookupAdmit: LookupAdmit places at most admit misses, in order; the misses past that
// get slot −1, stay not resident, and are counted as misses (mapped.go's promotion cap).
func TestLookupAdmit(t *testing.T) {
	c := NewCache(8, NewLRU())
	slots, misses, err := c.LookupAdmit(0, []int{1, 2, 3, 4}, nil, nil, 2)
	if err != nil || !slices.Equal(slots[2:], []int{-1, -1}) || slots[0] < 0 || slots[1] < 0 || len(misses) != 2 {
		t.Fatalf("admit 2 of 4: %v, slots %v, %d misses", err, slots, len(misses))
	}
	for i, m := range misses {
		if m.Key != (Key{0, int32(i + 1)}) || m.Slot != slots[i] {
			t.Fatalf("miss %d: %+v, slots %v", i, m, slots)
		}
	}
	if c.Misses != 4 || c.Hits != 0 {
		t.Fatalf("%d hits, %d misses, want 0 and 4", c.Hits, c.Misses)
	}
	c.Step()
	slots, misses, err = c.LookupAdmit(0, []int{1, 2, 3, 4}, slots, misses, 0)
	if err != nil || !slices.Equal(slots[2:], []int{-1, -1}) || slots[0] < 0 || slots[1] < 0 || len(misses) != 0 {
		t.Fatalf("admit 0: %v, slots %v, %d misses", err, slots, len(misses))
	}
	if c.Misses != 6 || c.Hits != 2 {
		t.Fatalf("%d hits, %d misses, want 2 and 6", c.Hits, c.Misses)
	}
	if _, ok := c.Resident(Key{0, 3}); ok {
		t.Fatal("a miss past admit became resident")
	}
}

func TestProfileRoundTrip(t *testing.T) {
	p := &Profile{Layers: 3, Experts: 5, Count: map[Key]float64{{0, 1}: 2.5, {2, 4}: 7, {1, 0}: 0.125}}
	var b bytes.Buffer
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	q, err := ReadProfile(&b, "p.txt", 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p.Count, q.Count); d != "" {
		t.Fatal(d)
	}
	for _, c := range []struct{ text, want string }{
		{"", "empty expert profile"},
		{"hello\n", "not an expert profile header"},
		{"strata-expert-profile v1 layers=4 experts=5\n", "is for 4 layers × 5 experts, the model has 3 × 5"},
		{"strata-expert-profile v1 layers=3 experts=5\n0 9 1\n", "line 2: layer 0 expert 9"},
		{"strata-expert-profile v1 layers=3 experts=5\n0 1 NaN\n", "line 2"},
		{"strata-expert-profile v1 layers=3 experts=5\n0 x\n", "line 2: want"},
	} {
		_, err := ReadProfile(strings.NewReader(c.text), "p.txt", 3, 5)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "p.txt: ") {
			t.Errorf("%q: got %v, want %q", c.text, err, c.want)
		}
	}
}

// TestCopierGroups: copies go out in the order given, unchanged, with one event per group
// of Size and one wait per group on the compute stream.
func TestCopierGroups(t *testing.T) {
	dev, fake := newFakeDevice(1 << 30)
	host, err := dev.HostAlloc(1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 3, 8, 20} {
		fake.copies, fake.records, fake.waits = nil, 0, 0
		c, err := NewCopier(dev, host, size)
		if err != nil {
			t.Fatal(err)
		}
		var cps []Copy
		for i := 0; i < 10; i++ {
			cps = append(cps, Copy{Dst: rt.DevPtr(0x10000 + 0x1000*(9-i)), Off: 4096 * i, N: 1000 + i})
		}
		groups, err := c.Issue(cps)
		if err != nil {
			t.Fatal(err)
		}
		want := (10 + size - 1) / size
		if len(groups) != want || fake.records != want+1 { // +1: the timing start event
			t.Fatalf("size %d: %d groups, %d events recorded; want %d groups", size, len(groups), fake.records, want)
		}
		compute, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(compute, groups); err != nil || fake.waits != want {
			t.Fatalf("size %d: %d waits (%v), want %d", size, fake.waits, err, want)
		}
		for i, cp := range fake.copies {
			if cp.dst != uintptr(cps[i].Dst) || cp.src != host.Ptr()+uintptr(cps[i].Off) || cp.n != uintptr(cps[i].N) {
				t.Fatalf("size %d: copy %d is %+v, want %+v", size, i, cp, cps[i])
			}
		}
		var n int
		var bytes int64
		for _, g := range groups {
			n += g.Count
			bytes += g.Bytes
		}
		if n != 10 || bytes != c.Bytes || c.Copies != 10 {
			t.Fatalf("size %d: groups cover %d copies, %d bytes (copier %d, %d)", size, n, bytes, c.Copies, c.Bytes)
		}
		if _, err := c.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// cacheConsistent fails unless owner and where describe each other, and free holds exactly
// the slots owned by nobody (reserved slots are in neither).
func cacheConsistent(t *testing.T, c *Cache) {
	t.Helper()
	for k, s := range c.where {
		if c.owner[s] != k {
			t.Fatalf("where[%v] = %d, owner[%d] = %v", k, s, s, c.owner[s])
		}
	}
	free := map[int]bool{}
	for _, s := range c.free {
		if free[s] || c.owner[s] != (Key{-1, -1}) {
			t.Fatalf("free slot %d twice or owned by %v", s, c.owner[s])
		}
		free[s] = true
	}
	for s, k := range c.owner {
		switch {
		case k == reservedKey || free[s]:
		case k.Layer < 0:
			t.Fatalf("slot %d owned by nobody but not free", s)
		default:
			if c.where[k] != s {
				t.Fatalf("owner[%d] = %v, where %d", s, k, c.where[k])
			}
		}
	}
}

// TestCacheReserveLand: Reserve takes free slots first, then the policy's victims outside
// protect, and stops when nothing may go; a reserved slot is neither free nor resident, so
// lookups never place into it or evict from it; Land makes it its key's unless the key
// holds a slot already or the slot is not reserved; Release frees it.
func TestCacheReserveLand(t *testing.T) {
	for _, pol := range []Policy{NewLRU(), NewDecayed(0.9, 1, nil)} {
		t.Run(pol.Name(), func(t *testing.T) {
			c := NewCache(5, pol)
			if _, _, err := c.Lookup(0, []int{1, 2, 3}, nil, nil); err != nil {
				t.Fatal(err)
			}
			c.Step()
			if _, _, err := c.Lookup(0, []int{2, 3}, nil, nil); err != nil { // expert 1: the least used
				t.Fatal(err)
			}
			c.Step()
			s1, _ := c.Resident(Key{0, 1})
			r := c.Reserve(3, func(s int) bool { return s == s1 }, nil) // 2 free, then a victim that is not expert 1's slot
			cacheConsistent(t, c)
			if len(r) != 3 || r[0].Evicted.Layer >= 0 || r[1].Evicted.Layer >= 0 || r[2].Evicted.Layer < 0 || r[2].Evicted == (Key{0, 1}) {
				t.Fatalf("reserved %+v", r)
			}
			for _, m := range r {
				if !c.IsReserved(m.Slot) || m.Key != reservedKey {
					t.Fatalf("slot %d not reserved: %+v", m.Slot, m)
				}
				if _, ok := c.Resident(m.Evicted); m.Evicted.Layer >= 0 && ok {
					t.Fatalf("victim %v still resident", m.Evicted)
				}
			}
			// everything left is protected: nothing more
			if more := c.Reserve(2, func(int) bool { return true }, nil); len(more) != 0 {
				t.Fatalf("reserved past protect: %+v", more)
			}
			// lookups: a miss must evict a resident expert, never take a reserved slot
			slots, misses, err := c.Lookup(1, []int{7, 8}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range slots {
				if c.IsReserved(s) || misses[i].Slot != s {
					t.Fatalf("lookup placed expert %d into reserved slot %d", i, s)
				}
			}
			cacheConsistent(t, c)
			if !c.Land(r[0].Slot, Key{2, 4}) {
				t.Fatal("Land into a reserved slot failed")
			}
			if s, ok := c.Resident(Key{2, 4}); !ok || s != r[0].Slot {
				t.Fatalf("landed expert at %d, %v", s, ok)
			}
			if c.Land(r[0].Slot, Key{2, 5}) { // no longer reserved
				t.Fatal("Land into a landed slot")
			}
			if c.Land(r[1].Slot, Key{2, 4}) { // the key holds a slot
				t.Fatal("Land of a resident key")
			}
			c.Release(r[1].Slot)
			c.Release(r[0].Slot) // not reserved: no-op
			cacheConsistent(t, c)
			if c.IsReserved(r[1].Slot) || !slices.Contains(c.free, r[1].Slot) || slices.Contains(c.free, r[0].Slot) {
				t.Fatalf("release: free %v", c.free)
			}
		})
	}
}
