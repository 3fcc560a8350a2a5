package abi

import (
	"strconv"
	"strings"
)

// Variant is one kernel of a family.
type Variant struct {
	Name   string // variant name, e.g. "mma" or "dp4a"
	Symbol string // exported kernel name: strata_<family>_<variant>
	// RowsPerBlock is the weight rows one block covers in a row-blocked family (mmvq: the
	// launch grid's x is ceil(rows/RowsPerBlock)); 0 in the other families.
	RowsPerBlock int
}

// CodeObject is one compiled file: every variant of one family for one target.
type CodeObject struct {
	Target   string    // ISA name: "gfx1100", "sm_90"
	Vendor   string    // "amd" (ELF code object) or "nvidia" (PTX)
	Family   string    // kernel family, e.g. "imma_tile"
	Path     string    // relative to build/co: "<target>/<family>.co" or ".ptx"
	Variants []Variant // in the order the Spec declares them
}

// Symbol returns the kernel name of variant in c, and false if c's target lacks it.
func (c CodeObject) Symbol(variant string) (string, bool) {
	for _, v := range c.Variants {
		if v.Name == variant {
			return v.Symbol, true
		}
	}
	return "", false
}

// Find returns the code object of family for target, and false if there is none (an
// unknown target or family).
func Find(target, family string) (CodeObject, bool) {
	for _, c := range CodeObjects {
		if c.Target == target && c.Family == family {
			return c, true
		}
	}
	return CodeObject{}, false
}

// TargetNames returns every target that has code objects, in table order.
func TargetNames() []string {
	var out []string
	for _, c := range CodeObjects {
		if len(out) == 0 || out[len(out)-1] != c.Target {
			out = append(out, c.Target)
		}
	}
	return out
}

// TargetFor maps the architecture a runtime reports to the target whose code objects the
// device runs, and false if none fits.
//
//   - AMD: arch is the gcnArchName, e.g. "gfx1100" or "gfx1100:sramecc-:xnack-"; the feature
//     suffix is dropped and the ISA must match a target exactly (AMD code objects do not run
//     on other ISAs).
//   - NVIDIA: arch is "sm_XY" from the compute capability (major X, minor Y). PTX JIT-compiles
//     forward, so the device gets the highest sm_ target not above its own (sm_87 → sm_86,
//     sm_120 → sm_90).
func TargetFor(arch string) (string, bool) {
	name, _, _ := strings.Cut(strings.TrimSpace(arch), ":")
	best, bestCC := "", -1
	for _, t := range TargetNames() {
		if t == name {
			return t, true
		}
		devCC, ok1 := smNumber(name)
		cc, ok2 := smNumber(t)
		if ok1 && ok2 && cc <= devCC && cc > bestCC {
			best, bestCC = t, cc
		}
	}
	return best, best != ""
}

// smNumber parses "sm_XY" into XY (major·10 + minor); "sm_120" is 120.
func smNumber(s string) (int, bool) {
	digits, ok := strings.CutPrefix(s, "sm_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n > 0
}

// AttentionPrefillGrid is attention_prefill's launch grid (x, y; z = 1) for variant, t
// queries and nh/nkv heads (kernels/specs.go): (⌈t·G/16⌉, nkv), G = nh/nkv, for f16 and q8;
// the first kernels, f16old and q8old: (⌈t/8⌉, nh); f16mma (NVIDIA): (⌈t·G/64⌉, nkv);
// f16mma256 (NVIDIA): (⌈t·G/32⌉, nkv). The engine and parity launch through it.
func AttentionPrefillGrid(variant string, t, nh, nkv int) (x, y uint32) {
	if strings.HasSuffix(variant, "old") {
		return uint32((t + 7) / 8), uint32(nh)
	}
	switch variant {
	case "f16mma":
		return uint32((t*(nh/nkv) + 63) / 64), uint32(nkv)
	case "f16mma256":
		return uint32((t*(nh/nkv) + 31) / 32), uint32(nkv)
	}
	return uint32((t*(nh/nkv) + 15) / 16), uint32(nkv)
}
