package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Stream is an ordered queue of device work. A nil *Stream means the default stream.
type Stream struct {
	dev *Device
	h   uintptr
	// lastKernel: the last work queued on the stream through package gpu was a kernel
	// launch (Launcher.LaunchDep makes a programmatic launch only then).
	lastKernel atomic.Bool
}

// queued records that work other than a kernel launch was queued on s (nil: none tracked).
func (s *Stream) queued() {
	if s != nil {
		s.lastKernel.Store(false)
	}
}

// launched records that a kernel launch was queued on s.
func (s *Stream) launched() {
	if s != nil {
		s.lastKernel.Store(true)
	}
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// NewStream creates a stream.
func (d *Device) NewStream() (*Stream, error) {
	var h uintptr
	if err := d.do(func() error {
		var e error
		h, e = d.drv.StreamCreate()
		return e
	}); err != nil {
		return nil, err
	}
	return &Stream{dev: d, h: h}, nil
}

// Sync waits for everything queued on the stream.
func (s *Stream) Sync() error {
	return s.dev.do(func() error { return s.dev.drv.StreamSync(s.h) })
}

// Destroy releases the stream after its work completes.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return errors.New("gpu: stream destroyed twice")
	}
	h := s.h
	s.h = 0
	return s.dev.do(func() error { return s.dev.drv.StreamDestroy(h) })
}

// Upload queues a copy of n bytes from src[off:] to dst.
func (s *Stream) Upload(dst DevPtr, src *HostBuffer, off, n int) error {
	if err := src.span(off, n); err != nil {
		return err
	}
	s.queued()
	return s.dev.do(func() error {
		return s.dev.drv.CopyAsync(HostToDevice, uintptr(dst), src.Ptr()+uintptr(off), uintptr(n), s.h)
	})
}

// Download queues a copy of n bytes from src to dst[off:].
func (s *Stream) Download(dst *HostBuffer, off int, src DevPtr, n int) error {
	if err := dst.span(off, n); err != nil {
		return err
	}
	s.queued()
	return s.dev.do(func() error {
		return s.dev.drv.CopyAsync(DeviceToHost, dst.Ptr()+uintptr(off), uintptr(src), uintptr(n), s.h)
	})
}

// Copy queues a device-to-device copy of n bytes.
func (s *Stream) Copy(dst, src DevPtr, n int) error {
	s.queued()
	return s.dev.do(func() error { return s.dev.drv.CopyAsync(DeviceToDevice, uintptr(dst), uintptr(src), uintptr(n), s.h) })
}

// Memset queues filling n bytes at dst with value.
func (s *Stream) Memset(dst DevPtr, value byte, n int) error {
	s.queued()
	return s.dev.do(func() error { return s.dev.drv.MemsetAsync(dst, value, uintptr(n), s.h) })
}

// Wait makes later work on s wait for e.
func (s *Stream) Wait(e *Event) error {
	s.queued()
	return s.dev.do(func() error { return s.dev.drv.StreamWaitEvent(s.h, e.h) })
}

func (h *HostBuffer) span(off, n int) error {
	if h == nil || h.dev == nil {
		return errors.New("gpu: copy with a nil or freed host buffer")
	}
	if off < 0 || n < 0 || off+n > len(h.mem) {
		return fmt.Errorf("gpu: copy of %d bytes at offset %d outside a %d-byte host buffer", n, off, len(h.mem))
	}
	return nil
}

// Event marks a point in a stream; two recorded events time the work between them.
type Event struct {
	dev *Device
	h   uintptr
}

// NewEvent creates a timing event.
func (d *Device) NewEvent() (*Event, error) {
	var h uintptr
	if err := d.do(func() error {
		var e error
		h, e = d.drv.EventCreate()
		return e
	}); err != nil {
		return nil, err
	}
	return &Event{dev: d, h: h}, nil
}

// Record marks the current end of stream s (nil: default stream).
func (e *Event) Record(s *Stream) error {
	s.queued()
	return e.dev.do(func() error { return e.dev.drv.EventRecord(e.h, s.handle()) })
}

// Sync blocks until the event has happened.
func (e *Event) Sync() error { return e.dev.do(func() error { return e.dev.drv.EventSync(e.h) }) }

// Done reports whether the event has happened, without blocking.
func (e *Event) Done() (bool, error) {
	err := e.dev.do(func() error { return e.dev.drv.EventQuery(e.h) })
	if errors.Is(err, ErrNotReady) {
		return false, nil
	}
	return err == nil, err
}

// WaitFor polls the event until it has happened or timeout passes; a timeout is an
// error (a kernel that never finishes must not hang the host without a word).
func (e *Event) WaitFor(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for sleep := 20 * time.Microsecond; ; sleep = min(2*sleep, 5*time.Millisecond) {
		done, err := e.Done()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gpu: device %s: work not finished after %v", e.dev.info.ID(), timeout)
		}
		time.Sleep(sleep)
	}
}

// Elapsed returns the device time between two recorded, completed events.
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	err := start.dev.do(func() error {
		var e error
		ms, e = start.dev.drv.EventElapsed(start.h, end.h)
		return e
	})
	return time.Duration(float64(ms) * 1e6), err
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	if e.h == 0 {
		return errors.New("gpu: event destroyed twice")
	}
	h := e.h
	e.h = 0
	return e.dev.do(func() error { return e.dev.drv.EventDestroy(h) })
}
