package gpu

import "strings"

// TargetMatches reports whether a code object built for target can run on a device
// whose full arch is arch. Both are target ids: a processor name followed by
// ":feature+" / ":feature-" settings (clang's target-id syntax, e.g. an AMD device
// reports "gfx1201:sramecc-:xnack-"; NVIDIA archs have no features). The processor
// names must be equal; every feature the code object fixes must be set the same way
// on the device; a feature the code object leaves unset matches either setting.
func TargetMatches(target, arch string) bool {
	tp, tf := splitTargetID(target)
	ap, af := splitTargetID(arch)
	if tp == "" || tp != ap {
		return false
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

// MatchTarget returns the first of have that TargetMatches arch, preferring an exact
// match (same features spelled out) over a feature-agnostic one.
func MatchTarget(have []string, arch string) (string, bool) {
	for _, t := range have {
		if t == arch {
			return t, true
		}
	}
	for _, t := range have {
		if TargetMatches(t, arch) {
			return t, true
		}
	}
	return "", false
}
