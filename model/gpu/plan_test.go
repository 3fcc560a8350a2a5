package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// shape30B is the Qwen3-30B-A3B shape (48 layers, 128 experts, top-8, hidden 2048, expert
// width 768, 32/4 heads of 128) with its experts in typ and the dense matrices in Q8_0.
func shape30B(t *testing.T, typ quant.Type) *Shape {
	t.Helper()
	c := model.Config{Arch: model.ArchQwen3MoE, Embd: 2048, Layers: 48, Heads: 32, HeadsKV: 4, HeadDim: 128, RopeDim: 128,
		RopeBase: 1e6, Eps: 1e-6, CtxLen: 40960, Experts: 128, ExpertsUsed: 8, ExpertFF: 768, NormTopK: true}
	rows := func(q quant.Type, k, n int) uint64 {
		rb, err := q.RowBytes(k)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(rb) * uint64(n)
	}
	const vocab = 151936
	s := &Shape{Cfg: c, Vocab: vocab}
	s.Dense = append(s.Dense, Need{"output.weight", KindWeights, rows(quant.Q8_0, 2048, vocab)}, Need{"output_norm.weight", KindWeights, 4 * 2048})
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		s.Dense = append(s.Dense,
			Need{p + "attn_q.weight", KindWeights, rows(quant.Q8_0, 2048, 4096)},
			Need{p + "attn_k.weight", KindWeights, rows(quant.Q8_0, 2048, 512)},
			Need{p + "attn_v.weight", KindWeights, rows(quant.Q8_0, 2048, 512)},
			Need{p + "attn_output.weight", KindWeights, rows(quant.Q8_0, 4096, 2048)},
			Need{p + "ffn_gate_inp.weight", KindWeights, rows(quant.F16, 2048, 128)},
			Need{p + "attn_norm.weight", KindWeights, 4 * 2048}, Need{p + "ffn_norm.weight", KindWeights, 4 * 2048},
			Need{p + "attn_q_norm.weight", KindWeights, 4 * 128}, Need{p + "attn_k_norm.weight", KindWeights, 4 * 128})
	}
	s.Expert = [3]uint64{rows(typ, 2048, 768), rows(typ, 2048, 768), rows(typ, 768, 2048)}
	return s
}

// TestPlanAllocatesAtEveryBudget sizes the plan of the 30B-A3B shape at several budgets,
// allocates all of it through the runtime's budgeted allocator over a fake device of
// the budget's size, and checks that nothing failed, that the cache took what the
// resident allocations and the reserve left (less than one slot unused), and that the
// device then has no room for another slot plus the reserve.
func TestPlanAllocatesAtEveryBudget(t *testing.T) {
	s := shape30B(t, quant.Q4_K) // 15.2 GiB of experts: partial caches up to 16 GiB, all of them above
	in, err := s.PlanInput(4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, gib := range []uint64{12, 16, 24, 40, 141} {
		t.Run(fmt.Sprintf("%dGiB", gib), func(t *testing.T) {
			budget := gib << 30
			p, err := NewPlan(in, budget)
			if err != nil {
				t.Fatal(err)
			}
			// The physical card is larger than the budget: the budget alone must hold the plan.
			dev, fake := newFakeDevice(budget + 8<<30)
			dev.SetBudget(budget)
			mem, err := p.Allocate(dev)
			if err != nil {
				t.Fatalf("allocation failed after sizing: %v (plan %s)", err, p)
			}
			used := dev.Used()
			if used+p.Reserve > budget {
				t.Fatalf("allocated %d + reserve %d > budget %d", used, p.Reserve, budget)
			}
			if p.Slots < in.MaxSlots && budget-used-p.Reserve >= p.SlotBytes {
				t.Fatalf("cache left a whole slot unused: budget %d, used %d, reserve %d, slot %d", budget, used, p.Reserve, p.SlotBytes)
			}
			if (p.Slots == in.MaxSlots) != (gib >= 24) {
				t.Fatalf("at %d GiB: %d of %d slots: %s", gib, p.Slots, in.MaxSlots, p)
			}
			if want := p.ResidentBytes + uint64(p.Slots)*p.SlotBytes; used != want {
				t.Fatalf("allocated %d bytes, plan says %d", used, want)
			}
			// Every address the engine can ask for lies inside an allocation and slots do not overlap.
			if mem.Slot(p.Slots-1)+rt.DevPtr(p.SlotBytes) > mem.slabs[len(mem.slabs)-1].Ptr+rt.DevPtr(mem.slabs[len(mem.slabs)-1].Size) {
				t.Fatalf("last slot runs past its slab")
			}
			for _, r := range p.Resident {
				if uint64(mem.Ptr(r.Name)-mem.resident.Ptr)+r.Bytes > p.ResidentBytes {
					t.Fatalf("%s runs past the resident region", r.Name)
				}
			}
			if p.Slots < in.MaxSlots {
				if _, err := dev.Alloc(uintptr(p.SlotBytes + p.Reserve)); !errors.Is(err, rt.ErrOutOfMemory) {
					t.Fatalf("a slot plus the reserve still fits after sizing (err %v): the cache did not take what was left", err)
				}
			}
			t.Logf("%s; largest allocations %v", p, fake.largest(3))
			if err := mem.Free(); err != nil {
				t.Fatal(err)
			}
			if dev.Used() != 0 || len(fake.live) != 0 {
				t.Fatalf("free left %d bytes (%d buffers)", dev.Used(), len(fake.live))
			}
		})
	}
}

// TestPlanTooSmall: a budget below resident + reserve + the smallest cache is an error that
// says what takes the memory and what to change.
func TestPlanTooSmall(t *testing.T) {
	s := shape30B(t, quant.IQ2_XS)
	in, err := s.PlanInput(32768)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(in, 3<<30)
	if err == nil {
		t.Fatal("3 GiB fits the 30B shape with a 32k context?")
	}
	for _, want := range []string{"does not fit in 3072.0 MiB", "dense weights", "KV cache", "reserve 1024.0 MiB", "--vram-budget-mib", "-c/--ctx-size", "32768 tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// The amount it names is enough.
	var need uint64
	if _, err := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "give it at least "):], "give it at least %d MiB", &need); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(in, need<<20); err != nil {
		t.Fatalf("the %d MiB the error asks for does not fit: %v", need, err)
	}
	if _, err := NewPlan(in, (need-1)<<20); err == nil {
		t.Fatalf("%d MiB, one less than the error asks for, fits: the error overstates", need-1)
	}
}

// TestPlanRealOOM: when the device has less memory than the budget claims (a driver that
// over-reports free memory), Allocate fails naming the slab and frees what it took.
func TestPlanRealOOM(t *testing.T) {
	in, err := shape30B(t, quant.Q4_K).PlanInput(4096)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(in, 16<<30)
	if err != nil {
		t.Fatal(err)
	}
	dev, fake := newFakeDevice(10 << 30)
	_, err = p.Allocate(dev)
	if !errors.Is(err, rt.ErrOutOfMemory) || !strings.Contains(err.Error(), "expert-cache slab") {
		t.Fatalf("got %v", err)
	}
	if dev.Used() != 0 || len(fake.live) != 0 {
		t.Fatalf("failed allocation left %d bytes", dev.Used())
	}
}

// TestPlanSlabGroup: with SlabGroup, a slab holds a whole number of groups, so resident
// layers (groups of consecutive slots) never straddle two slabs; the slots are unchanged.
func TestPlanSlabGroup(t *testing.T) {
	in := PlanInput{Resident: []Need{{"w", KindWeights, 1 << 20}}, SlotBytes: 1300 << 10, MinSlots: 16, MaxSlots: 48 * 128}
	p0, err := NewPlan(in, 16<<30)
	if err != nil {
		t.Fatal(err)
	}
	in.SlabGroup = 128
	p, err := NewPlan(in, 16<<30)
	if err != nil {
		t.Fatal(err)
	}
	if p.Slots != p0.Slots || p.SlabSlots%128 != 0 || p.SlabSlots > p0.SlabSlots || p0.SlabSlots%128 == 0 {
		t.Fatalf("slots %d/%d, slab slots %d (ungrouped %d)", p.Slots, p0.Slots, p.SlabSlots, p0.SlabSlots)
	}
}

// TestSplitLen: at every length up to the largest context, the split policy (and every
// fixed setting, the policy before included) keeps attention_decode's contract within the
// parity bound's limits (1 ≤ split_len ≤ 1024, ≤ 256 splits) and gives no more splits than
// the part workspace the plan sizes for that context holds; the policy's lengths at a few
// points; and at Qwen3-30B-A3B's shape (4 kv heads, hd 128) the split grid has ≥ 132
// blocks (the H200's SMs) from 33 positions on.
func TestSplitLen(t *testing.T) {
	const ctx = 256 * 1024
	for _, hd := range []int{64, 128, 256} {
		for _, fixed := range []int{0, AttnSplitOld, 1, 8, 64, 5000} {
			most := 0
			for n := 1; n <= ctx; n++ {
				sl := splitLen(n, fixed, hd)
				ns := (n + sl - 1) / sl
				if sl < 1 || sl > 1024 || ns > 256 {
					t.Fatalf("hd %d, fixed %d, n %d: split_len %d, %d splits", hd, fixed, n, sl, ns)
				}
				most = max(most, ns)
				if c := splitCap(n); most > c {
					t.Fatalf("hd %d, fixed %d: %d splits by n %d, the workspace for ctx %d holds %d", hd, fixed, most, n, n, c)
				}
				if fixed == 0 && hd == 128 && n >= 33 && n <= attnNewMax && 4*ns < 132 {
					t.Fatalf("n %d: split_len %d gives %d blocks at 4 kv heads", n, sl, 4*ns)
				}
			}
		}
	}
	for _, c := range []struct{ n, fixed, hd, want int }{
		// the policy before
		{1, AttnSplitOld, 128, 8}, {384, AttnSplitOld, 128, 8}, {385, AttnSplitOld, 128, 16}, {1536, AttnSplitOld, 128, 16},
		{1537, AttnSplitOld, 128, 24}, {4096, AttnSplitOld, 128, 32}, {16384, AttnSplitOld, 128, 64}, {ctx, AttnSplitOld, 256, 1024},
		// the policy: hd 128 (Qwen3-30B-A3B), hd 256 (Qwen3-Next-80B-A3B)
		{1, 0, 128, 1}, {14, 0, 128, 1}, {64, 0, 128, 1}, {65, 0, 128, 2}, {136, 0, 128, 2}, {256, 0, 128, 2},
		{14, 0, 64, 1},
		// past attnNewMax, and at hd 256 everywhere, the policy before (it measured faster there)
		{257, 0, 128, 8}, {1024, 0, 128, 16}, {4096, 0, 128, 32}, {16384, 0, 128, 64}, {ctx, 0, 128, 1024},
		{14, 0, 256, 8}, {128, 0, 256, 8}, {129, 0, 256, 8}, {1024, 0, 256, 16}, {4096, 0, 256, 32},
		{100, 64, 128, 64}, {20000, 64, 128, 79}, {100, 1, 128, 1},
	} {
		if got := splitLen(c.n, c.fixed, c.hd); got != c.want {
			t.Errorf("splitLen(%d, %d, %d) = %d, want %d", c.n, c.fixed, c.hd, got, c.want)
		}
	}
}
