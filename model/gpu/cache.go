package gpu

import (
	"bufio"
	"container/list"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// Key names one expert: layer and expert index.
type Key struct{ Layer, Expert int32 }

// Policy chooses which resident expert leaves when a missing one needs a slot. The cache
// tells it every use; it names a victim among the resident keys the cache may evict.
type Policy interface {
	Name() string
	// Used records that key was needed at step (one step = one token through all layers).
	Used(k Key, step int)
	// Victim returns the resident key to evict; evictable says which resident keys may go
	// (not the ones the current layer needs). ok is false when none may.
	Victim(resident map[Key]int, evictable func(Key) bool, step int) (Key, bool)
}

// Cache maps experts to VRAM slots. It decides hits, misses and evictions; the engine
// moves the bytes (see Copier).
type Cache struct {
	pol   Policy
	owner []Key // per slot; Layer −1 = free
	where map[Key]int
	free  []int
	step  int

	Hits, Misses, Evictions int64
}

// NewCache returns a cache of slots slots, all free.
func NewCache(slots int, pol Policy) *Cache {
	c := &Cache{pol: pol, owner: make([]Key, slots), where: map[Key]int{}}
	for i := slots - 1; i >= 0; i-- {
		c.owner[i] = Key{-1, -1}
		c.free = append(c.free, i)
	}
	return c
}

// Slots is the number of slots.
func (c *Cache) Slots() int { return len(c.owner) }

// Step advances the token counter (call once per token).
func (c *Cache) Step() { c.step++ }

// Miss is an expert that must be copied into Slot before it is used; Evicted is the
// expert that held the slot (Layer −1: the slot was free).
type Miss struct {
	Key     Key
	Slot    int
	Evicted Key
}

// Lookup returns the slot of each expert of layer the step needs (slots[i] for
// experts[i]), and the misses to copy first. The experts of this call are never evicted
// by it; more distinct experts than slots is an error.
func (c *Cache) Lookup(layer int, experts []int, slots []int, misses []Miss) ([]int, []Miss, error) {
	return c.LookupAdmit(layer, experts, slots, misses, math.MaxInt)
}

// LookupAdmit is Lookup placing at most admit of the misses (in order); a miss past that
// is counted and told to the policy like any other but gets no slot (slots[i] = −1): it
// stays where it is (mapped misses read it from host memory).
func (c *Cache) LookupAdmit(layer int, experts []int, slots []int, misses []Miss, admit int) ([]int, []Miss, error) {
	slots, misses = slots[:0], misses[:0]
	// The experts of this call, distinct: a scan, not a map (k is small, and a lookup per
	// layer and token must not allocate).
	distinct := 0
	for i, e := range experts {
		if !slices.Contains(experts[:i], e) {
			distinct++
		}
	}
	if distinct > len(c.owner) {
		return nil, nil, fmt.Errorf("model/gpu: layer %d needs %d experts at once, the cache has %d slots", layer, distinct, len(c.owner))
	}
	for _, e := range experts {
		k := Key{int32(layer), int32(e)}
		c.pol.Used(k, c.step)
		if s, ok := c.where[k]; ok {
			c.Hits++
			slots = append(slots, s)
			continue
		}
		c.Misses++
		if len(misses) >= admit {
			slots = append(slots, -1)
			continue
		}
		// evictable: any key but the experts of this call
		s, ev, ok := c.take(func(k Key) bool { return int(k.Layer) != layer || !slices.Contains(experts, int(k.Expert)) })
		if !ok {
			return nil, nil, fmt.Errorf("model/gpu: policy %s found no expert to evict for layer %d", c.pol.Name(), layer)
		}
		c.owner[s] = k
		c.where[k] = s
		slots = append(slots, s)
		misses = append(misses, Miss{Key: k, Slot: s, Evicted: ev})
	}
	return slots, misses, nil
}

// Fetch places layer's experts that are not resident (a look-ahead prefetch): free slots
// first, then the policy's victims among keys protect does not cover. It neither counts
// hits and misses nor tells the policy of a use: the experts are only predicted. It stops
// when nothing may be evicted.
func (c *Cache) Fetch(layer int, experts []int, protect func(Key) bool) []Miss {
	var out []Miss
	want := map[Key]bool{}
	for _, e := range experts {
		want[Key{int32(layer), int32(e)}] = true
	}
	for _, e := range experts {
		k := Key{int32(layer), int32(e)}
		if _, ok := c.where[k]; ok {
			continue
		}
		s, ev, ok := c.take(func(k Key) bool { return !want[k] && !protect(k) })
		if !ok {
			break
		}
		c.owner[s] = k
		c.where[k] = s
		out = append(out, Miss{Key: k, Slot: s, Evicted: ev})
	}
	return out
}

// take gives a slot for a new owner: a free one, else the slot of the policy's victim among
// the evictable resident keys, which it evicts (ev: that key; Layer −1 when the slot was
// free). ok is false when nothing is free and nothing may be evicted. Lookups, the
// look-ahead's Fetch and Reserve all take their slots here.
func (c *Cache) take(evictable func(Key) bool) (s int, ev Key, ok bool) {
	if n := len(c.free); n > 0 {
		s, c.free = c.free[n-1], c.free[:n-1]
		return s, Key{-1, -1}, true
	}
	v, ok := c.pol.Victim(c.where, evictable, c.step)
	if !ok {
		return 0, Key{}, false
	}
	s = c.where[v]
	delete(c.where, v)
	c.Evictions++
	return s, v, true
}

// reservedKey is the owner of a slot taken by Reserve and not yet landed in or released.
var reservedKey = Key{-2, -2}

// Reserve takes n slots for landings (the mapped look-ahead copies predicted misses straight
// into them, model/gpu mapped.go): free slots first, then the policy's victims among the
// resident keys whose slot protect does not cover (nil: none). A reserved slot holds no
// expert (Resident finds none in it) and is neither free nor a victim's until Land or
// Release. It appends one Miss a slot to out (Key: reservedKey; Evicted: the victim, Layer
// −1 when the slot was free) and stops early when nothing more may be evicted. It neither
// counts hits and misses nor tells the policy of a use.
func (c *Cache) Reserve(n int, protect func(slot int) bool, out []Miss) []Miss {
	for ; n > 0; n-- {
		s, ev, ok := c.take(func(k Key) bool { return protect == nil || !protect(c.where[k]) })
		if !ok {
			break
		}
		c.owner[s] = reservedKey
		out = append(out, Miss{Key: reservedKey, Slot: s, Evicted: ev})
	}
	return out
}

// IsReserved says whether slot is reserved (Reserve) and not yet landed in or released.
func (c *Cache) IsReserved(slot int) bool { return c.owner[slot] == reservedKey }

// Land makes the reserved slot k's: k's bytes were copied into it. When k already holds
// another slot (placed or landed since), or the slot is not reserved, nothing changes and
// Land reports false (the caller releases the slot).
func (c *Cache) Land(slot int, k Key) bool {
	if !c.IsReserved(slot) {
		return false
	}
	if _, ok := c.where[k]; ok {
		return false
	}
	c.owner[slot] = k
	c.where[k] = slot
	return true
}

// Release returns a reserved slot to the free slots (no-op for a slot that is not reserved).
func (c *Cache) Release(slot int) {
	if !c.IsReserved(slot) {
		return
	}
	c.owner[slot] = Key{-1, -1}
	c.free = append(c.free, slot)
}

// Preload puts keys into free slots in order (a warm start from a profile), without
// counting hits or misses; it stops when no slot is free. It returns the placements.
func (c *Cache) Preload(keys []Key) []Miss {
	var out []Miss
	for _, k := range keys {
		if _, ok := c.where[k]; ok {
			continue
		}
		n := len(c.free)
		if n == 0 {
			break
		}
		s := c.free[n-1]
		c.free = c.free[:n-1]
		c.owner[s] = k
		c.where[k] = s
		out = append(out, Miss{Key: k, Slot: s, Evicted: Key{-1, -1}})
	}
	return out
}

// Resident reports whether k holds a slot, and which.
func (c *Cache) Resident(k Key) (int, bool) { s, ok := c.where[k]; return s, ok }

// HitRate is hits / lookups so far (0 when none).
func (c *Cache) HitRate() float64 {
	if c.Hits+c.Misses == 0 {
		return 0
	}
	return float64(c.Hits) / float64(c.Hits+c.Misses)
}

// LRU evicts the expert unused for longest: the baseline. Uses keep a recency list (most
// recent at the front); a victim is found from the back.
type LRU struct {
	order *list.List // of Key
	at    map[Key]*list.Element
}

// NewLRU returns the LRU policy.
func NewLRU() *LRU { return &LRU{order: list.New(), at: map[Key]*list.Element{}} }

// Name is "lru".
func (p *LRU) Name() string { return "lru" }

// Used moves k to the front.
func (p *LRU) Used(k Key, _ int) {
	if e, ok := p.at[k]; ok {
		p.order.MoveToFront(e)
		return
	}
	p.at[k] = p.order.PushFront(k)
}

// Victim is the least recently used evictable resident key. Keys no longer resident are
// dropped from the list on the way (a later use puts them back).
func (p *LRU) Victim(resident map[Key]int, evictable func(Key) bool, _ int) (Key, bool) {
	for e := p.order.Back(); e != nil; {
		k := e.Value.(Key)
		prev := e.Prev()
		if _, in := resident[k]; !in {
			p.order.Remove(e)
			delete(p.at, k)
		} else if evictable(k) {
			return k, true
		}
		e = prev
	}
	return Key{}, false
}

func less(a, b Key) bool { return a.Layer < b.Layer || (a.Layer == b.Layer && a.Expert < b.Expert) }

// Decayed ranks experts by a use count that decays by Decay per step, seeded from a
// profile. The ranking of resident experts is recomputed every Rerank steps (or when
// its victims run out); between re-rankings victims come from that frozen order, lowest
// score first, so an expert that just arrived is not thrown out again at once.
//
// Counts and marks are dense, [layer][expert], grown as keys arrive: the policy runs on
// the host once per expert use (480 a token for the 80B-A3B), and with maps its decay,
// re-rank and marks were most of a mapped token's lookup time (BenchmarkDecayedLookup).
// The arithmetic and the order are those of the map version it replaced, kept in
// cache_test.go as the reference (TestDecayedMatchesReference).
type Decayed struct {
	Decay   float64 // per step, e.g. 0.98
	Rerank  int     // steps between re-rankings
	score   [][]float64
	seen    [][]bool // a count exists (used or seeded): what Scores returns
	ranked  int      // step of the last ranking
	order   []Key
	next    int
	stale   bool
	bumped  [][]bool    // used since the last ranking
	byScore []scoredKey // rank's scratch
}

// NewDecayed returns the decayed-count policy, seeded with profile (nil: empty).
func NewDecayed(decay float64, rerank int, profile map[Key]float64) *Decayed {
	p := &Decayed{Decay: decay, Rerank: max(1, rerank), stale: true}
	for k, v := range profile {
		p.grow(k)
		p.score[k.Layer][k.Expert] = v
		p.seen[k.Layer][k.Expert] = true
	}
	return p
}

// grow makes room for k (keys are small non-negative indices).
func (p *Decayed) grow(k Key) {
	for int(k.Layer) >= len(p.score) {
		p.score, p.seen, p.bumped = append(p.score, nil), append(p.seen, nil), append(p.bumped, nil)
	}
	l := k.Layer
	if n := int(k.Expert) + 1; n > len(p.score[l]) {
		p.score[l] = append(p.score[l], make([]float64, n-len(p.score[l]))...)
		p.seen[l] = append(p.seen[l], make([]bool, n-len(p.seen[l]))...)
		p.bumped[l] = append(p.bumped[l], make([]bool, n-len(p.bumped[l]))...)
	}
}

// get is k's count (0 when it has none).
func (p *Decayed) get(k Key) float64 {
	if int(k.Layer) < len(p.score) && int(k.Expert) < len(p.score[k.Layer]) {
		return p.score[k.Layer][k.Expert]
	}
	return 0
}

// isBumped reports whether k was used since the last ranking.
func (p *Decayed) isBumped(k Key) bool {
	return int(k.Layer) < len(p.bumped) && int(k.Expert) < len(p.bumped[k.Layer]) && p.bumped[k.Layer][k.Expert]
}

func (p *Decayed) clearBumped() {
	for _, b := range p.bumped {
		clear(b)
	}
}

// Name is "decayed".
func (p *Decayed) Name() string { return "decayed" }

// Used adds one to k's count.
func (p *Decayed) Used(k Key, step int) {
	p.decayTo(step)
	p.grow(k)
	p.score[k.Layer][k.Expert]++
	p.seen[k.Layer][k.Expert] = true
	p.bumped[k.Layer][k.Expert] = true
}

// decayTo applies the decay of the steps since the last ranking, at most once per step.
func (p *Decayed) decayTo(step int) {
	if step-p.ranked >= p.Rerank {
		f := math.Pow(p.Decay, float64(step-p.ranked))
		for _, row := range p.score {
			for i, v := range row {
				row[i] = v * f
			}
		}
		p.ranked = step
		p.stale = true
	}
}

// Victim is the lowest-ranked evictable resident key of the current ranking.
func (p *Decayed) Victim(resident map[Key]int, evictable func(Key) bool, step int) (Key, bool) {
	for pass := 0; pass < 2; pass++ {
		if p.stale || p.next >= len(p.order) {
			p.rank(resident)
		}
		for ; p.next < len(p.order); p.next++ {
			k := p.order[p.next]
			if _, in := resident[k]; in && evictable(k) && !p.isBumped(k) {
				p.next++
				return k, true
			}
		}
		// Everything ranked was used since: rank again, this time by score alone.
		p.clearBumped()
		p.stale = true
	}
	return Key{}, false
}

// rank orders the resident keys by score, then key; each key's score is read once.
func (p *Decayed) rank(resident map[Key]int) {
	p.byScore = p.byScore[:0]
	for k := range resident {
		p.byScore = append(p.byScore, scoredKey{p.get(k), k})
	}
	slices.SortFunc(p.byScore, func(a, b scoredKey) int {
		if a.s != b.s {
			if a.s < b.s {
				return -1
			}
			return 1
		}
		if less(a.k, b.k) {
			return -1
		}
		if less(b.k, a.k) {
			return 1
		}
		return 0
	})
	p.order = p.order[:0]
	for _, x := range p.byScore {
		p.order = append(p.order, x.k)
	}
	p.next, p.stale = 0, false
	p.clearBumped()
}

// scoredKey is a resident key with its score as rank read it.
type scoredKey struct {
	s float64
	k Key
}

// Scores returns the current counts (for writing a profile): every key used or seeded.
func (p *Decayed) Scores() map[Key]float64 {
	m := map[Key]float64{}
	for l, row := range p.seen {
		for e, ok := range row {
			if ok {
				m[Key{int32(l), int32(e)}] = p.score[l][e]
			}
		}
	}
	return m
}

// Profile is per-expert use counts, what --expert-profile reads and writes.
type Profile struct {
	Layers, Experts int
	Count           map[Key]float64
}

const profileHeader = "strata-expert-profile v1"

// WriteTo writes the profile as text: a header line, then "layer expert count" lines.
func (p *Profile) WriteTo(w io.Writer) (int64, error) {
	keys := make([]Key, 0, len(p.Count))
	for k := range p.Count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return less(keys[i], keys[j]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%s layers=%d experts=%d\n", profileHeader, p.Layers, p.Experts)
	for _, k := range keys {
		if p.Count[k] > 0 {
			fmt.Fprintf(&b, "%d %d %.6g\n", k.Layer, k.Expert, p.Count[k])
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// ReadProfile parses a profile; name is for errors. A profile for another shape is an error.
func ReadProfile(r io.Reader, name string, layers, experts int) (*Profile, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: empty expert profile (want a %q header)", name, profileHeader)
	}
	var l, e int
	if _, err := fmt.Sscanf(sc.Text(), profileHeader+" layers=%d experts=%d", &l, &e); err != nil {
		return nil, fmt.Errorf("%s: line 1: not an expert profile header (%q): %v", name, profileHeader, err)
	}
	if l != layers || e != experts {
		return nil, fmt.Errorf("%s: expert profile is for %d layers × %d experts, the model has %d × %d", name, l, e, layers, experts)
	}
	p := &Profile{Layers: l, Experts: e, Count: map[Key]float64{}}
	for line := 2; sc.Scan(); line++ {
		var li, ei int
		var c float64
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %g", &li, &ei, &c); err != nil {
			return nil, fmt.Errorf("%s: line %d: want \"layer expert count\": %v", name, line, err)
		}
		if li < 0 || li >= l || ei < 0 || ei >= e || !(c >= 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("%s: line %d: layer %d expert %d count %g out of range", name, line, li, ei, c)
		}
		p.Count[Key{int32(li), int32(ei)}] = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}
