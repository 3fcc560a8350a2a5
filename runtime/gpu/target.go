package gpu

import (
	"strconv"
	"strings"
)

// TargetMatches reports whether a code object built for target can run on a device
// whose full arch is arch. Both are target ids: a processor name followed by
// ":feature+" / ":feature-" settings (clang's target-id syntax, e.g. an AMD device
// reports "gfx1201:sramecc-:xnack-"; NVIDIA archs have no features). The processor
// names must be equal, except that an NVIDIA target ("sm_XY", a compute capability)
// also runs on a device of a higher one: its code object is PTX, which the driver
// JIT-compiles forward. Every feature the code object fixes must be set the same way on
// the device; a feature the code object leaves unset matches either setting.
func TargetMatches(target, arch string) bool {
	tp, tf := splitTargetID(target)
	ap, af := splitTargetID(arch)
	if tp == "" {
		return false
	}
	if tp != ap {
		tcc, ok1 := computeCapability(tp)
		acc, ok2 := computeCapability(ap)
		if !ok1 || !ok2 || tcc > acc {
			return false
		}
	}
	for name, on := range tf {
		if got, ok := af[name]; !ok || got != on {
			return false
		}
	}
	return true
}

// splitTargetID splits "proc:f1+:f2-" into the processor and its feature settings.
func splitTargetID(id string) (string, map[string]bool) {
	parts := strings.Split(id, ":")
	feats := map[string]bool{}
	for _, f := range parts[1:] {
		switch {
		case strings.HasSuffix(f, "+"):
			feats[strings.TrimSuffix(f, "+")] = true
		case strings.HasSuffix(f, "-"):
			feats[strings.TrimSuffix(f, "-")] = false
		}
	}
	return parts[0], feats
}

// MatchTarget returns the target of have whose code objects a device of arch runs:
// the exact spelling if have holds it, else the first with the same processor, else the
// NVIDIA target of the highest compute capability not above the device's (sm_87 runs
// sm_86's PTX, sm_120 sm_90's). kernels/abi.TargetFor applies the same rule to the
// targets of this build.
func MatchTarget(have []string, arch string) (string, bool) {
	for _, t := range have {
		if t == arch {
			return t, true
		}
	}
	ap, _ := splitTargetID(arch)
	best, bestCC := "", -1
	for _, t := range have {
		if !TargetMatches(t, arch) {
			continue
		}
		tp, _ := splitTargetID(t)
		if tp == ap {
			return t, true
		}
		if cc, _ := computeCapability(tp); cc > bestCC {
			best, bestCC = t, cc
		}
	}
	return best, best != ""
}

// computeCapability parses an NVIDIA processor name "sm_XY" into XY (major·10 + minor;
// "sm_120" is 120), the form runtime/cuda reports.
func computeCapability(proc string) (int, bool) {
	digits, ok := strings.CutPrefix(proc, "sm_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n > 0
}
