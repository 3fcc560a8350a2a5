package tokenizer

import "sync"

// BPE over one piece. The piece starts as one symbol per byte in a doubly linked list;
// a min-heap holds every adjacent pair that has a merge, ordered by merge rank and then by
// position, so the lowest-rank pair is always merged first and ties go to the leftmost
// pair, as in Hugging Face's BPE. A merge replaces two symbols by one and pushes the (at
// most two) new pairs it creates; entries made stale by earlier merges are checked and
// dropped when popped. Each byte is merged away at most once, so a piece of n bytes costs
// O(n log n) whatever its content.

type bpeSymbol struct {
	id         int32
	prev, next int32 // indices into the symbol slice; -1 at the ends
	dead       bool
}

type bpePair struct {
	rank        int32
	pos         int32 // index of the left symbol
	left, right int32 // ids the pair had when pushed, to detect staleness
	result      int32
}

type bpeScratch struct {
	syms []bpeSymbol
	heap []bpePair
}

var bpeScratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

func pairLess(a, b *bpePair) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

func (s *bpeScratch) push(p bpePair) {
	h := append(s.heap, p)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !pairLess(&h[i], &h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	s.heap = h
}

func (s *bpeScratch) pop() bpePair {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && pairLess(&h[l], &h[m]) {
			m = l
		}
		if r < len(h) && pairLess(&h[r], &h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.heap = h
	return top
}

// pushPair pushes the pair starting at symbol i if it has a merge.
func (t *Tokenizer) pushPair(s *bpeScratch, i int32) {
	j := s.syms[i].next
	if j < 0 {
		return
	}
	l, r := s.syms[i].id, s.syms[j].id
	if m, ok := t.merges[uint64(l)<<32|uint64(r)]; ok {
		s.push(bpePair{rank: m.rank, pos: i, left: l, right: r, result: m.result})
	}
}

// bpe appends the ids of piece (at least one byte) to out.
func (t *Tokenizer) bpe(piece string, out []int32) []int32 {
	s := bpeScratchPool.Get().(*bpeScratch)
	defer bpeScratchPool.Put(s)
	n := int32(len(piece))
	s.syms = s.syms[:0]
	s.heap = s.heap[:0]
	for i := int32(0); i < n; i++ {
		s.syms = append(s.syms, bpeSymbol{id: t.byteID[piece[i]], prev: i - 1, next: i + 1})
	}
	s.syms[n-1].next = -1
	for i := int32(0); i+1 < n; i++ {
		t.pushPair(s, i)
	}
	for len(s.heap) > 0 {
		p := s.pop()
		a := &s.syms[p.pos]
		if a.dead || a.next < 0 || a.id != p.left || s.syms[a.next].id != p.right {
			continue // stale: one of the two symbols changed since the push
		}
		b := &s.syms[a.next]
		a.id = p.result
		a.next = b.next
		b.dead = true
		if b.next >= 0 {
			s.syms[b.next].prev = p.pos
		}
		if a.prev >= 0 {
			t.pushPair(s, a.prev)
		}
		t.pushPair(s, p.pos)
	}
	for i := int32(0); i >= 0; i = s.syms[i].next {
		out = append(out, s.syms[i].id)
	}
	if cap(s.syms) > 1<<16 { // do not keep a huge buffer from one long piece in the pool
		s.syms, s.heap = nil, nil
	}
	return out
}
