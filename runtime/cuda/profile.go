package cuda

import (
	"fmt"

	"github.com/strata-hip/strata/runtime/gpu"
)

// device implements gpu.ProfileDriver (cudaProfiler.h, exported by the driver since
// CUDA 4.0; optional here all the same: a driver without them refuses the range).
var _ gpu.ProfileDriver = (*device)(nil)

func (d *device) ProfilerStart() error { return d.profiler("cuProfilerStart", d.l.cuProfilerStart) }
func (d *device) ProfilerStop() error  { return d.profiler("cuProfilerStop", d.l.cuProfilerStop) }

// profiler calls fn (CUresult fn(void), on the current context) with the context bound.
func (d *device) profiler(name string, fn uintptr) error {
	if fn == 0 {
		return fmt.Errorf("cuda: %s has no %s", d.l.path, name)
	}
	return d.call(name, "", fn)
}
