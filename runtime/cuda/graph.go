package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// device implements gpu.GraphDriver: stream capture and graph replay (gpu-abi.md §9.5).
var _ gpu.GraphDriver = (*device)(nil)

// graphLib is the part of the symbol table for graphs. Unlike lib's, these are optional:
// a driver without one of them runs without graphs (GraphSupport says which is missing).
type graphLib struct {
	cuStreamBeginCapture      uintptr // cuStreamBeginCapture_v2: CUresult (CUstream s, CUstreamCaptureMode mode)
	cuStreamEndCapture        uintptr // CUresult cuStreamEndCapture(CUstream s, CUgraph* g)
	cuStreamGetCaptureInfoV3  uintptr // cuStreamGetCaptureInfo_v3: CUresult (CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n); 0 when absent (drivers before 12.3)
	cuStreamGetCaptureInfoV2  uintptr // cuStreamGetCaptureInfo_v2: CUresult (CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, size_t* n); the fallback
	cuGraphInstantiate        uintptr // cuGraphInstantiateWithFlags: CUresult (CUgraphExec* e, CUgraph g, unsigned long long flags)
	cuGraphExecKernelSet      uintptr // cuGraphExecKernelNodeSetParams_v2: CUresult (CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v2* p)
	cuGraphLaunch             uintptr // CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
	cuGraphExecDestroy        uintptr // CUresult cuGraphExecDestroy(CUgraphExec e)
	cuGraphDestroy            uintptr // CUresult cuGraphDestroy(CUgraph g)
	cuStreamUpdateCaptureDeps uintptr // cuStreamUpdateCaptureDependencies: CUresult (CUstream s, CUgraphNode* deps, size_t n, unsigned int flags); 0 when absent (drivers before 11.3): no branches

	missing []string // required graph symbols the library lacks
}

// resolve fills g from library h; it never fails, it records what is missing.
func (g *graphLib) resolve(h uintptr) {
	for _, s := range []binding{
		{"cuStreamBeginCapture_v2", &g.cuStreamBeginCapture},
		{"cuStreamEndCapture", &g.cuStreamEndCapture},
		{"cuGraphInstantiateWithFlags", &g.cuGraphInstantiate},
		{"cuGraphExecKernelNodeSetParams_v2", &g.cuGraphExecKernelSet},
		{"cuGraphLaunch", &g.cuGraphLaunch},
		{"cuGraphExecDestroy", &g.cuGraphExecDestroy},
		{"cuGraphDestroy", &g.cuGraphDestroy},
	} {
		if *s.addr = gpu.LookupSymbol(h, s.name); *s.addr == 0 {
			g.missing = append(g.missing, s.name)
		}
	}
	g.cuStreamUpdateCaptureDeps = gpu.LookupSymbol(h, "cuStreamUpdateCaptureDependencies")
	g.cuStreamGetCaptureInfoV3 = gpu.LookupSymbol(h, "cuStreamGetCaptureInfo_v3")
	g.cuStreamGetCaptureInfoV2 = gpu.LookupSymbol(h, "cuStreamGetCaptureInfo_v2")
	if g.cuStreamGetCaptureInfoV3 == 0 && g.cuStreamGetCaptureInfoV2 == 0 {
		g.missing = append(g.missing, "cuStreamGetCaptureInfo_v3 or _v2")
	}
}

// Stream capture (cuda.h): the relaxed mode leaves every other call on the thread legal
// (the engine's copies bind with cuCtxSetCurrent while the stream is captured), and the
// status a capturing stream reports.
const (
	captureModeRelaxed  = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
	captureStatusActive = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
)

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12.0 on; 72 bytes on a
// 64-bit host): the function, grid and block, dynamic shared memory, then either
// kernelParams or extra (here extra: the launch arena's array, as cuLaunchKernel gets
// it), then kern and ctx, both ignored when func is set.
type kernelNodeParams struct {
	fn                  uintptr
	gridX, gridY, gridZ uint32
	blkX, blkY, blkZ    uint32
	shmem               uint32
	_                   uint32 // padding to the pointer's alignment
	kernelParams        uintptr
	extra               uintptr
	kern                uintptr
	ctx                 uintptr
}

// The layout the driver reads (gpu-abi.md §9.5).
var _ = [1]struct{}{}[unsafe.Sizeof(kernelNodeParams{})-72]
var _ = [1]struct{}{}[unsafe.Offsetof(kernelNodeParams{}.shmem)-32]
var _ = [1]struct{}{}[unsafe.Offsetof(kernelNodeParams{}.extra)-48]

// GraphSupport says whether the driver has every graph call bound here.
func (d *device) GraphSupport() error {
	if m := d.l.graph.missing; len(m) > 0 {
		return fmt.Errorf("cuda: %s lacks %s: %w", d.l.path, strings.Join(m, ", "), gpu.ErrNoGraphs)
	}
	return nil
}

// bcall runs one driver function on the thread Bind prepared and checks its status.
func (d *device) bcall(name, object string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	return d.l.check(r, name, object)
}

func (d *device) CaptureBegin(s uintptr) error {
	return d.bcall("cuStreamBeginCapture_v2", "", d.l.graph.cuStreamBeginCapture, s, captureModeRelaxed)
}

// CaptureLast reads the capturing stream's dependency set, which after a launch is that
// launch's node alone.
func (d *device) CaptureLast(s uintptr) (uintptr, error) {
	g := &d.l.graph
	var status int32
	var id uint64
	var graph, deps, edges, n uintptr
	var r uintptr
	if g.cuStreamGetCaptureInfoV3 != 0 {
		r, _, _ = purego.SyscallN(g.cuStreamGetCaptureInfoV3, s, uintptr(unsafe.Pointer(&status)), uintptr(unsafe.Pointer(&id)),
			uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&edges)), uintptr(unsafe.Pointer(&n)))
	} else {
		r, _, _ = purego.SyscallN(g.cuStreamGetCaptureInfoV2, s, uintptr(unsafe.Pointer(&status)), uintptr(unsafe.Pointer(&id)),
			uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&n)))
	}
	if err := d.l.check(r, "cuStreamGetCaptureInfo", ""); err != nil {
		return 0, err
	}
	if status != captureStatusActive || n != 1 || deps == 0 {
		return 0, fmt.Errorf("cuda: stream capture status %d with %d dependencies, want an active capture ending in one node", status, n)
	}
	arr := *(*unsafe.Pointer)(unsafe.Pointer(&deps)) // the driver's array, never Go memory
	return *(*uintptr)(arr), nil
}

// device implements gpu.CaptureDepsDriver: branches inside a capture.
var _ gpu.CaptureDepsDriver = (*device)(nil)

// cuStreamUpdateCaptureDependencies' flags (cuda.h CUstreamUpdateCaptureDependencies_flags).
const (
	captureDepsAdd = 0 // CU_STREAM_ADD_CAPTURE_DEPENDENCIES
	captureDepsSet = 1 // CU_STREAM_SET_CAPTURE_DEPENDENCIES
)

// CaptureDepsSupport says whether the driver has cuStreamUpdateCaptureDependencies.
func (d *device) CaptureDepsSupport() error {
	if d.l.graph.cuStreamUpdateCaptureDeps == 0 {
		return fmt.Errorf("cuda: %s lacks cuStreamUpdateCaptureDependencies: %w", d.l.path, gpu.ErrNoBranches)
	}
	return nil
}

// CaptureDeps sets (or adds to) the capturing stream's dependency set; the driver copies
// the node array during the call.
func (d *device) CaptureDeps(s uintptr, nodes []uintptr, add bool) error {
	if len(nodes) == 0 {
		return fmt.Errorf("cuda: capture dependencies: no nodes")
	}
	flags := uintptr(captureDepsSet)
	if add {
		flags = captureDepsAdd
	}
	err := d.bcall("cuStreamUpdateCaptureDependencies", "", d.l.graph.cuStreamUpdateCaptureDeps, s,
		uintptr(unsafe.Pointer(&nodes[0])), uintptr(len(nodes)), flags)
	runtime.KeepAlive(nodes)
	return err
}

func (d *device) CaptureEnd(s uintptr) (uintptr, error) {
	var g uintptr
	err := d.bcall("cuStreamEndCapture", "", d.l.graph.cuStreamEndCapture, s, uintptr(unsafe.Pointer(&g)))
	return g, err
}

func (d *device) GraphInstantiate(graph uintptr) (uintptr, error) {
	var e uintptr
	err := d.bcall("cuGraphInstantiateWithFlags", "", d.l.graph.cuGraphInstantiate, uintptr(unsafe.Pointer(&e)), graph, 0)
	return e, err
}

// GraphSetKernel passes the packed arguments through the arena's extra array, as a launch
// does; the driver copies them during the call.
func (d *device) GraphSetKernel(exec, node, fn uintptr, grid, block gpu.Dim3, shmem uint32, args []byte, symbol string) error {
	extra, err := d.arena.Pack(args)
	if err != nil {
		return fmt.Errorf("cuda: graph node %s: %w", symbol, err)
	}
	p := kernelNodeParams{fn: fn, gridX: grid.X, gridY: grid.Y, gridZ: grid.Z, blkX: block.X, blkY: block.Y, blkZ: block.Z,
		shmem: shmem, extra: extra}
	r, _, _ := purego.SyscallN(d.l.graph.cuGraphExecKernelSet, exec, node, uintptr(unsafe.Pointer(&p)))
	d.arena.Unlock()
	return d.l.check(r, "cuGraphExecKernelNodeSetParams_v2", symbol)
}

func (d *device) GraphLaunch(exec, s uintptr) error {
	return d.bcall("cuGraphLaunch", "", d.l.graph.cuGraphLaunch, exec, s)
}

func (d *device) GraphExecDestroy(exec uintptr) error {
	return d.bcall("cuGraphExecDestroy", "", d.l.graph.cuGraphExecDestroy, exec)
}

func (d *device) GraphDestroy(g uintptr) error {
	return d.bcall("cuGraphDestroy", "", d.l.graph.cuGraphDestroy, g)
}
