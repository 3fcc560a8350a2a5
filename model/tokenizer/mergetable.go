package tokenizer

import "math/bits"

// mergeTable maps a pair of token ids to its merge: an open-addressing hash table with
// linear probing, sized to at most half full. BPE looks a pair up for every symbol and
// every merge, and this table is about twice as fast as a Go map for that (no per-group
// metadata to probe, one multiply to hash, 16-byte slots).
type mergeTable struct {
	slots []mergeSlot
	shift uint // 64 - log2(len(slots))
}

type mergeSlot struct {
	key    uint64 // occupiedBit | left<<32 | right; 0 = empty
	rank   int32
	result int32
}

const occupiedBit = 1 << 63

func newMergeTable(n int) *mergeTable {
	size := 1 << bits.Len(uint(n+n/2)) // > 1.5n, a power of two
	return &mergeTable{slots: make([]mergeSlot, size), shift: uint(64 - bits.Len(uint(size-1)))}
}

func (t *mergeTable) home(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> t.shift)
}

// insert adds the pair unless it is already present (the first, lowest rank, wins); it
// reports whether it added.
func (t *mergeTable) insert(left, right, rank, result int32) bool {
	key := occupiedBit | uint64(uint32(left))<<32 | uint64(uint32(right))
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case 0:
			t.slots[i] = mergeSlot{key: key, rank: rank, result: result}
			return true
		case key:
			return false
		}
	}
}

// lookup returns the merge of left followed by right.
func (t *mergeTable) lookup(left, right int32) (rank, result int32, ok bool) {
	key := occupiedBit | uint64(uint32(left))<<32 | uint64(uint32(right))
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.rank, s.result, true
		}
		if s.key == 0 {
			return 0, 0, false
		}
	}
}
