package tokenizer

import (
	"math/bits"
	"slices"
	"sync"
)

// BPE for long pieces (a megabyte without a space). The result is the same as bpe's, but
// instead of a heap of every pending pair the pairs sit in one bucket per merge rank
// (doubly linked lists threaded through the symbols), and a two-level bitmap finds the
// lowest non-empty bucket. Buckets are processed lowest rank first, and each bucket's
// members in position order: exactly Hugging Face's (rank, position) order, because a
// merge can never create another pair of the rank being processed (the merged token is
// longer than either part). A merge that creates a pair of lower rank than the current
// one (which learned merge lists never do, but a file could) restarts from that rank, so
// the order stays exact for any merge list.

// longPieceMin is the piece length from which bpeLong is used; below it the heap wins.
var longPieceMin = 4096

type longScratch struct {
	head         []int32  // per rank: first symbol in the bucket, -1 when empty
	bits0, bits1 []uint64 // non-empty buckets; non-zero words of bits0
	bnext, bprev []int32  // per symbol: bucket neighbours
	syms         []bpeSymbol
	members      []int32
}

// longScratchPools holds scratch space per tokenizer size; a scratch is returned with
// every bucket empty, so it never needs clearing.
var longScratchPools sync.Map // number of merges -> *sync.Pool

func (t *Tokenizer) getLongScratch() (*longScratch, *sync.Pool) {
	r := len(t.data.Merges)
	p, _ := longScratchPools.LoadOrStore(r, &sync.Pool{New: func() any {
		s := &longScratch{head: make([]int32, r), bits0: make([]uint64, (r+63)/64)}
		s.bits1 = make([]uint64, (len(s.bits0)+63)/64)
		for i := range s.head {
			s.head[i] = -1
		}
		return s
	}})
	pool := p.(*sync.Pool)
	return pool.Get().(*longScratch), pool
}

func (s *longScratch) insert(i, rank, result int32) {
	s.syms[i].pairRank, s.syms[i].pairResult = rank, result
	h := s.head[rank]
	s.bnext[i], s.bprev[i] = h, -1
	if h >= 0 {
		s.bprev[h] = i
	} else {
		s.bits0[rank>>6] |= 1 << (rank & 63)
		s.bits1[rank>>12] |= 1 << ((rank >> 6) & 63)
	}
	s.head[rank] = i
}

func (s *longScratch) remove(i int32) {
	r := s.syms[i].pairRank
	if r < 0 {
		return
	}
	p, n := s.bprev[i], s.bnext[i]
	if p >= 0 {
		s.bnext[p] = n
	} else {
		s.head[r] = n
		if n < 0 {
			s.bits0[r>>6] &^= 1 << (r & 63)
			if s.bits0[r>>6] == 0 {
				s.bits1[r>>12] &^= 1 << ((r >> 6) & 63)
			}
		}
	}
	if n >= 0 {
		s.bprev[n] = p
	}
	s.syms[i].pairRank = -1
}

// lowest returns the lowest non-empty bucket at or above from, or -1.
func (s *longScratch) lowest(from int32) int32 {
	w := int(from >> 6)
	if w >= len(s.bits0) {
		return -1
	}
	if m := s.bits0[w] >> (from & 63); m != 0 {
		return from + int32(bits.TrailingZeros64(m))
	}
	w++
	for w1 := w >> 6; w1 < len(s.bits1); w1++ {
		m := s.bits1[w1]
		if w1 == w>>6 {
			m &= ^uint64(0) << (w & 63)
		}
		if m != 0 {
			ww := w1<<6 + bits.TrailingZeros64(m)
			return int32(ww<<6 + bits.TrailingZeros64(s.bits0[ww]))
		}
	}
	return -1
}

// repair recomputes the pair of symbol i with its right neighbour and returns its rank
// (-1: none).
func (t *Tokenizer) repair(s *longScratch, i int32) int32 {
	s.remove(i)
	a := &s.syms[i]
	if a.next < 0 {
		return -1
	}
	rank, result, ok := t.merges.lookup(a.id, s.syms[a.next].id)
	if !ok {
		return -1
	}
	s.insert(i, rank, result)
	return rank
}

// bpeLong appends the ids of piece to out; same result as bpe.
func (t *Tokenizer) bpeLong(piece string, out []int32) []int32 {
	s, pool := t.getLongScratch()
	defer pool.Put(s)
	n := int32(len(piece))
	s.syms = slices.Grow(s.syms[:0], int(n))[:n]
	s.bnext = slices.Grow(s.bnext[:0], int(n))[:n]
	s.bprev = slices.Grow(s.bprev[:0], int(n))[:n]
	for i := int32(0); i < n; i++ {
		s.syms[i] = bpeSymbol{id: t.byteID[piece[i]], prev: i - 1, next: i + 1, pairRank: -1}
	}
	s.syms[n-1].next = -1
	for i := int32(0); i+1 < n; i++ {
		if p := t.bytePairs[int(piece[i])<<8|int(piece[i+1])]; p.rank >= 0 {
			s.insert(i, p.rank, p.result)
		}
	}
	for cur := int32(0); ; {
		r := s.lowest(cur)
		if r < 0 {
			break
		}
		s.members = s.members[:0]
		for i := s.head[r]; i >= 0; i = s.bnext[i] {
			s.members = append(s.members, i)
		}
		slices.Sort(s.members)
		cur = r
		for _, pos := range s.members {
			a := &s.syms[pos]
			if a.pairRank != r {
				continue // removed by an earlier merge in this bucket
			}
			result, b := a.pairResult, a.next
			s.remove(pos)
			s.remove(b)
			a.id = result
			a.next = s.syms[b].next
			if a.next >= 0 {
				s.syms[a.next].prev = pos
			}
			low := r
			if a.prev >= 0 {
				if rr := t.repair(s, a.prev); rr >= 0 && rr < low {
					low = rr
				}
			}
			if rr := t.repair(s, pos); rr >= 0 && rr < low {
				low = rr
			}
			if low < r {
				cur = low // a lower rank appeared: handle it before the rest of this bucket
				break
			}
		}
	}
	for i := int32(0); i >= 0; i = s.syms[i].next {
		out = append(out, s.syms[i].id)
	}
	if cap(s.syms) > 1<<22 {
		s.syms, s.bnext, s.bprev = nil, nil, nil
	}
	return out
}
