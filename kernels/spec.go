package kernels

import (
	"sort"
	"strings"
)

// ArgType is the type of one field of a kernel's packed argument struct. Every type has a
// fixed size and its natural alignment, identical in C and Go.
type ArgType uint8

const (
	ArgPtr ArgType = iota + 1 // device address: uint64 in Go, a typed pointer in C
	ArgI32                    // int32
	ArgU32                    // uint32
	ArgF32                    // float32
	ArgI64                    // int64
	ArgU64                    // uint64
)

// Size is the size (and alignment) of t in bytes; 0 for an invalid type.
func (t ArgType) Size() int {
	switch t {
	case ArgI32, ArgU32, ArgF32:
		return 4
	case ArgPtr, ArgI64, ArgU64:
		return 8
	}
	return 0
}

// Arg is one field of a family's packed launch-argument struct.
type Arg struct {
	Name  string  // C field name, snake_case; the Go field is its CamelCase form
	Type  ArgType // fixed-size field type
	CType string  // ArgPtr only: the C pointee type, e.g. "const float" (the field is CType*)
	Doc   string  // units, layout and preconditions
}

// ISA is what a variant promises to contain in its compiled code; ctest checks it.
type ISA uint8

const (
	ISANone       ISA = iota // no instruction promise
	ISAInt8Matrix            // the target's int8 matrix instruction (Target.MatrixInstr)
	ISADot4                  // the target's int8 dot4 instruction (Target.Dot4Instr)
)

// Need is a target capability a variant value requires; a target without it does not get
// the variant (see Target.Can for the reason recorded with each pruned combination).
type Need uint8

const (
	NeedNothing    Need = iota // every target can
	NeedInt8Matrix             // Target.HasInt8Matrix
	NeedNVIDIA                 // Target.IsNVIDIA (a variant whose code exists on NVIDIA only)
)

// Value is one value of a variant axis.
type Value struct {
	Name    string // joins the variant name: strata_<family>_<value>[_<value>…]; "" joins nothing (an axis's default)
	Needs   Need   // capability a target must have to get variants with this value
	Promise ISA    // instruction variants with this value must contain
}

// Axis is one dimension of a family's variants (operation kind, quant type, tile shape…).
type Axis struct {
	Name   string  // template key: {{.Values.<Name>}} is the value's Name
	Values []Value // in the order variants are emitted
}

// Spec is one kernel family: the template it renders from, its launch arguments and its
// variants. Symbols are strata_<Family>_<variant>.
type Spec struct {
	Family   string // snake_case; symbol infix and file stem of kernels/out/<target>/<Family>.<ext>
	Template string // kernels/templates/<Template>.tmpl
	Doc      string // one sentence for kernels/abi: what the family computes and how to launch it
	Threads  int    // threads per block (x dimension); a multiple of every target's wave size
	Args     []Arg  // the packed argument struct, in field order
	Axes     []Axis // variants are the cross product of the axes' values
	// Fits, when set, is asked about every variant a target's capabilities allow; it
	// returns false and the reason when the variant's resources (LDS, registers) exceed
	// the target's. nil = every allowed variant fits.
	Fits func(t Target, v Variant) (ok bool, why string)
	// RowsPerBlock, when set, is the weight rows one block of variant v covers on t (a
	// row-blocked family: its launch grid's x is ceil(rows/RowsPerBlock)); kernels/abi
	// carries it per variant (Variant.RowsPerBlock), so launchers take it from there.
	RowsPerBlock func(t Target, v Variant) int
	// Absent, when set, names combinations of axis values that are no variant at all (on
	// any target): AllVariants leaves them out.
	Absent func(v Variant) bool
}

// Variant is one kernel of a family: one value of each axis.
type Variant struct {
	Name    string            // value names joined by "_"
	Values  map[string]string // axis name → value name
	Promise []ISA             // instructions this variant must contain (one per axis value that promises)
	needs   []Need
}

// Symbol is the kernel's exported name.
func (s Spec) Symbol(v Variant) string { return "strata_" + s.Family + "_" + v.Name }

// AllVariants is the full cross product of s's axes, before any target prunes it.
func (s Spec) AllVariants() []Variant {
	out := []Variant{{Values: map[string]string{}}}
	for _, ax := range s.Axes {
		var next []Variant
		for _, v := range out {
			for _, val := range ax.Values {
				nv := Variant{Values: map[string]string{}, Promise: append([]ISA(nil), v.Promise...),
					needs: append([]Need(nil), v.needs...)}
				for k, x := range v.Values {
					nv.Values[k] = x
				}
				nv.Values[ax.Name] = val.Name
				switch {
				case val.Name == "": // an axis's default value adds nothing to the name
					nv.Name = v.Name
				case v.Name == "":
					nv.Name = val.Name
				default:
					nv.Name = v.Name + "_" + val.Name
				}
				if val.Promise != ISANone {
					nv.Promise = append(nv.Promise, val.Promise)
				}
				nv.needs = append(nv.needs, val.Needs)
				next = append(next, nv)
			}
		}
		out = next
	}
	if s.Absent != nil {
		var kept []Variant
		for _, v := range out {
			if !s.Absent(v) {
				kept = append(kept, v)
			}
		}
		out = kept
	}
	return out
}

// Pruned is a variant a target does not get, with the reason.
type Pruned struct {
	Variant Variant
	Why     string
}

// Variants splits s's variants into those t gets and those it cannot run.
func (s Spec) Variants(t Target) (kept []Variant, pruned []Pruned) {
	for _, v := range s.AllVariants() {
		var whys []string
		for _, n := range v.needs {
			if ok, why := t.Can(n); !ok {
				whys = append(whys, why)
			}
		}
		if len(whys) == 0 && s.Fits != nil {
			if ok, why := s.Fits(t, v); !ok {
				whys = append(whys, why)
			}
		}
		if len(whys) > 0 {
			sort.Strings(whys)
			pruned = append(pruned, Pruned{Variant: v, Why: strings.Join(whys, "; ")})
			continue
		}
		kept = append(kept, v)
	}
	return kept, pruned
}

// LookupSpec returns the row of family.
func LookupSpec(family string) (Spec, bool) {
	for _, s := range Specs {
		if s.Family == family {
			return s, true
		}
	}
	return Spec{}, false
}
