package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"github.com/strata-hip/strata/kernels"
)

const abiPkg = "github.com/strata-hip/strata/kernels/abi"

// renderFamilyABI writes kernels/abi/z<family>.go: the Go twin of the family's C args
// struct with explicit padding, compile-time guards on its size and every offset, its
// little-endian encoding, the block size and the variant symbols.
func renderFamilyABI(s kernels.Spec) (File, error) {
	f := jen.NewFilePathName(abiPkg, "abi")
	f.HeaderComment(goHeader(templateDir+"/"+s.Template+".tmpl", "all targets"))
	fields, size := layout(s.Args)
	name := goName(s.Family)
	typ := name + "Args"
	cName := "strata_" + s.Family + "_args"

	f.Commentf("%s is the launch-argument struct of every strata_%s_* kernel (C: struct %s).\n%s", typ, s.Family, cName, s.Doc)
	var members []jen.Code
	for _, fl := range fields {
		if fl.Pad > 0 {
			members = append(members, jen.Id("_").Index(jen.Lit(fl.Pad)).Byte().Commentf("offset %d: explicit padding", fl.Offset))
			continue
		}
		members = append(members, jen.Id(goName(fl.Arg.Name)).Add(goType(fl.Arg.Type)).Commentf("offset %d: %s%s", fl.Offset, ptrNote(fl.Arg), fl.Arg.Doc))
	}
	f.Type().Id(typ).Struct(members...)

	f.Commentf("%sSize is sizeof(struct %s) in bytes.", typ, cName)
	f.Const().Id(typ + "Size").Op("=").Lit(size)
	f.Commentf("%sThreads is the block size (x) every %s kernel is compiled for.", name, s.Family)
	f.Const().Id(name + "Threads").Op("=").Lit(s.Threads)

	var syms []jen.Code
	for _, v := range s.AllVariants() {
		syms = append(syms, jen.Id("Sym"+name+goName(v.Name)).Op("=").Lit(s.Symbol(v)).Comment("variant "+v.Name))
	}
	f.Comment("Kernel symbols of every " + s.Family + " variant; CodeObject.Symbol says which a target has.")
	f.Const().Defs(syms...)

	guards := []jen.Code{jen.Id("_").Op("=").Index(jen.Lit(1)).Struct().Values().Index(
		jen.Qual("unsafe", "Sizeof").Call(jen.Id(typ).Values()).Op("-").Lit(size))}
	for _, fl := range fields {
		if fl.Pad > 0 {
			continue
		}
		guards = append(guards, jen.Id("_").Op("=").Index(jen.Lit(1)).Struct().Values().Index(
			jen.Qual("unsafe", "Offsetof").Call(jen.Id(typ).Values().Dot(goName(fl.Arg.Name))).Op("-").Lit(fl.Offset)))
	}
	f.Comment("Compile-time guards: building fails if the size or an offset drifts from the C static_asserts.")
	f.Var().Defs(guards...)

	var body []jen.Code
	body = append(body, jen.Id("b").Op(":=").Make(jen.Index().Byte(), jen.Id(typ+"Size")))
	for _, fl := range fields {
		if fl.Pad > 0 {
			continue
		}
		body = append(body, putField(fl))
	}
	body = append(body, jen.Return(jen.Id("b")))
	f.Commentf("Bytes returns the struct as the kernel reads it: little-endian, padding zeroed. Pass it as\nthe launch's extra buffer.")
	f.Func().Params(jen.Id("a").Op("*").Id(typ)).Id("Bytes").Params().Index().Byte().Block(body...)

	var b bytes.Buffer
	if err := f.Render(&b); err != nil {
		return File{}, fmt.Errorf("kernels/abi for %q: %w", s.Family, err)
	}
	return File{Path: abiDir + "/z" + s.Family + ".go", Data: b.Bytes()}, nil
}

func goType(t kernels.ArgType) *jen.Statement {
	switch t {
	case kernels.ArgPtr, kernels.ArgU64:
		return jen.Uint64()
	case kernels.ArgI64:
		return jen.Int64()
	case kernels.ArgI32:
		return jen.Int32()
	case kernels.ArgU32:
		return jen.Uint32()
	case kernels.ArgF32:
		return jen.Float32()
	}
	panic(fmt.Sprintf("gen: goType of invalid ArgType %d (validateSpecs should have caught it)", t))
}

func ptrNote(a kernels.Arg) string {
	if a.Type == kernels.ArgPtr {
		return "device address of " + a.CType + "[]; "
	}
	return ""
}

// putField writes one field at its offset with encoding/binary.
func putField(fl field) jen.Code {
	le := jen.Qual("encoding/binary", "LittleEndian")
	at := jen.Id("b").Index(jen.Lit(fl.Offset).Op(":"))
	v := jen.Id("a").Dot(goName(fl.Arg.Name))
	switch fl.Arg.Type {
	case kernels.ArgPtr, kernels.ArgU64:
		return le.Dot("PutUint64").Call(at, v)
	case kernels.ArgI64:
		return le.Dot("PutUint64").Call(at, jen.Uint64().Call(v))
	case kernels.ArgU32:
		return le.Dot("PutUint32").Call(at, v)
	case kernels.ArgI32:
		return le.Dot("PutUint32").Call(at, jen.Uint32().Call(v))
	case kernels.ArgF32:
		return le.Dot("PutUint32").Call(at, jen.Qual("math", "Float32bits").Call(v))
	}
	panic(fmt.Sprintf("gen: putField of invalid ArgType %d", fl.Arg.Type))
}

// renderCodeObjectsABI writes kernels/abi/zcodeobjects.go: every (target, family) code
// object with its path under build/co and the variants it holds.
func renderCodeObjectsABI() (File, error) {
	f := jen.NewFilePathName(abiPkg, "abi")
	f.HeaderComment(goHeader("kernels/target.go and kernels/specs.go", "all targets"))
	var objs []jen.Code
	for _, t := range kernels.Targets {
		for _, s := range kernels.Specs {
			kept, _ := s.Variants(t)
			var vs []jen.Code
			for _, v := range kept {
				d := jen.Dict{
					jen.Id("Name"):   jen.Lit(v.Name),
					jen.Id("Symbol"): jen.Lit(s.Symbol(v)),
				}
				if s.RowsPerBlock != nil {
					d[jen.Id("RowsPerBlock")] = jen.Lit(s.RowsPerBlock(t, v))
				}
				vs = append(vs, jen.Values(d))
			}
			objs = append(objs, jen.Values(jen.Dict{
				jen.Id("Target"):   jen.Lit(t.Name),
				jen.Id("Vendor"):   jen.Lit(t.Vendor.String()),
				jen.Id("Family"):   jen.Lit(s.Family),
				jen.Id("Path"):     jen.Lit(t.Name + "/" + s.Family + t.ObjectExt()),
				jen.Id("Variants"): jen.Index().Id("Variant").Values(vs...),
			}))
		}
	}
	f.Comment("CodeObjects lists every code object `just co` builds, by target then family.")
	f.Var().Id("CodeObjects").Op("=").Index().Id("CodeObject").Values(objs...)
	var b bytes.Buffer
	if err := f.Render(&b); err != nil {
		return File{}, fmt.Errorf("kernels/abi code objects: %w", err)
	}
	return File{Path: abiDir + "/zcodeobjects.go", Data: b.Bytes()}, nil
}

// goHeader is header without the comment marker and newline, for jen.File.HeaderComment.
func goHeader(from, target string) string {
	return strings.TrimSuffix(strings.TrimPrefix(header(from, target), "// "), "\n")
}
