package gpu

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Kind says what a planned allocation holds; the plan's error and report group by it.
type Kind int

// Kinds of device memory the engine uses. Everything but the expert cache is resident.
const (
	KindWeights     Kind = iota + 1 // dense weights: attention, delta-net, routers, shared experts, embeddings, head
	KindKVCache                     // attention KV cache for the requested context
	KindState                       // delta-net conv and recurrent state
	KindScratch                     // activations and kernel workspaces of the largest step
	KindSlotTables                  // per-layer expert slot tables read by the MoE kernels
	KindStaging                     // device-side windows the host writes through (ids, positions, logits)
	KindExpertCache                 // the expert slots: sized last, from what is left
)

func (k Kind) String() string {
	switch k {
	case KindWeights:
		return "dense weights"
	case KindKVCache:
		return "KV cache"
	case KindState:
		return "recurrent state"
	case KindScratch:
		return "scratch"
	case KindSlotTables:
		return "slot tables"
	case KindStaging:
		return "staging windows"
	case KindExpertCache:
		return "expert cache"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Need is one resident allocation the engine asks the plan for.
type Need struct {
	Name  string
	Kind  Kind
	Bytes uint64
}

// PlanInput is everything the engine will put in device memory, before the cache.
type PlanInput struct {
	Resident  []Need // every allocation except the expert slots
	SlotBytes uint64 // one expert slot: gate, up and down of one expert, aligned
	MinSlots  int    // fewest slots a step can run with (2·experts used: one layer in use, the next arriving)
	MaxSlots  int    // every expert of every layer; more slots would be idle
	// SlabGroup > 0: slots per slab a multiple of it (when a slab holds more), so that
	// groups of SlabGroup consecutive slots never straddle two slabs (the batched prompt
	// path: a layer's experts, all resident, form one moe_prefill stack).
	SlabGroup int
	// Reserve overrides the documented reserve (DefaultReserve) when nonzero.
	Reserve uint64
	// Hint names the context and budget flags for the error ("-c/--ctx-size", "--vram-budget-mib").
	CtxHint, BudgetHint string
	Ctx                 int // tokens the KV cache is sized for (for messages)
	// Extra is one more way out the error names, after the others (the engine's batched
	// prompt path: its chunk's scratch).
	Extra string
}

// Align is the alignment of every planned allocation inside its region: a multiple of
// every kernel's alignment need (16 bytes) and of the DMA engines' preferred 256.
const Align = 256

// MaxSlab caps one expert-cache allocation: the cache is allocated in slabs of whole slots
// so that no single request is huge and a slab's failure names how far the plan got.
const MaxSlab = 1 << 30

// DefaultReserve is the VRAM the plan leaves unallocated under a budget: max(1 GiB, 5 %).
// It covers what the engine's allocator does not see — the context, code-object modules
// (the CUDA driver JIT-compiles PTX into device memory), stream and event pools, the
// runtime's own lazily grown buffers — and the gap between a driver's free-memory reading
// and what it will actually hand out. llama.cpp's --fit keeps 1024 MiB per device for the
// same reasons; Ollama keeps 457–512 MiB plus an overhead setting (reliability.md §2.1).
// Under --vram-budget-mib the reserve is carved out of the budget, so a 12 GiB budget
// behaves like a 12 GiB card whose driver also needs room.
func DefaultReserve(budget uint64) uint64 {
	return max(1<<30, budget/20)
}

// Placed is a resident allocation at its offset in the resident region.
type Placed struct {
	Need
	Offset uint64
}

// Plan is the sized memory layout: the resident region (every dense allocation, at
// aligned offsets) and the expert cache (Slots slots of SlotBytes, in slabs).
type Plan struct {
	Budget        uint64
	Reserve       uint64
	Resident      []Placed
	ResidentBytes uint64
	SlotBytes     uint64
	Slots         int
	SlabSlots     int // slots per slab (the last slab may hold fewer)
	byName        map[string]int
}

func alignUp(n uint64) uint64 { return (n + Align - 1) &^ (Align - 1) }

// NewPlan sizes the expert cache for budget bytes of device memory: the resident
// allocations first, then the reserve, and the cache takes the rest in whole slots (at
// most MaxSlots). When even MinSlots do not fit, the error says what takes the memory and
// what to change.
func NewPlan(in PlanInput, budget uint64) (*Plan, error) {
	if in.SlotBytes == 0 || in.MinSlots <= 0 || in.MaxSlots < in.MinSlots {
		return nil, fmt.Errorf("model/gpu: bad plan input: slot of %d bytes, %d..%d slots", in.SlotBytes, in.MinSlots, in.MaxSlots)
	}
	p := &Plan{Budget: budget, Reserve: in.Reserve, SlotBytes: alignUp(in.SlotBytes), byName: map[string]int{}}
	if p.Reserve == 0 {
		p.Reserve = DefaultReserve(budget)
	}
	for _, n := range in.Resident {
		if n.Bytes == 0 {
			return nil, fmt.Errorf("model/gpu: planned allocation %s has 0 bytes", n.Name)
		}
		if _, dup := p.byName[n.Name]; dup {
			return nil, fmt.Errorf("model/gpu: allocation %s planned twice", n.Name)
		}
		p.byName[n.Name] = len(p.Resident)
		p.Resident = append(p.Resident, Placed{Need: n, Offset: p.ResidentBytes})
		p.ResidentBytes += alignUp(n.Bytes)
	}
	fixed := p.ResidentBytes + p.Reserve
	minCache := uint64(in.MinSlots) * p.SlotBytes
	if fixed+minCache > budget {
		return nil, p.tooSmall(in, minCache)
	}
	slots := (budget - fixed) / p.SlotBytes
	p.Slots = int(min(slots, uint64(in.MaxSlots)))
	p.SlabSlots = int(max(1, min(uint64(p.Slots), MaxSlab/p.SlotBytes)))
	if g := in.SlabGroup; g > 0 && p.SlabSlots > g && p.Slots > p.SlabSlots {
		p.SlabSlots -= p.SlabSlots % g
	}
	return p, nil
}

// tooSmall explains a budget the model cannot run in.
func (p *Plan) tooSmall(in PlanInput, minCache uint64) error {
	byKind := map[Kind]uint64{}
	for _, r := range p.Resident {
		byKind[r.Kind] += alignUp(r.Bytes)
	}
	kinds := make([]Kind, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return byKind[kinds[i]] > byKind[kinds[j]] })
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %s", k, mib(byKind[k])))
	}
	need := p.ResidentBytes + p.Reserve + minCache
	budgetFlag := in.BudgetHint
	if budgetFlag == "" {
		budgetFlag = "--vram-budget-mib"
	}
	msg := fmt.Sprintf("model/gpu: the model does not fit in %s of VRAM: resident %s (%s) + reserve %s + the smallest expert cache (%d slots × %s = %s) = %s; "+
		"give it at least %d MiB (%s, or a larger GPU)",
		mib(p.Budget), mib(p.ResidentBytes), strings.Join(parts, ", "), mib(p.Reserve), in.MinSlots, mib(p.SlotBytes), mib(minCache), mib(need),
		(need+(1<<20)-1)>>20, budgetFlag)
	if kv := byKind[KindKVCache]; kv > 0 && in.Ctx > 0 {
		ctxFlag := in.CtxHint
		if ctxFlag == "" {
			ctxFlag = "-c/--ctx-size"
		}
		msg += fmt.Sprintf(", or lower %s (the KV cache for %d tokens takes %s)", ctxFlag, in.Ctx, mib(kv))
	}
	if w := byKind[KindWeights]; w+p.Reserve > p.Budget {
		msg += fmt.Sprintf("; the dense weights alone (%s) exceed the budget less the reserve: use a smaller quantization or the CPU backend", mib(w))
	}
	if in.Extra != "" {
		msg += "; " + in.Extra
	}
	return errors.New(msg)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// String is a one-line summary for logs and --stats.
func (p *Plan) String() string {
	return fmt.Sprintf("VRAM plan: budget %s = resident %s + expert cache %d slots × %s (%s) + reserve %s + unused %s",
		mib(p.Budget), mib(p.ResidentBytes), p.Slots, mib(p.SlotBytes), mib(uint64(p.Slots)*p.SlotBytes), mib(p.Reserve),
		mib(p.Budget-p.ResidentBytes-p.Reserve-uint64(p.Slots)*p.SlotBytes))
}

// Memory is a plan allocated on a device. Every device address the engine uses comes
// from it; it has no way to allocate more.
type Memory struct {
	plan     *Plan
	resident *rt.Buffer
	slabs    []*rt.Buffer
}

// Allocate makes the plan's allocations on dev: the resident region, then the expert
// cache slab by slab. Any failure frees what was allocated and names the step.
func (p *Plan) Allocate(dev *rt.Device) (*Memory, error) {
	m := &Memory{plan: p}
	var err error
	if m.resident, err = dev.Alloc(uintptr(p.ResidentBytes)); err != nil {
		return nil, fmt.Errorf("model/gpu: allocating the resident region (%s): %w", mib(p.ResidentBytes), err)
	}
	for left := p.Slots; left > 0; left -= p.SlabSlots {
		n := min(left, p.SlabSlots)
		b, err := dev.Alloc(uintptr(uint64(n) * p.SlotBytes))
		if err != nil {
			err = fmt.Errorf("model/gpu: allocating expert-cache slab %d (%d slots, %s) after %d of %d slots: %w",
				len(m.slabs), n, mib(uint64(n)*p.SlotBytes), p.Slots-left, p.Slots, err)
			return nil, errors.Join(err, m.Free())
		}
		m.slabs = append(m.slabs, b)
	}
	return m, nil
}

// Ptr is the device address of the planned allocation name; asking for one the plan
// does not hold is a programmer error.
func (m *Memory) Ptr(name string) rt.DevPtr {
	i, ok := m.plan.byName[name]
	if !ok {
		panic("model/gpu: no planned allocation " + name)
	}
	return m.resident.Ptr.Add(uintptr(m.plan.Resident[i].Offset))
}

// Slot is the device address of expert-cache slot i.
func (m *Memory) Slot(i int) rt.DevPtr {
	s := m.plan.SlabSlots
	return m.slabs[i/s].Ptr.Add(uintptr(uint64(i%s) * m.plan.SlotBytes))
}

// Plan is the plan this memory was allocated from.
func (m *Memory) Plan() *Plan { return m.plan }

// Free releases everything.
func (m *Memory) Free() error {
	var errs []error
	if m.resident != nil {
		errs = append(errs, m.resident.Free())
		m.resident = nil
	}
	for _, b := range m.slabs {
		errs = append(errs, b.Free())
	}
	m.slabs = nil
	return errors.Join(errs...)
}
