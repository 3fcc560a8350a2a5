package gpu

import "fmt"

// ProfileDriver is what a backend implements to bound what an attached external profiler
// collects: CUDA's cuProfilerStart and cuProfilerStop, which Nsight Compute honours when
// run with --profile-from-start off. Without a profiler attached both calls do nothing.
type ProfileDriver interface {
	ProfilerStart() error
	ProfilerStop() error
}

// ProfileRange starts (on) or stops collection by a profiler attached to the process.
// A backend without the calls returns an error saying so; callers that only mark a range
// for an optional profiler may ignore it.
func (d *Device) ProfileRange(on bool) error {
	pd, ok := d.drv.(ProfileDriver)
	if !ok {
		return fmt.Errorf("gpu: %s: the backend cannot mark a profiler range", d.info.ID())
	}
	if on {
		return d.do(pd.ProfilerStart)
	}
	return d.do(pd.ProfilerStop)
}
