package abi

// Variant is one kernel of a family.
type Variant struct {
	Name   string // variant name, e.g. "mma" or "dp4a"
	Symbol string // exported kernel name: strata_<family>_<variant>
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
