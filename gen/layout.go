package main

import (
	"fmt"

	"github.com/strata-hip/strata/kernels"
)

// field is one member of a packed argument struct after layout: an Arg, or explicit padding
// (Pad > 0) so that C and Go agree on every offset without relying on either compiler's
// implicit padding.
type field struct {
	Arg    kernels.Arg
	Offset int
	Pad    int // bytes of padding; Arg is zero when Pad > 0
}

// layout places args in order at their natural alignment, inserting explicit padding
// before misaligned fields and at the end (the struct's alignment is its largest field's),
// and returns the fields and the total size.
func layout(args []kernels.Arg) ([]field, int) {
	var out []field
	off, align := 0, 1
	for _, a := range args {
		sz := a.Type.Size()
		if sz > align {
			align = sz
		}
		if r := off % sz; r != 0 {
			out = append(out, field{Offset: off, Pad: sz - r})
			off += sz - r
		}
		out = append(out, field{Arg: a, Offset: off})
		off += sz
	}
	if r := off % align; r != 0 {
		out = append(out, field{Offset: off, Pad: align - r})
		off += align - r
	}
	return out, off
}

// cType is the C declaration type of an argument field.
func cType(a kernels.Arg) string {
	switch a.Type {
	case kernels.ArgPtr:
		return a.CType + "*"
	case kernels.ArgI32:
		return "int"
	case kernels.ArgU32:
		return "unsigned int"
	case kernels.ArgF32:
		return "float"
	case kernels.ArgI64:
		return "long long"
	case kernels.ArgU64:
		return "unsigned long long"
	}
	panic(fmt.Sprintf("gen: cType of invalid ArgType %d (validateSpecs should have caught it)", a.Type))
}
