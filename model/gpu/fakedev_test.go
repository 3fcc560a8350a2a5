package gpu

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	rt "github.com/strata-hip/strata/runtime/gpu"
)

// fakeDriver is a device with `phys` bytes of memory and no compute: allocations come
// from a simple address counter and fail past phys, as a real card's would. Wrapped by
// rt.NewDevice, the runtime's own budget (SetBudget) sits on top, exactly as on a GPU.
type fakeDriver struct {
	phys, used uint64
	next       rt.DevPtr
	live       map[rt.DevPtr]uint64
	allocs     []uint64 // every successful allocation's size, in order
	copies     []fakeCopy
	records    int // events recorded
	waits      int // stream waits on events
	arch       string
	host       [][]byte // pinned host allocations
	launches   map[string]int
	// onD2H, when set, fills device-to-host copies (the engine's windows) instead of
	// leaving them untouched.
	onD2H func(dst []byte)
	emu   *emu // memory and kernels (emu_test.go); nil: allocations hold nothing
	// hostLimit > 0: pinned host allocations above it fail as out of memory
	hostLimit uintptr
	// units: the multiprocessor count Info reports (read into the device's info when it is
	// made: fakeUnits then; 0: unknown, and mmvq keeps its default geometry, Engine.mmvqGeom).
	units int
	// rt.BoundDriver: bound is true between Bind and Unbind; boundLaunches counts the
	// launches made through LaunchBound (which fail when not bound).
	bound         bool
	boundLaunches int
	// rt.GraphDriver: work queued on a capturing stream is recorded, not run; a graph
	// launch runs its recorded work with the node parameters set since. noGraphs: the
	// backend has none (as HIP).
	noGraphs     bool
	capturing    map[uintptr]*fakeGraph
	graphs       map[uintptr]*fakeGraph // captured and instantiated, by handle
	nextHandle   uintptr
	graphLaunch  int
	graphSets    int
	graphFailing error // returned by the next GraphLaunch
	// mapHost: the device maps pinned host memory (DeviceInfo.CanMapHost): a host
	// buffer's alias is its host address, and the emulated kernels read through it.
	mapHost bool
	// mapPinFails: pinned host allocations asked for with a device alias fail (a driver
	// that refuses to map them); proofFails: the mapping proof's device write fails.
	mapPinFails, proofFails bool
	// captureEndErr, when set, is returned by the next CaptureEnd (which still ends the
	// capture, as the driver's does).
	captureEndErr error
	// notReady > 0: event queries report not ready (counting down); beforeH2D and
	// beforeLaunch, when set, see each host-to-device copy and kernel launch as it runs,
	// onRecord and onWait each event record and stream wait (by stream).
	notReady     int
	beforeH2D    func(dst, n, s uintptr)
	beforeLaunch func(sym string)
	onRecord     func(s uintptr)
	onWait       func(s uintptr)
	// rt.ProfileDriver: profiling is true inside a profiler range, which counted
	// profiledGraphs graph launches and profiledLaunches kernel launches outside a graph.
	profiling                        bool
	inGraph                          bool
	profiledGraphs, profiledLaunches int
	// rt.DepLaunchDriver: noDep makes DepLaunchSupport refuse (a device before sm_90, or
	// HIP); depLaunches counts programmatic launches by symbol (captured ones included).
	// lastKernel tracks, per stream, whether the last work queued was a kernel launch,
	// independently of package gpu's bookkeeping: a programmatic launch after anything
	// else (a copy, memset, event record or wait, a graph launch, a capture's start) is
	// an error, as is one of a kernel outside pdlFamilies.
	noDep bool
	// rt.CaptureDepsDriver: noBranches makes CaptureDepsSupport refuse; forks and joins
	// count the dependency sets set and added to.
	noBranches   bool
	forks, joins int
	depLaunches  map[string]int
	lastKernel   map[uintptr]bool
}

// streamOp records the kind of the last work queued on stream s.
func (f *fakeDriver) streamOp(s uintptr, kernel bool) {
	if f.lastKernel == nil {
		f.lastKernel = map[uintptr]bool{}
	}
	f.lastKernel[s] = kernel
}

func (f *fakeDriver) DepLaunchSupport() error {
	if f.noDep {
		return fmt.Errorf("fake: %w", rt.ErrNoDepLaunch)
	}
	return nil
}

func (f *fakeDriver) LaunchBoundDep(fn uintptr, grid, block rt.Dim3, shmem uint32, s uintptr, args []byte, sym string) error {
	if f.noDep {
		return fmt.Errorf("fake: programmatic launch of %s on a driver without them", sym)
	}
	if !f.lastKernel[s] {
		return fmt.Errorf("fake: programmatic launch of %s after work that is no kernel launch", sym)
	}
	if !pdlSymbol(sym) {
		return fmt.Errorf("fake: programmatic launch of %s, which is of no family in pdlFamilies", sym)
	}
	if f.depLaunches == nil {
		f.depLaunches = map[string]int{}
	}
	f.depLaunches[sym]++
	if err := f.LaunchBound(fn, grid, block, shmem, s, args, sym); err != nil {
		return err
	}
	if g := f.capturing[s]; g != nil {
		g.ops[len(g.ops)-1].dep = true
	}
	return nil
}

// pdlSymbol reports whether kernel symbol sym belongs to one of pdlFamilies.
func pdlSymbol(sym string) bool {
	for fam := range pdlFamilies {
		if strings.HasPrefix(sym, "strata_"+fam+"_") {
			return true
		}
	}
	return false
}

func (f *fakeDriver) ProfilerStart() error {
	if f.profiling {
		return fmt.Errorf("fake: profiler range opened twice")
	}
	f.profiling = true
	return nil
}

func (f *fakeDriver) ProfilerStop() error {
	if !f.profiling {
		return fmt.Errorf("fake: profiler range closed while not open")
	}
	f.profiling = false
	return nil
}

// fakeGraph is a captured stream: its launches and copies in order, and each node's index.
// deps is the dependency set CaptureDeps gave the capturing stream (nil: its last op).
type fakeGraph struct {
	ops   []fakeOp
	index map[uintptr]int
	deps  []uintptr
}

// add appends op to the capture, depending on the stream's dependency set.
func (g *fakeGraph) add(op fakeOp) {
	op.after, g.deps = g.deps, nil
	g.ops = append(g.ops, op)
}

// order is the order a launch of g runs its ops in: a topological order of their
// dependencies (each op's after, else the op before it) that always takes the ready op
// captured last, so a branch runs before the chain it was forked beside. Work that a
// branch does not declare as a dependency then runs in the other order than captured,
// and the emulated engine's bits say whether that mattered.
func (g *fakeGraph) order() ([]int, error) {
	idx := map[uintptr]int{}
	for i, op := range g.ops {
		idx[op.node] = i
	}
	need := make([][]int, len(g.ops))
	for i, op := range g.ops {
		switch {
		case op.after != nil:
			for _, n := range op.after {
				j, ok := idx[n]
				if !ok || j >= i {
					return nil, fmt.Errorf("fake: op %d depends on node %d, not an earlier op of its graph", i, n)
				}
				need[i] = append(need[i], j)
			}
		case i > 0:
			need[i] = []int{i - 1}
		}
	}
	done := make([]bool, len(g.ops))
	var out []int
	for len(out) < len(g.ops) {
		pick := -1
		for i := len(g.ops) - 1; i >= 0 && pick < 0; i-- {
			if done[i] {
				continue
			}
			ready := true
			for _, j := range need[i] {
				ready = ready && done[j]
			}
			if ready {
				pick = i
			}
		}
		done[pick] = true
		out = append(out, pick)
	}
	return out, nil
}

// CaptureDepsSupport: the fake can branch unless noBranches.
func (f *fakeDriver) CaptureDepsSupport() error {
	if f.noBranches {
		return fmt.Errorf("fake: %w", rt.ErrNoBranches)
	}
	return nil
}

// CaptureDeps sets or adds to the capturing stream's dependency set; forks counts the sets.
func (f *fakeDriver) CaptureDeps(s uintptr, nodes []uintptr, add bool) error {
	g := f.capturing[s]
	if g == nil || len(g.ops) == 0 {
		return fmt.Errorf("fake: capture dependencies of a stream not capturing")
	}
	if add {
		if g.deps == nil {
			g.deps = []uintptr{g.ops[len(g.ops)-1].node}
		}
		g.deps = append(g.deps, nodes...)
		f.joins++
		return nil
	}
	g.deps = append([]uintptr(nil), nodes...)
	f.forks++
	return nil
}

type fakeOp struct {
	node           uintptr
	launch         bool
	fn             uintptr
	grid, block    rt.Dim3
	args           []byte
	sym            string
	dep            bool      // launched with a programmatic dependency (LaunchBoundDep)
	after          []uintptr // the nodes it depends on (nil: the op before it)
	kind           rt.CopyKind
	dst, src, n, s uintptr
}

func (f *fakeDriver) handle() uintptr { f.nextHandle++; return 1000 + f.nextHandle }

func (f *fakeDriver) GraphSupport() error {
	if f.noGraphs {
		return fmt.Errorf("fake: %w", rt.ErrNoGraphs)
	}
	return nil
}
func (f *fakeDriver) CaptureBegin(s uintptr) error {
	f.streamOp(s, false)
	if !f.bound {
		return fmt.Errorf("fake: capture on an unbound thread")
	}
	if f.capturing == nil {
		f.capturing, f.graphs = map[uintptr]*fakeGraph{}, map[uintptr]*fakeGraph{}
	}
	f.capturing[s] = &fakeGraph{}
	return nil
}
func (f *fakeDriver) CaptureLast(s uintptr) (uintptr, error) {
	g := f.capturing[s]
	if g == nil || len(g.ops) == 0 {
		return 0, fmt.Errorf("fake: nothing captured")
	}
	return g.ops[len(g.ops)-1].node, nil
}
func (f *fakeDriver) CaptureEnd(s uintptr) (uintptr, error) {
	f.streamOp(s, false)
	g := f.capturing[s]
	delete(f.capturing, s)
	if err := f.captureEndErr; err != nil {
		f.captureEndErr = nil
		return 0, err
	}
	h := f.handle()
	f.graphs[h] = g
	return h, nil
}
func (f *fakeDriver) GraphInstantiate(graph uintptr) (uintptr, error) {
	h := f.handle()
	if c := f.graphs[graph]; c.deps != nil {
		return 0, fmt.Errorf("fake: capture ended with a dependency set no op used")
	}
	g := &fakeGraph{ops: append([]fakeOp(nil), f.graphs[graph].ops...), index: map[uintptr]int{}}
	for i, op := range g.ops {
		g.index[op.node] = i
	}
	f.graphs[h] = g
	return h, nil
}
func (f *fakeDriver) GraphSetKernel(exec, node, fn uintptr, grid, block rt.Dim3, _ uint32, args []byte, sym string) error {
	if !f.bound {
		return fmt.Errorf("fake: graph update on an unbound thread")
	}
	f.graphSets++
	g := f.graphs[exec]
	i, ok := g.index[node]
	if op := &g.ops[i]; ok && op.launch && op.fn == fn {
		op.grid, op.block, op.args = grid, block, append(op.args[:0], args...)
		return nil
	}
	return fmt.Errorf("fake: graph has no kernel node %d of %s", node, sym)
}
func (f *fakeDriver) GraphLaunch(exec, s uintptr) error {
	if !f.bound {
		return fmt.Errorf("fake: graph launch on an unbound thread")
	}
	if err := f.graphFailing; err != nil {
		f.graphFailing = nil
		return err
	}
	f.graphLaunch++
	if f.profiling {
		f.profiledGraphs++
	}
	f.inGraph = true
	defer func() { f.inGraph = false; f.streamOp(s, false) }()
	g := f.graphs[exec]
	order, err := g.order()
	if err != nil {
		return err
	}
	for _, i := range order {
		op := g.ops[i]
		var err error
		if op.launch {
			err = f.Launch(op.fn, op.grid, op.block, 0, s, op.args, op.sym)
		} else {
			err = f.CopyAsync(op.kind, op.dst, op.src, op.n, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
func (f *fakeDriver) GraphExecDestroy(exec uintptr) error { delete(f.graphs, exec); return nil }
func (f *fakeDriver) GraphDestroy(g uintptr) error        { delete(f.graphs, g); return nil }

func (f *fakeDriver) Bind() error { f.bound = true; return nil }
func (f *fakeDriver) Unbind()     { f.bound = false }
func (f *fakeDriver) LaunchBound(fn uintptr, grid, block rt.Dim3, shmem uint32, s uintptr, args []byte, sym string) error {
	if !f.bound {
		return fmt.Errorf("fake: bound launch of %s on an unbound thread", sym)
	}
	f.boundLaunches++
	f.streamOp(s, true)
	if g := f.capturing[s]; g != nil {
		g.add(fakeOp{node: f.handle(), launch: true, fn: fn, grid: grid, block: block, args: append([]byte(nil), args...), sym: sym})
		return nil
	}
	return f.Launch(fn, grid, block, shmem, s, args, sym)
}

// hostAt is the fake's pinned host memory at address p, n bytes.
func (f *fakeDriver) hostAt(p, n uintptr) []byte {
	for _, m := range f.host {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if p >= base && p+n <= base+uintptr(len(m)) {
			return m[p-base : p-base+n]
		}
	}
	return nil
}

type fakeCopy struct {
	dst, src, n uintptr
	stream      uintptr
}

// fakeUnits is the unit count of the fake devices made from now on (0 by default; a test
// that sets it resets it: no test of this package runs in parallel).
var fakeUnits int

func newFakeDevice(phys uint64) (*rt.Device, *fakeDriver) {
	return newFakeDeviceArch(phys, "")
}

func newFakeDeviceArch(phys uint64, arch string) (*rt.Device, *fakeDriver) {
	return newFakeDeviceMap(phys, arch, false)
}

// newFakeDeviceMap is newFakeDeviceArch with fakeDriver.mapHost (read into the device's
// info when it is made).
func newFakeDeviceMap(phys uint64, arch string, mapHost bool) (*rt.Device, *fakeDriver) {
	f := &fakeDriver{phys: phys, next: 1 << 20, live: map[rt.DevPtr]uint64{}, arch: arch, mapHost: mapHost, units: fakeUnits}
	return rt.NewDevice(f), f
}

func (f *fakeDriver) Info() rt.DeviceInfo {
	arch := f.arch
	if arch == "" {
		arch = "fk_1"
	}
	return rt.DeviceInfo{Backend: "fake", Name: "Fake", Arch: arch, TotalMem: f.phys, CanMapHost: f.mapHost, UnifiedAddressing: f.mapHost, Units: f.units}
}
func (f *fakeDriver) Close() error                     { return nil }
func (f *fakeDriver) MemInfo() (uint64, uint64, error) { return f.phys - f.used, f.phys, nil }
func (f *fakeDriver) Synchronize() error               { return nil }
func (f *fakeDriver) Alloc(n uintptr) (rt.DevPtr, error) {
	if f.used+uint64(n) > f.phys {
		return 0, &rt.Error{Backend: "fake", Call: "alloc", Object: fmt.Sprint(n), Code: 2, Name: "OutOfMemory"}
	}
	p := f.next
	f.next += rt.DevPtr((n + 4095) &^ 4095)
	f.used += uint64(n)
	f.live[p] = uint64(n)
	f.allocs = append(f.allocs, uint64(n))
	if f.emu != nil {
		f.emu.alloc(p, n)
	}
	return p, nil
}
func (f *fakeDriver) Free(p rt.DevPtr) error {
	n, ok := f.live[p]
	if !ok {
		return fmt.Errorf("fake: free of unknown %#x", uintptr(p))
	}
	delete(f.live, p)
	f.used -= n
	if f.emu != nil {
		f.emu.free(p)
	}
	return nil
}
func (f *fakeDriver) Upload(dst rt.DevPtr, src []byte) error {
	if f.emu != nil {
		copy(f.emu.at(uint64(dst), len(src)), src)
	}
	return nil
}
func (f *fakeDriver) Download(dst []byte, src rt.DevPtr) error {
	if f.emu != nil {
		copy(dst, f.emu.at(uint64(src), len(dst)))
	}
	return nil
}
func (f *fakeDriver) CopyAsync(kind rt.CopyKind, dst, src, n, s uintptr) error {
	f.streamOp(s, false)
	if g := f.capturing[s]; g != nil {
		g.add(fakeOp{node: f.handle(), kind: kind, dst: dst, src: src, n: n, s: s})
		return nil
	}
	switch {
	case kind == rt.DeviceToHost && f.emu != nil:
		copy(f.hostAt(dst, n), f.emu.at(uint64(src), int(n)))
	case kind == rt.DeviceToHost:
		if f.onD2H != nil {
			if h := f.hostAt(dst, n); h != nil {
				f.onD2H(h)
			}
		}
	case kind == rt.HostToDevice && f.emu != nil:
		if f.beforeH2D != nil {
			f.beforeH2D(dst, n, s)
		}
		copy(f.emu.at(uint64(dst), int(n)), f.hostAt(src, n))
	}
	if kind != rt.DeviceToHost {
		f.copies = append(f.copies, fakeCopy{dst, src, n, s})
	}
	return nil
}
func (f *fakeDriver) MemsetAsync(dst rt.DevPtr, v byte, n, s uintptr) error {
	f.streamOp(s, false)
	if f.emu != nil {
		b := f.emu.at(uint64(dst), int(n))
		for i := range b {
			b[i] = v
		}
	}
	return nil
}
func (f *fakeDriver) HostAlloc(n uintptr, mapped bool) (unsafe.Pointer, error) {
	if mapped && f.mapPinFails {
		return nil, &rt.Error{Backend: "fake", Call: "hostalloc", Object: "mapped", Code: 1, Name: "InvalidValue"}
	}
	if f.hostLimit > 0 && n > f.hostLimit {
		return nil, &rt.Error{Backend: "fake", Call: "hostalloc", Object: fmt.Sprint(n), Code: 2, Name: "OutOfMemory"}
	}
	mem, err := rt.AllocAnon(int(n))
	if err != nil {
		return nil, err
	}
	f.host = append(f.host, mem)
	return unsafe.Pointer(&mem[0]), nil
}
func (f *fakeDriver) HostFree(unsafe.Pointer) error                    { return nil }
func (f *fakeDriver) HostRegister(unsafe.Pointer, uintptr, bool) error { return nil }
func (f *fakeDriver) HostUnregister(unsafe.Pointer) error              { return nil }
func (f *fakeDriver) HostDevicePtr(p unsafe.Pointer) (rt.DevPtr, error) {
	if !f.mapHost {
		return 0, fmt.Errorf("fake: no mapping")
	}
	if f.emu != nil {
		f.emu.host = func(p uint64, n int) []byte { return f.hostAt(uintptr(p), uintptr(n)) }
	}
	return rt.DevPtr(uintptr(p)), nil
}

// FillWords writes through a host alias (the mapping proof); the fake has no other kernels.
func (f *fakeDriver) FillWords(p rt.DevPtr, words int, v uint32) error {
	h := f.hostAt(uintptr(p), uintptr(4*words))
	if !f.mapHost || h == nil || f.proofFails {
		return fmt.Errorf("fake: no kernels")
	}
	for i := 0; i < words; i++ {
		binary.LittleEndian.PutUint32(h[4*i:], v)
	}
	return nil
}
func (f *fakeDriver) LoadModule([]byte, string) (uintptr, error) { return 1, nil }
func (f *fakeDriver) UnloadModule(uintptr) error                 { return nil }
func (f *fakeDriver) Function(uintptr, string) (uintptr, error)  { return 2, nil }
func (f *fakeDriver) Launch(_ uintptr, grid, block rt.Dim3, _ uint32, s uintptr, args []byte, sym string) error {
	f.streamOp(s, true)
	if f.launches == nil {
		f.launches = map[string]int{}
	}
	f.launches[sym]++
	if f.profiling && !f.inGraph {
		f.profiledLaunches++
	}
	if f.beforeLaunch != nil {
		f.beforeLaunch(sym)
	}
	if f.emu != nil {
		f.emu.launch(sym, grid, block, args)
	}
	return nil
}
func (f *fakeDriver) StreamCreate() (uintptr, error) { return f.handle(), nil }
func (f *fakeDriver) StreamSync(uintptr) error       { return nil }
func (f *fakeDriver) StreamDestroy(uintptr) error    { return nil }
func (f *fakeDriver) StreamWaitEvent(s, _ uintptr) error {
	f.streamOp(s, false)
	f.waits++
	if f.onWait != nil {
		f.onWait(s)
	}
	return nil
}
func (f *fakeDriver) EventCreate() (uintptr, error) { return 4, nil }
func (f *fakeDriver) EventRecord(_, s uintptr) error {
	f.streamOp(s, false)
	f.records++
	if f.onRecord != nil {
		f.onRecord(s)
	}
	return nil
}
func (f *fakeDriver) EventSync(uintptr) error { return nil }
func (f *fakeDriver) EventQuery(uintptr) error {
	if f.notReady > 0 {
		f.notReady--
		return fmt.Errorf("fake: %w", rt.ErrNotReady)
	}
	return nil
}
func (f *fakeDriver) EventElapsed(uintptr, uintptr) (float32, error) { return 0, nil }
func (f *fakeDriver) EventDestroy(uintptr) error                     { return nil }

// largest returns the n largest allocation sizes (for messages).
func (f *fakeDriver) largest(n int) []uint64 {
	s := append([]uint64(nil), f.allocs...)
	sort.Slice(s, func(i, j int) bool { return s[i] > s[j] })
	return s[:min(n, len(s))]
}
