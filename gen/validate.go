package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/strata-hip/strata/kernels"
)

var (
	reTarget = regexp.MustCompile(`^(gfx[0-9a-f]{3,5}|sm_[0-9]{2,3}a?)$`)
	reSnake  = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	reValue  = regexp.MustCompile(`^[a-z0-9]+$`)
)

// cKeywords are names an Arg may not take: C/C++ keywords and types the preludes use.
var cKeywords = map[string]bool{
	"auto": true, "break": true, "case": true, "char": true, "const": true, "continue": true,
	"default": true, "do": true, "double": true, "else": true, "enum": true, "extern": true,
	"float": true, "for": true, "goto": true, "if": true, "int": true, "long": true,
	"register": true, "return": true, "short": true, "signed": true, "sizeof": true,
	"static": true, "struct": true, "switch": true, "typedef": true, "union": true,
	"unsigned": true, "void": true, "volatile": true, "while": true, "bool": true,
	"class": true, "delete": true, "new": true, "this": true, "template": true,
	"namespace": true, "private": true, "public": true, "operator": true, "args": true,
}

// validateTargets checks the Target table: names unique, sorted and well-formed, and every
// field consistent with the vendor. Errors name the row.
func validateTargets(ts []kernels.Target) error {
	if len(ts) == 0 {
		return fmt.Errorf("kernels.Targets is empty")
	}
	for i, t := range ts {
		row := fmt.Sprintf("kernels.Targets[%d] (%q)", i, t.Name)
		if !reTarget.MatchString(t.Name) {
			return fmt.Errorf("%s: name must look like gfx1100 or sm_90", row)
		}
		if i > 0 && ts[i-1].Name >= t.Name {
			return fmt.Errorf("%s: names must be unique and sorted; it comes after %q", row, ts[i-1].Name)
		}
		isGfx := strings.HasPrefix(t.Name, "gfx")
		switch t.Vendor {
		case kernels.VendorAMD:
			if !isGfx {
				return fmt.Errorf("%s: vendor amd needs a gfx name", row)
			}
			if t.PTX != 0 {
				return fmt.Errorf("%s: PTX is for NVIDIA rows; set it to 0", row)
			}
			if t.VGPRs <= 0 || t.VGPRs > 256 {
				return fmt.Errorf("%s: VGPRs budget %d outside 1..256", row, t.VGPRs)
			}
			if t.Matrix == kernels.MatrixMMASync || t.Dot4 == kernels.Dot4DP4A {
				return fmt.Errorf("%s: NVIDIA matrix/dot4 instruction on an AMD row", row)
			}
		case kernels.VendorNVIDIA:
			if isGfx {
				return fmt.Errorf("%s: vendor nvidia needs an sm_ name", row)
			}
			if t.PTX < 60 {
				return fmt.Errorf("%s: PTX version %d: need ≥ 60 (shfl.sync, barrier.sync)", row, t.PTX)
			}
			if t.VGPRs != 0 {
				return fmt.Errorf("%s: VGPRs must be 0 for PTX (ptxas allocates registers at load time)", row)
			}
			if t.Matrix != kernels.MatrixNone && t.Matrix != kernels.MatrixMMASync {
				return fmt.Errorf("%s: AMD matrix instruction on an NVIDIA row", row)
			}
			if t.Dot4 != kernels.Dot4DP4A {
				return fmt.Errorf("%s: NVIDIA rows use Dot4DP4A", row)
			}
		default:
			return fmt.Errorf("%s: unknown vendor %v", row, t.Vendor)
		}
		if t.Wave != 32 {
			return fmt.Errorf("%s: wave %d: the preludes are written for wave32 only", row, t.Wave)
		}
		if t.Dot4 == kernels.Dot4None {
			return fmt.Errorf("%s: every target needs a Dot4 instruction (the dp4a fallback)", row)
		}
		if t.LDSBytes <= 0 || t.LDSBytes%1024 != 0 {
			return fmt.Errorf("%s: LDSBytes %d must be a positive multiple of 1024", row, t.LDSBytes)
		}
		if t.Cards == "" {
			return fmt.Errorf("%s: Cards is empty; name at least one product", row)
		}
	}
	return nil
}

// validateSpecs checks the Spec table against the targets and the template directory.
func validateSpecs(specs []kernels.Spec, ts []kernels.Target, templateDir string) error {
	if len(specs) == 0 {
		return fmt.Errorf("kernels.Specs is empty")
	}
	for i, s := range specs {
		row := fmt.Sprintf("kernels.Specs[%d] (%q)", i, s.Family)
		if !reSnake.MatchString(s.Family) || strings.HasPrefix(s.Family, "prelude") {
			return fmt.Errorf("%s: family must be snake_case and not start with \"prelude\" (gen's own files)", row)
		}
		if i > 0 && specs[i-1].Family >= s.Family {
			return fmt.Errorf("%s: families must be unique and sorted; it comes after %q", row, specs[i-1].Family)
		}
		if !reSnake.MatchString(s.Template) || strings.HasPrefix(s.Template, "prelude") {
			return fmt.Errorf("%s: template %q must be snake_case and not a prelude", row, s.Template)
		}
		if _, err := os.Stat(filepath.Join(templateDir, s.Template+".tmpl")); err != nil {
			return fmt.Errorf("%s: template kernels/templates/%s.tmpl: %v", row, s.Template, err)
		}
		if s.Doc == "" {
			return fmt.Errorf("%s: Doc is empty; say what it computes and how to launch it", row)
		}
		if s.Threads <= 0 || s.Threads > 1024 {
			return fmt.Errorf("%s: Threads %d outside 1..1024", row, s.Threads)
		}
		for _, t := range ts {
			if s.Threads%t.Wave != 0 {
				return fmt.Errorf("%s: Threads %d is not a multiple of %s's wave %d", row, s.Threads, t.Name, t.Wave)
			}
		}
		if len(s.Args) == 0 {
			return fmt.Errorf("%s: no Args; every kernel takes one packed struct", row)
		}
		seen := map[string]bool{}
		for j, a := range s.Args {
			arow := fmt.Sprintf("%s Args[%d] (%q)", row, j, a.Name)
			if !reSnake.MatchString(a.Name) || cKeywords[a.Name] {
				return fmt.Errorf("%s: name must be snake_case and not a C/C++ keyword", arow)
			}
			if seen[goName(a.Name)] {
				return fmt.Errorf("%s: duplicate field (Go name %s)", arow, goName(a.Name))
			}
			seen[goName(a.Name)] = true
			if a.Type.Size() == 0 {
				return fmt.Errorf("%s: invalid type %d", arow, a.Type)
			}
			if (a.Type == kernels.ArgPtr) != (a.CType != "") {
				return fmt.Errorf("%s: CType is required for ArgPtr and only for it", arow)
			}
			if a.Doc == "" {
				return fmt.Errorf("%s: Doc is empty; give units and preconditions", arow)
			}
		}
		if len(s.Axes) == 0 {
			return fmt.Errorf("%s: no Axes; a family has at least one variant", row)
		}
		axes := map[string]bool{}
		for j, ax := range s.Axes {
			xrow := fmt.Sprintf("%s Axes[%d] (%q)", row, j, ax.Name)
			if !reSnake.MatchString(ax.Name) || axes[ax.Name] {
				return fmt.Errorf("%s: axis names must be snake_case and unique", xrow)
			}
			axes[ax.Name] = true
			if len(ax.Values) == 0 {
				return fmt.Errorf("%s: no values", xrow)
			}
			vals := map[string]bool{}
			for k, v := range ax.Values {
				if !(reValue.MatchString(v.Name) || (v.Name == "" && k == 0)) || vals[v.Name] {
					return fmt.Errorf("%s: value %q must be [a-z0-9]+ (or \"\", the first value only) and unique", xrow, v.Name)
				}
				vals[v.Name] = true
			}
		}
		names := map[string]bool{}
		for _, v := range s.AllVariants() {
			if names[v.Name] {
				return fmt.Errorf("%s: two variants are both named %q", row, v.Name)
			}
			names[v.Name] = true
			got := false
			for _, t := range ts {
				kept, _ := s.Variants(t)
				for _, k := range kept {
					if k.Name == v.Name {
						got = true
					}
				}
			}
			if !got {
				return fmt.Errorf("%s: variant %q is pruned on every target", row, v.Name)
			}
		}
		for _, t := range ts {
			kept, _ := s.Variants(t)
			for _, v := range kept {
				for _, p := range v.Promise {
					if t.Instr(p) == "" {
						return fmt.Errorf("%s: variant %q promises an instruction %s has no name for", row, v.Name, t.Name)
					}
				}
			}
		}
	}
	return nil
}

// goName turns a snake_case C name into the exported Go field name: x_stride → XStride.
func goName(snake string) string {
	var b strings.Builder
	for _, part := range strings.Split(snake, "_") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
