package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Request says which device a program wants.
type Request struct {
	// Device is what the user typed after --device: "" (choose), an index into
	// Enumerate's list (an integer out of range is tried as a name substring, "7900"), "cuda:N" / "hip:N" (a runtime ordinal), a PCI bus id
	// ("0000:03:00.0", or without the domain, "03:00.0"), or a case-insensitive
	// substring of the device name.
	Device string
	// Have lists the targets this build has code objects for (see TargetMatches).
	// A device whose arch matches none is listed but never selected.
	Have []string
	// AllowIntegrated lets the default choice take an integrated GPU. Naming a device
	// explicitly always may.
	AllowIntegrated bool
}

// Choice is the outcome of Select: the chosen device (Index -1 when none) and, for
// every device in the list, one line saying why it was chosen or passed over.
type Choice struct {
	Index   int
	Target  string   // the code-object target that matched the chosen device
	Reasons []string // Reasons[i] explains devs[i]
}

// Select picks a device from devs (Enumerate's list) for req. It is pure: the same
// list and request always give the same answer, and it never looks at the runtime.
// When nothing fits it returns a *SelectError listing each device and its reason.
func Select(devs []DeviceInfo, req Request) (Choice, error) {
	ch := Choice{Index: -1, Reasons: make([]string, len(devs))}
	want := strings.TrimSpace(req.Device)
	named, err := matchRequest(devs, want)
	if err != nil {
		for i := range devs {
			ch.Reasons[i] = "not named by --device " + want
		}
		return ch, &SelectError{Devices: devs, Reasons: ch.Reasons, Problem: err.Error()}
	}
	for i, d := range devs {
		target, hasCO := MatchTarget(req.Have, d.Arch)
		reason := ""
		switch {
		case named != nil && !named[i]:
			reason = "not named by --device " + want
		case d.Err != "":
			reason = "unreadable: " + d.Err
		case d.Arch == "":
			reason = "arch unknown"
		case !hasCO:
			reason = "no code objects for " + d.Arch + haveList(req.Have)
		case named == nil && d.Integrated && !req.AllowIntegrated:
			reason = "integrated GPU (name it with --device to use it)"
		case ch.Index >= 0:
			reason = "usable; " + devs[ch.Index].ID() + " came first"
		default:
			ch.Index, ch.Target = i, target
			if named != nil {
				reason = "selected: named by --device " + want
			} else {
				reason = "selected: first discrete device with code objects for " + d.Arch
				if d.Integrated {
					reason = "selected: first device with code objects for " + d.Arch + " (integrated allowed)"
				}
			}
		}
		ch.Reasons[i] = reason
	}
	if ch.Index < 0 {
		problem := "no usable device"
		if want != "" {
			problem = "--device " + want + " names no usable device"
		}
		return ch, &SelectError{Devices: devs, Reasons: ch.Reasons, Problem: problem}
	}
	return ch, nil
}

// matchRequest returns nil when want is empty (no constraint), else the set of devices
// want names. A want that names nothing is an error saying what was tried.
func matchRequest(devs []DeviceInfo, want string) (map[int]bool, error) {
	if want == "" {
		return nil, nil
	}
	named := map[int]bool{}
	// An integer in range is an index. One out of range may still be part of a
	// name ("7900"), so it falls through to the name match and is reported as out of
	// range only when no name contains it.
	n, err := strconv.Atoi(want)
	isIndex := err == nil
	if isIndex && n >= 0 && n < len(devs) {
		named[n] = true
		return named, nil
	}
	if b, o, ok := strings.Cut(want, ":"); ok && (b == "cuda" || b == "hip") {
		n, err := strconv.Atoi(o)
		if err != nil {
			return nil, fmt.Errorf("--device %s: %q is not an ordinal", want, o)
		}
		for i, d := range devs {
			if d.Backend == b && d.Ordinal == n {
				named[i] = true
			}
		}
		if len(named) == 0 {
			return nil, fmt.Errorf("--device %s: no %s device with ordinal %d", want, b, n)
		}
		return named, nil
	}
	for i, d := range devs {
		if samePCI(d.PCIBusID, want) {
			named[i] = true
		}
	}
	if len(named) > 0 {
		return named, nil
	}
	lw := strings.ToLower(want)
	for i, d := range devs {
		if strings.Contains(strings.ToLower(d.Name), lw) {
			named[i] = true
		}
	}
	switch {
	case len(named) > 0:
		return named, nil
	case isIndex && len(devs) == 0:
		return nil, fmt.Errorf("--device %d: no devices are listed", n)
	case isIndex:
		return nil, fmt.Errorf("--device %d is out of range: %d devices listed (indices 0..%d)", n, len(devs), len(devs)-1)
	}
	return nil, fmt.Errorf("--device %q matches no index, PCI bus id or device name", want)
}

// samePCI compares PCI bus ids case-insensitively, allowing the domain to be omitted.
func samePCI(have, want string) bool {
	if have == "" {
		return false
	}
	have, want = strings.ToLower(have), strings.ToLower(want)
	if have == want {
		return true
	}
	// "03:00.0" matches "0000:03:00.0".
	return strings.Count(want, ":") == 1 && strings.HasSuffix(have, ":"+want) && strings.Count(have, ":") == 2
}

func haveList(have []string) string {
	if len(have) == 0 {
		return " (this build has none)"
	}
	return " (have: " + strings.Join(have, ", ") + ")"
}

// SelectError is Select's failure: the problem, then every device and why it was
// passed over. It wraps ErrNoDevice.
type SelectError struct {
	Problem string
	Devices []DeviceInfo
	Reasons []string
	// Visibility lists the visibility variables in effect, filled by Open.
	Visibility []VisibleVar
}

func (e *SelectError) Error() string {
	var b strings.Builder
	b.WriteString("gpu: ")
	b.WriteString(e.Problem)
	if len(e.Devices) == 0 {
		b.WriteString("; the runtimes list no devices")
	}
	for i, d := range e.Devices {
		fmt.Fprintf(&b, "\n  [%d] %s %s (%s, %s): %s", d.Index, d.ID(), d.Name, d.Arch, d.PCIBusID, e.Reasons[i])
	}
	for _, v := range e.Visibility {
		fmt.Fprintf(&b, "\n  %s", v)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrNoDevice) true.
func (e *SelectError) Unwrap() error { return ErrNoDevice }
