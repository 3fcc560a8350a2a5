package gpu

import (
	"errors"
	"fmt"

	rt "github.com/strata-hip/strata/runtime/gpu"
)

// DefaultGroup is the default number of expert copies per completion event. One event
// per expert costs a record (and a wait on the compute stream) per copy; one per layer
// gives the compute stream nothing to start on until the last copy lands. Eight is a
// qwen3moe layer's top-k, so one event per layer in the worst case. Measured on the H200
// (bench/results/2026-11-29-final-s4, 30B-A3B Q2_0 at a 4 GiB budget, copy path, 64
// tokens, one run each): groups of 1, 8 and 32 decode at 128.2, 166.6 and 89.9 tok/s.
const DefaultGroup = 8

// Copy is one expert's host-to-device copy: bytes [Off, Off+N) of the pinned host buffer
// to Dst. The Copier never reorders, merges or splits copies.
type Copy struct {
	Dst rt.DevPtr
	Off int
	N   int
}

// Group is a run of consecutive copies whose completion one event marks.
type Group struct {
	First, Count int // indices into the batch
	Bytes        int64
	ev           *rt.Event
}

// Copier issues expert copies on its own stream in groups of Size, recording one event
// after each group, and makes a compute stream wait for them.
type Copier struct {
	dev    *rt.Device
	stream *rt.Stream
	src    *rt.HostBuffer
	Size   int // copies per group (≥ 1)

	pool   []*rt.Event // events not in use
	groups []Group     // the current batch's groups
	start  *rt.Event   // recorded before the batch's first copy, for timing

	Copies int64 // copies issued
	Bytes  int64 // bytes copied
	Events int64 // group events recorded
}

// NewCopier makes a copier reading from src with group size size (≤ 0: DefaultGroup).
func NewCopier(dev *rt.Device, src *rt.HostBuffer, size int) (*Copier, error) {
	if size <= 0 {
		size = DefaultGroup
	}
	s, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	return &Copier{dev: dev, stream: s, src: src, Size: size}, nil
}

func (c *Copier) event() (*rt.Event, error) {
	if n := len(c.pool); n > 0 {
		e := c.pool[n-1]
		c.pool = c.pool[:n-1]
		return e, nil
	}
	return c.dev.NewEvent()
}

// Issue queues copies in order, one event after every Size of them (and after the last),
// and returns their groups. Groups accumulate until Finish; Wait orders a compute stream
// after the groups it is given.
func (c *Copier) Issue(copies []Copy) ([]Group, error) {
	if len(copies) == 0 {
		return nil, nil
	}
	var err error
	if len(c.groups) == 0 {
		if c.start == nil {
			if c.start, err = c.dev.NewEvent(); err != nil {
				return nil, err
			}
		}
		if err := c.start.Record(c.stream); err != nil {
			return nil, err
		}
	}
	first := len(c.groups)
	for i := 0; i < len(copies); i += c.Size {
		g := Group{First: i, Count: min(c.Size, len(copies)-i)}
		for _, cp := range copies[i : i+g.Count] {
			if err := c.stream.Upload(cp.Dst, c.src, cp.Off, cp.N); err != nil {
				return nil, fmt.Errorf("model/gpu: expert copy of %d bytes: %w", cp.N, err)
			}
			g.Bytes += int64(cp.N)
		}
		if g.ev, err = c.event(); err != nil {
			return nil, err
		}
		if err := g.ev.Record(c.stream); err != nil {
			return nil, err
		}
		c.groups = append(c.groups, g)
		c.Copies += int64(g.Count)
		c.Bytes += g.Bytes
		c.Events++
	}
	return c.groups[first:], nil
}

// After makes the copies issued later wait for ev (recorded on another stream).
func (c *Copier) After(ev *rt.Event) error { return c.stream.Wait(ev) }

// Wait makes work queued later on s wait for groups.
func (c *Copier) Wait(s *rt.Stream, groups []Group) error {
	for _, g := range groups {
		if err := s.Wait(g.ev); err != nil {
			return err
		}
	}
	return nil
}

// Pending reports how many groups of the current batch have not completed (a poll, no wait).
func (c *Copier) Pending() (int, error) {
	n := 0
	for _, g := range c.groups {
		done, err := g.ev.Done()
		if err != nil {
			return 0, err
		}
		if !done {
			n++
		}
	}
	return n, nil
}

// LastPending reports whether the last group issued is still pending (a poll); ok is
// false when no group is outstanding.
func (c *Copier) LastPending() (pending, ok bool, err error) {
	if len(c.groups) == 0 {
		return false, false, nil
	}
	done, err := c.groups[len(c.groups)-1].ev.Done()
	return !done, true, err
}

// WaitLast polls the last group issued until it has completed (nothing outstanding: at
// once). Copies run in order on the stream, so the batch has completed with it.
func (c *Copier) WaitLast() error {
	for len(c.groups) > 0 {
		done, err := c.groups[len(c.groups)-1].ev.Done()
		if err != nil || done {
			return err
		}
	}
	return nil
}

// Finish returns the batch's events to the pool once they completed (the compute stream
// that waited on them was synchronized) and the device time of the batch's copies.
func (c *Copier) Finish() (ms float64, err error) {
	if len(c.groups) == 0 {
		return 0, nil
	}
	last := c.groups[len(c.groups)-1].ev
	if err := last.Sync(); err != nil {
		return 0, err
	}
	d, err := rt.Elapsed(c.start, last)
	for _, g := range c.groups {
		c.pool = append(c.pool, g.ev)
	}
	c.groups = c.groups[:0]
	return d.Seconds() * 1e3, err
}

// Close releases the stream and events.
func (c *Copier) Close() error {
	var errs []error
	for _, g := range c.groups {
		c.pool = append(c.pool, g.ev)
	}
	for _, e := range c.pool {
		errs = append(errs, e.Destroy())
	}
	if c.start != nil {
		errs = append(errs, c.start.Destroy())
	}
	errs = append(errs, c.stream.Destroy())
	return errors.Join(errs...)
}
