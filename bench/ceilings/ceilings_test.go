// Package ceilings measures what every later benchmark is judged against, through
// Strata's own runtime: device-to-device copy bandwidth (bytes read + written), pinned
// host-to-device and device-to-host bandwidth, and kernel launch overhead. It runs only
// when STRATA_CEILINGS=1 (it is a measurement, not a unit test, and asserts nothing
// about time); results go to stdout and, with STRATA_CEILINGS_OUT=DIR, to
// DIR/ceilings.json. Build it for the GPU machine with
//
//	CGO_ENABLED=0 go test -c -o .dev/ceilings.test ./bench/ceilings
package ceilings

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/strata-hip/strata/runtime/gpu"

	_ "github.com/strata-hip/strata/runtime/cuda"
	_ "github.com/strata-hip/strata/runtime/hip"
)

// emptyPTX: two kernels that do nothing, one without arguments and one taking a 40-byte
// struct by value (the size of imma_tile's), so launch cost is measured with and
// without the extra-buffer path. clang-19 -x cuda --cuda-gpu-arch=sm_50 -nocudainc
// -nocudalib --cuda-device-only -S -O2 of
//
//	struct strata_args40 { long long w[5]; };
//	extern "C" __attribute__((global)) void strata_empty(void) {}
//	extern "C" __attribute__((global)) void strata_empty_args40(const struct strata_args40 a) {}
//
// PTX for the oldest target is JIT-compiled forward to the device's own.
const emptyPTX = `.version 4.2
.target sm_50
.address_size 64

.visible .entry strata_empty()
{
	ret;
}
.visible .entry strata_empty_args40(
	.param .align 8 .b8 strata_empty_args40_param_0[40]
)
{
	ret;
}
`

// Result is one measured ceiling.
type Result struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Reps   int     `json:"reps"`
	Detail string  `json:"detail"`
}

func median(v []float64) (med, lo, hi float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCeilings(t *testing.T) {
	if os.Getenv("STRATA_CEILINGS") != "1" {
		t.Skip("set STRATA_CEILINGS=1 to measure (GPU machine)")
	}
	l, err := gpu.Enumerate()
	must(t, err)
	var have []string
	for _, d := range l.Devices {
		have = append(have, d.Arch)
	}
	dev, err := gpu.Open(gpu.Request{Device: os.Getenv("STRATA_DEVICE"), Have: have})
	must(t, err)
	defer dev.Close()
	info := dev.Info()
	t.Logf("device %+v", info)
	s, err := dev.NewStream()
	must(t, err)
	defer s.Destroy()
	e0, err := dev.NewEvent()
	must(t, err)
	e1, err := dev.NewEvent()
	must(t, err)
	// timed runs f between two events on s and returns the device time. It waits with
	// a blocking synchronize: polling with sleeps (Event.WaitFor) lets the host idle
	// between launches and roughly doubled the single-launch figures of the first runs.
	timed := func(f func() error) float64 {
		must(t, e0.Record(s))
		must(t, f())
		must(t, e1.Record(s))
		must(t, e1.Sync())
		el, err := gpu.Elapsed(e0, e1)
		must(t, err)
		return el.Seconds()
	}
	var results []Result
	add := func(name, unit string, vals []float64, detail string) {
		m, lo, hi := median(vals)
		results = append(results, Result{Name: name, Value: m, Unit: unit, Min: lo, Max: hi, Reps: len(vals), Detail: detail})
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	// Device-to-device copy: 2 GiB, random contents, bytes read + written.
	const d2dBytes = 2 << 30
	src, err := dev.Alloc(d2dBytes)
	must(t, err)
	defer src.Free()
	dst, err := dev.Alloc(d2dBytes)
	must(t, err)
	defer dst.Free()
	chunk := make([]byte, 64<<20)
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	for off := 0; off < d2dBytes; off += len(chunk) {
		must(t, dev.Upload(src.Ptr.Add(uintptr(off)), chunk))
	}
	for _, size := range []int{256 << 20, d2dBytes} {
		var bw []float64
		for rep := 0; rep < 23; rep++ {
			sec := timed(func() error { return s.Copy(dst.Ptr, src.Ptr, size) })
			if rep >= 3 { // warm-up
				bw = append(bw, 2*float64(size)/sec/1e9)
			}
		}
		add(fmt.Sprintf("d2d copy %d MiB", size>>20), "GB/s", bw, "driver copy on a stream, events; bytes read + written")
	}

	// Pinned host <-> device: 1 GiB pinned buffer with random contents.
	const hostBytes = 1 << 30
	h, err := dev.HostAlloc(hostBytes, false)
	must(t, err)
	defer h.Free()
	hb := h.Bytes()
	for i := 0; i < len(hb); i += len(chunk) {
		copy(hb[i:], chunk)
	}
	for _, dir := range []string{"h2d", "d2h"} {
		var bw []float64
		for rep := 0; rep < 13; rep++ {
			sec := timed(func() error {
				if dir == "h2d" {
					return s.Upload(dst.Ptr, h, 0, hostBytes)
				}
				return s.Download(h, 0, src.Ptr, hostBytes)
			})
			if rep >= 3 {
				bw = append(bw, float64(hostBytes)/sec/1e9)
			}
		}
		add("pinned "+dir+" 1024 MiB", "GB/s", bw, "async copy from/to pinned host memory, events")
	}

	// Launch overhead.
	mod, err := dev.LoadModule(gpu.CodeObject{Name: "ceilings/empty", Target: info.Arch, Image: []byte(emptyPTX)})
	if err != nil {
		t.Fatalf("%v (the empty kernel is PTX; HIP devices need an AMD code object here)", err)
	}
	defer mod.Unload()
	one := gpu.Dim3{X: 1, Y: 1, Z: 1}
	for _, k := range []struct {
		sym  string
		args []byte
	}{{"strata_empty", nil}, {"strata_empty_args40", make([]byte, 40)}} {
		fn, err := mod.Func(k.sym)
		must(t, err)
		launch := func() error { return fn.Launch(s, one, gpu.Dim3{X: 32, Y: 1, Z: 1}, 0, k.args) }
		for i := 0; i < 100; i++ { // warm-up
			must(t, launch())
		}
		must(t, s.Sync())
		const batch = 10000
		var devPer, hostPer []float64
		for rep := 0; rep < 7; rep++ {
			var wall time.Duration
			sec := timed(func() error {
				start := time.Now()
				for i := 0; i < batch; i++ {
					if err := launch(); err != nil {
						return err
					}
				}
				wall = time.Since(start)
				return nil
			})
			devPer = append(devPer, sec/batch*1e6)
			hostPer = append(hostPer, wall.Seconds()/batch*1e6)
		}
		add(k.sym+" back-to-back, device time per launch", "µs", devPer, "events around 10000 launches on one stream")
		add(k.sym+" host submit per launch", "µs", hostPer, "host clock over 10000 launch calls (purego + context bind + driver)")
		// Two separate loops: interleaving them let each disturb the other.
		var single, rt []float64
		for rep := 0; rep < 2000; rep++ {
			single = append(single, timed(launch)*1e6)
		}
		for rep := 0; rep < 2000; rep++ {
			start := time.Now()
			must(t, launch())
			must(t, s.Sync())
			rt = append(rt, time.Since(start).Seconds()*1e6)
		}
		add(k.sym+" single launch, event-timed", "µs", single, "record, launch, record, synchronize; median of 2000")
		add(k.sym+" launch + stream sync, host clock", "µs", rt, "median of 2000")
	}

	fmt.Printf("\nceilings on %s (%s, %s, %d units, %.1f GiB)\n", info.Name, info.Arch, info.PCIBusID, info.Units, float64(info.TotalMem)/(1<<30))
	fmt.Printf("%-62s %12s %-5s %12s %12s %5s\n", "measurement", "median", "unit", "min", "max", "reps")
	for _, r := range results {
		fmt.Printf("%-62s %12.3f %-5s %12.3f %12.3f %5d\n", r.Name, r.Value, r.Unit, r.Min, r.Max, r.Reps)
	}
	if dir := os.Getenv("STRATA_CEILINGS_OUT"); dir != "" {
		b, err := json.MarshalIndent(map[string]any{"device": info, "results": results}, "", "  ")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "ceilings.json"), b, 0o644))
	}
}
