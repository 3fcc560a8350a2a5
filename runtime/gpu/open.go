package gpu

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Listing is what Enumerate found: every device of every registered backend, and
// how each backend fared.
type Listing struct {
	Devices    []DeviceInfo
	Backends   []BackendStatus
	Visibility []VisibleVar // the visibility variables in effect
}

// BackendStatus says what one backend contributed.
type BackendStatus struct {
	Name    string `json:"name"`
	Library string `json:"library,omitempty"` // what Load opened; empty when it failed
	Devices int    `json:"devices"`
	Err     error  `json:"-"` // why it listed no device (library missing, no device, ...)
}

// Problems returns the errors of backends that listed no device.
func (l Listing) Problems() []error {
	var out []error
	for _, b := range l.Backends {
		if b.Err != nil {
			out = append(out, b.Err)
		}
	}
	return out
}

var loadOnce sync.Map // backend name → *loadResult

type loadResult struct {
	once sync.Once
	err  error
}

// load runs b.Load once per process.
func load(b Backend) error {
	v, _ := loadOnce.LoadOrStore(b.Name(), &loadResult{})
	r := v.(*loadResult)
	r.once.Do(func() { r.err = b.Load() })
	return r.err
}

// Enumerate loads every registered backend and lists their devices, CUDA's first. It
// fails only when no backend is registered; a backend without its library or without
// devices adds a Problem instead.
func Enumerate() (Listing, error) {
	bs := Backends()
	if len(bs) == 0 {
		return Listing{}, errors.New("gpu: no backend registered; import runtime/cuda or runtime/hip")
	}
	var l Listing
	for _, b := range bs {
		l.Visibility = append(l.Visibility, Visibility(b.Name(), os.LookupEnv)...)
		st := BackendStatus{Name: b.Name()}
		if st.Err = load(b); st.Err == nil {
			st.Library = b.Library()
			var devs []DeviceInfo
			devs, st.Err = b.Devices()
			for _, d := range devs {
				d.Index = len(l.Devices)
				l.Devices = append(l.Devices, d)
			}
			st.Devices = len(devs)
		}
		l.Backends = append(l.Backends, st)
	}
	return l, nil
}

// Open enumerates, selects by req and opens the chosen device. When nothing fits the
// error is a *SelectError (matching ErrNoDevice) that lists every device, why each was
// passed over, why backends listed none, and the visibility variables in effect.
func Open(req Request) (*Device, error) {
	l, err := Enumerate()
	if err != nil {
		return nil, err
	}
	ch, err := Select(l.Devices, req)
	if err != nil {
		var se *SelectError
		if errors.As(err, &se) {
			se.Visibility = l.Visibility
			for _, p := range l.Problems() {
				se.Problem += "; " + p.Error()
			}
		}
		return nil, err
	}
	info := l.Devices[ch.Index]
	for _, b := range Backends() {
		if b.Name() != info.Backend {
			continue
		}
		drv, err := b.Open(info.Ordinal)
		if err != nil {
			return nil, fmt.Errorf("gpu: open %s (%s): %w", info.ID(), info.Name, err)
		}
		d := NewDevice(drv)
		d.info.Index = info.Index
		return d, nil
	}
	return nil, fmt.Errorf("gpu: backend %q of %s is not registered", info.Backend, info.ID())
}
