package tokenizer

import "sync"

// BPE over one piece. The piece starts as one symbol per byte in a doubly linked list.
// A min-heap holds every adjacent pair that has a merge, keyed by rank<<32 | position, so
// the lowest-rank pair is always merged first and ties go to the leftmost pair, as in
// Hugging Face's BPE. Each symbol remembers the rank and result of the merge with its
// right neighbour (pairRank -1: none); a heap entry is current only while its symbol still
// has that rank, and since a rank names exactly one pair of tokens, that check is enough
// to drop entries made stale by earlier merges. Each merge removes a symbol and pushes at
// most two entries, so a piece of n bytes costs O(n log n) whatever its content.

type bpeSymbol struct {
	id         int32
	prev, next int32 // indices into the symbol slice; -1 at the ends
	pairRank   int32 // rank of the merge of this symbol with the next; -1 when none or dead
	pairResult int32 // the token that merge makes
}

type bpeScratch struct {
	syms []bpeSymbol
	heap []uint64 // rank<<32 | symbol index
}

var bpeScratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

// The heap is 4-ary: half the depth of a binary heap, and a node's children share a cache
// line, which matters for the megabyte-long pieces.
func (s *bpeScratch) siftDown(i int) {
	h := s.heap
	for {
		c := 4*i + 1
		if c >= len(h) {
			return
		}
		m := c
		for j := c + 1; j < c+4 && j < len(h); j++ {
			if h[j] < h[m] {
				m = j
			}
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *bpeScratch) push(k uint64) {
	s.heap = append(s.heap, k)
	h := s.heap
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 4
		if h[p] <= h[i] {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (s *bpeScratch) pop() uint64 {
	h := s.heap
	top := h[0]
	h[0] = h[len(h)-1]
	s.heap = h[:len(h)-1]
	s.siftDown(0)
	return top
}

// setPair records the merge of symbol i with its right neighbour and returns its heap key,
// or false when there is none.
func (t *Tokenizer) setPair(s *bpeScratch, i int32) (uint64, bool) {
	a := &s.syms[i]
	a.pairRank = -1
	if a.next < 0 {
		return 0, false
	}
	rank, result, ok := t.merges.lookup(a.id, s.syms[a.next].id)
	if !ok {
		return 0, false
	}
	a.pairRank, a.pairResult = rank, result
	return uint64(rank)<<32 | uint64(i), true
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
		p := t.bytePairs[int(piece[i])<<8|int(piece[i+1])]
		s.syms[i].pairRank, s.syms[i].pairResult = p.rank, p.result
		if p.rank >= 0 {
			s.heap = append(s.heap, uint64(p.rank)<<32|uint64(i))
		}
	}
	s.syms[n-1].pairRank = -1
	for i := (len(s.heap) - 2) / 4; i >= 0; i-- {
		s.siftDown(i)
	}
	for len(s.heap) > 0 {
		k := s.pop()
		pos, rank := int32(uint32(k)), int32(k>>32)
		a := &s.syms[pos]
		if a.pairRank != rank {
			continue // stale: the pair at pos changed since the push
		}
		b := &s.syms[a.next]
		a.id = a.pairResult
		a.next = b.next
		b.pairRank = -1
		if b.next >= 0 {
			s.syms[b.next].prev = pos
		}
		if a.prev >= 0 {
			if k, ok := t.setPair(s, a.prev); ok {
				s.push(k)
			}
		}
		if k, ok := t.setPair(s, pos); ok {
			s.push(k)
		}
	}
	for i := int32(0); i >= 0; i = s.syms[i].next {
		out = append(out, s.syms[i].id)
	}
	if cap(s.syms) > 1<<16 { // do not keep a huge buffer from one long piece in the pool
		s.syms, s.heap = nil, nil
	}
	return out
}
