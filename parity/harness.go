package parity

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hip/strata/runtime/gpu"
)

// Guard bytes around every buffer: written before the launch, required unchanged
// after it. A kernel that writes past either end of its output changes them.
const (
	guardLen  = 4096
	guardByte = 0xA5
)

// The two poisons an output is filled with before its two launches. 0xFF makes f32
// NaN and int32 −1; 0x3C makes every byte a plausible-looking small value. An element
// equal in both runs was written by the kernel.
var poisons = [2]byte{0xFF, 0x3C}

// Harness runs one kernel on one device with guarded, poisoned buffers.
type Harness struct {
	Dev  *gpu.Device
	Mod  *gpu.Module
	bufs []*guarded
}

// guarded is a device buffer with guard regions on both sides.
type guarded struct {
	buf   *gpu.Buffer
	n     int    // payload bytes
	init  []byte // payload before the launch: inputs, in-out buffers; nil for outputs
	inout bool
}

// Ptr is the payload's device address.
func (g *guarded) Ptr() uint64 { return uint64(g.buf.Ptr) + guardLen }

// Buf is a handle to a harness buffer.
type Buf struct{ g *guarded }

// Ptr is the device address to put in the kernel's argument struct.
func (b Buf) Ptr() uint64 { return b.g.Ptr() }

func (h *Harness) alloc(n int) (*guarded, error) {
	if n <= 0 {
		return nil, fmt.Errorf("parity: buffer of %d bytes", n)
	}
	b, err := h.Dev.Alloc(uintptr(n + 2*guardLen))
	if err != nil {
		return nil, err
	}
	g := &guarded{buf: b, n: n}
	h.bufs = append(h.bufs, g)
	return g, nil
}

// Input uploads data as a read-only input; it must come back unchanged.
func (h *Harness) Input(data []byte) (Buf, error) {
	g, err := h.alloc(len(data))
	if err != nil {
		return Buf{}, err
	}
	g.init = bytes.Clone(data)
	return Buf{g}, nil
}

// InOut uploads data the kernel reads and overwrites (e.g. an accumulator); it is
// restored before each launch.
func (h *Harness) InOut(data []byte) (Buf, error) {
	g, err := h.alloc(len(data))
	if err != nil {
		return Buf{}, err
	}
	g.init, g.inout = bytes.Clone(data), true
	return Buf{g}, nil
}

// Output allocates n bytes the kernel must write completely.
func (h *Harness) Output(n int) (Buf, error) {
	g, err := h.alloc(n)
	if err != nil {
		return Buf{}, err
	}
	return Buf{g}, nil
}

// fill writes guard + payload + guard for one launch.
func (h *Harness) fill(g *guarded, poison byte) error {
	all := bytes.Repeat([]byte{guardByte}, g.n+2*guardLen)
	if g.init != nil {
		copy(all[guardLen:], g.init)
	} else {
		for i := guardLen; i < guardLen+g.n; i++ {
			all[i] = poison
		}
	}
	return h.Dev.Upload(g.buf.Ptr, all)
}

// read downloads a buffer, checks its guards (and, for inputs, that they are
// unchanged) and returns the payload.
func (h *Harness) read(g *guarded) ([]byte, error) {
	all := make([]byte, g.n+2*guardLen)
	if err := h.Dev.Download(all, g.buf.Ptr); err != nil {
		return nil, err
	}
	for i, c := range all {
		if (i < guardLen || i >= guardLen+g.n) && c != guardByte {
			side, off := "before", guardLen-i
			if i >= guardLen+g.n {
				side, off = "after", i-guardLen-g.n+1
			}
			return nil, fmt.Errorf("guard byte %d %s a %d-byte buffer changed to %#x: the kernel wrote out of bounds", off, side, g.n, c)
		}
	}
	payload := all[guardLen : guardLen+g.n]
	if g.init != nil && !g.inout && !bytes.Equal(payload, g.init) {
		i := firstDiff(payload, g.init)
		return nil, fmt.Errorf("input byte %d changed from %#x to %#x: the kernel wrote to an input", i, g.init[i], payload[i])
	}
	return payload, nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Run launches fn twice, once under each poison, with every buffer refilled before
// each launch, and returns the payloads of outs (and in-out buffers), in the order of
// outs, from the second launch after checking that both launches wrote the same bytes.
// The second launch is timed with events.
func (h *Harness) Run(fn *gpu.Func, grid, block gpu.Dim3, args []byte, outs ...Buf) ([][]byte, time.Duration, error) {
	return h.runLaunches([]seqLaunch{{fn, grid, block, args}}, 30*time.Second, outs...)
}

// runLaunches runs ls in order on the default stream under each poison, every buffer
// refilled before each run, waiting at most wait for a run to finish, and returns the
// payloads of outs, in their order, from the second run after checking both runs wrote
// the same bytes.
// The time is the second run's, from events around it.
func (h *Harness) runLaunches(ls []seqLaunch, wait time.Duration, outs ...Buf) ([][]byte, time.Duration, error) {
	var first [][]byte
	for run, poison := range poisons {
		for _, g := range h.bufs {
			if err := h.fill(g, poison); err != nil {
				return nil, 0, err
			}
		}
		e0, err := h.Dev.NewEvent()
		if err != nil {
			return nil, 0, err
		}
		e1, err := h.Dev.NewEvent()
		if err != nil {
			return nil, 0, errors.Join(err, e0.Destroy())
		}
		err = e0.Record(nil)
		for _, l := range ls {
			if err == nil {
				err = l.fn.Launch(nil, l.grid, l.block, 0, l.args)
				if err != nil {
					err = fmt.Errorf("launch %s: %w", l.fn.Symbol(), err)
				}
			}
		}
		if err == nil {
			err = e1.Record(nil)
		}
		if err == nil {
			err = e1.WaitFor(wait)
		}
		var elapsed time.Duration
		if err == nil {
			elapsed, err = gpu.Elapsed(e0, e1)
		}
		err = errors.Join(err, e0.Destroy(), e1.Destroy())
		if err != nil {
			return nil, 0, err
		}
		got := make([][]byte, len(outs))
		for _, g := range h.bufs {
			p, err := h.read(g)
			if err != nil {
				return nil, 0, fmt.Errorf("after the launches under poison %#x: %w", poison, err)
			}
			for i, o := range outs {
				if o.g == g {
					got[i] = p
				}
			}
		}
		for i, p := range got {
			if p == nil {
				return nil, 0, fmt.Errorf("output %d is not a buffer of this harness", i)
			}
		}
		if run == 0 {
			first = got
			continue
		}
		for k := range got {
			if i := firstDiff(got[k], first[k]); i >= 0 {
				return nil, 0, fmt.Errorf("output %d byte %d differs between launches under poisons %#x and %#x (%#x vs %#x): the kernels did not write it",
					k, i, poisons[0], poisons[1], first[k][i], got[k][i])
			}
		}
		return got, elapsed, nil
	}
	panic("unreachable")
}

// Close frees every buffer.
func (h *Harness) Close() error {
	var errs []error
	for _, g := range h.bufs {
		errs = append(errs, g.buf.Free())
	}
	h.bufs = nil
	return errors.Join(errs...)
}
