package parity

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// expert_fetch: the mapped look-ahead's copy (model/gpu ahead.go) and its landing (land.go).
// It moves bytes and table entries and does no arithmetic, so every output must equal the
// reference bit for bit: the working tables, the stage buffers and the landing slots. The
// host copy of the experts is a device buffer here (the kernel reads an address either way).
var (
	fetchTables = Bound{Name: "tables", Exact: true, Why: `
	The working tables are the source tables with each staged id's three entries moved by the
	same offset to its copy (its landing slot when its rank among the staged ids is below
	n_land and that entry of land is nonzero, else its stage buffer): integer arithmetic, exact.`}
	fetchStage = Bound{Name: "stage", Exact: true, Why: `
	Each staged id that does not land is copied byte for byte into its stage buffer; the other
	stage buffers keep their bytes (an in-out buffer: a stray write shows).`}
	fetchSlots = Bound{Name: "slots", Exact: true, Why: `
	Each staged id that lands is copied byte for byte into its landing slot; every other byte
	of the slot region (slots the list does not name, or names past the staged ids) keeps its
	bytes.`}
)

func init() {
	register(&Family{
		Name:   "expert_fetch",
		Bounds: map[string][]Bound{"u128": {fetchTables, fetchStage, fetchSlots}},
		// Dims: n_expert, k_used, total bytes (a multiple of 16), n_land, landing entries set
		// (a prefix of land; the rest 0), resident share in percent (ids whose entries are not
		// in their host block), extras (1: one id −1 and one duplicated id among the K).
		Cases: []Case{
			{"E=512,K=10,total=66128,no land", []int{512, 10, 16 * (4096 + 37), 0, 0, 50, 0}},
			{"E=512,K=10,total=66128,land all", []int{512, 10, 16 * (4096 + 37), 10, 10, 30, 0}},
			{"E=64,K=10,total=329648,land 3 of 10,invalid+dup", []int{64, 10, 16 * (4096*5 + 123), 10, 3, 40, 1}},
			{"E=128,K=8,total=16016,n_land=2", []int{128, 8, 16016, 2, 2, 20, 1}},
			{"E=512,K=10,total=66128,nothing staged,land all", []int{512, 10, 16 * (4096 + 37), 10, 10, 100, 0}},
		},
		Run: runExpertFetch,
	})
}

// fetchInputs draws a case's inputs: ids, source tables (host block entries for the
// non-resident ids, fake VRAM addresses for the rest), the host experts, the initial stage
// and slot bytes, and which of the M slots the land list names (by index into the slots).
type fetchIn struct {
	E, K, total, nLand, set int
	ids                     []int32
	resident                []bool
	offs                    [3]uint64
	host, stage, slots      []byte
}

func fetchDraw(rng *rand.Rand, c Case) *fetchIn {
	in := &fetchIn{E: c.Dims[0], K: c.Dims[1], total: c.Dims[2], nLand: c.Dims[3], set: c.Dims[4]}
	res, extras := c.Dims[5], c.Dims[6]
	perm := rng.Perm(in.E)
	for k := 0; k < in.K; k++ {
		in.ids = append(in.ids, int32(perm[k]))
	}
	if extras == 1 {
		in.ids[1] = -1
		in.ids[in.K-2] = in.ids[in.K-4] // a duplicate after its first
	}
	in.resident = make([]bool, in.E)
	for e := range in.resident {
		in.resident[e] = rng.IntN(100) < res
	}
	in.offs = [3]uint64{0, uint64(16 * (1 + rng.IntN(in.total/48))), uint64(in.total/2 + 16*rng.IntN(in.total/48))}
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	in.host, in.stage, in.slots = rnd(in.E*in.total), rnd(in.K*in.total), rnd(in.K*in.total)
	return in
}

// fetchRef is the kernel's contract in Go: the working tables, stage and slots after it.
func fetchRef(in *fetchIn, src []uint64, hostAt, stageAt, slotsAt uint64, land []uint64) (dst []uint64, stage, slots []byte) {
	E, T := in.E, uint64(in.total)
	dst = append([]uint64(nil), src...)
	stage, slots = append([]byte(nil), in.stage...), append([]byte(nil), in.slots...)
	staged := func(k int) bool {
		id := in.ids[k]
		if id < 0 || int(id) >= E {
			return false
		}
		base := hostAt + uint64(id)*T
		for j := 0; j < 3; j++ {
			if src[j*E+int(id)]-base >= T {
				return false
			}
		}
		return true
	}
	r := 0
	done := map[int32]bool{}
	for k := 0; k < in.K; k++ {
		if !staged(k) {
			continue
		}
		id := in.ids[k]
		to := stageAt + uint64(k)*T
		if r < in.nLand && land[r] != 0 {
			to = land[r]
		}
		r++
		from := in.host[uint64(id)*T:][:T]
		if to >= slotsAt && to < slotsAt+uint64(len(slots)) {
			copy(slots[to-slotsAt:], from)
		} else {
			copy(stage[to-stageAt:], from)
		}
		if !done[id] { // the table takes the first occurrence
			done[id] = true
			base := hostAt + uint64(id)*T
			for j := 0; j < 3; j++ {
				dst[j*E+int(id)] = to + (src[j*E+int(id)] - base)
			}
		}
	}
	return dst, stage, slots
}

func u64Bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func bytesU64(b []byte) []uint64 {
	v := make([]uint64, len(b)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return v
}

func runExpertFetch(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	in := fetchDraw(rng, c)
	E, K, T := in.E, in.K, uint64(in.total)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	host, err := h.Input(in.host)
	if err != nil {
		return Outcome{}, err
	}
	stage, err := h.InOut(in.stage)
	if err != nil {
		return Outcome{}, err
	}
	slots, err := h.InOut(in.slots)
	if err != nil {
		return Outcome{}, err
	}
	// Source tables: a resident expert's entries at a fake VRAM address (never read), the
	// others in their host block.
	src := make([]uint64, 3*E)
	for e := 0; e < E; e++ {
		base := host.Ptr() + uint64(e)*T
		if in.resident[e] {
			base = 0x7f0000000000 + uint64(e)*T
		}
		for j := 0; j < 3; j++ {
			src[j*E+e] = base + in.offs[j]
		}
	}
	// Landing list: the first set entries name slots in a shuffled order, the rest 0.
	land := make([]uint64, max(1, in.nLand))
	order := rng.Perm(K)
	for i := 0; i < in.set && i < in.nLand; i++ {
		land[i] = slots.Ptr() + uint64(order[i])*T
	}
	ids, err := h.Input(int32Bytes(in.ids))
	if err != nil {
		return Outcome{}, err
	}
	srcB, err := h.Input(u64Bytes(src))
	if err != nil {
		return Outcome{}, err
	}
	landB, err := h.Input(u64Bytes(land))
	if err != nil {
		return Outcome{}, err
	}
	dstB, err := h.Output(8 * 3 * E)
	if err != nil {
		return Outcome{}, err
	}
	const nb = 16
	args := abi.ExpertFetchArgs{Ids: ids.Ptr(), Src: srcB.Ptr(), Dst: dstB.Ptr(), Stage: stage.Ptr(), Land: landB.Ptr(), Host: host.Ptr(),
		Total: T, NExpert: int32(E), KUsed: int32(K), Nb: nb, NLand: int32(in.nLand)}
	if nb*abi.ExpertFetchThreads < 3*E {
		args.Nb = int32((3*E + abi.ExpertFetchThreads - 1) / abi.ExpertFetchThreads)
	}
	got, el, err := h.Run(fn, gpu.Dim3{X: uint32(args.Nb), Y: uint32(K + 1), Z: 1}, moBlock(abi.ExpertFetchThreads), args.Bytes(), dstB, stage, slots)
	if err != nil {
		return Outcome{}, err
	}
	wantDst, wantStage, wantSlots := fetchRef(in, src, host.Ptr(), stage.Ptr(), slots.Ptr(), land)
	reports := map[string]Report{
		"tables": CompareExact(bytesU64(got[0]), wantDst),
		"stage":  CompareExact(got[1], wantStage),
		"slots":  CompareExact(got[2], wantSlots),
	}
	moved := 0
	for k := 0; k < K; k++ {
		if id := in.ids[k]; id >= 0 && !in.resident[id] {
			moved++
		}
	}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(2*moved)*int64(T) + 2*24*int64(E)}
	return o, checkAll(bounds, reports)
}
