package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels"
)

func TestTablesValid(t *testing.T) {
	if err := validateTargets(kernels.Targets); err != nil {
		t.Fatal(err)
	}
	if err := validateSpecs(kernels.Specs, kernels.Targets, filepath.Join(root, templateDir)); err != nil {
		t.Fatal(err)
	}
}

// Each case breaks one field of a copy of the table; the error must name the row and the
// problem.
func TestValidateTargetsRejects(t *testing.T) {
	amd, _ := kernels.LookupTarget("gfx1100")
	nv, _ := kernels.LookupTarget("sm_90")
	tests := []struct {
		name  string
		edit  func(ts []kernels.Target) []kernels.Target
		wants []string
	}{
		{"unsorted", func(ts []kernels.Target) []kernels.Target { ts[0], ts[1] = ts[1], ts[0]; return ts }, []string{"sorted"}},
		{"duplicate", func(ts []kernels.Target) []kernels.Target { return append(ts[:1], ts...) }, []string{"unique"}},
		{"bad name", func(ts []kernels.Target) []kernels.Target { ts[0].Name = "GFX1030"; return ts }, []string{`"GFX1030"`, "gfx1100 or sm_90"}},
		{"wave64", func(ts []kernels.Target) []kernels.Target { ts[1].Wave = 64; return ts }, []string{`"gfx1100"`, "wave32"}},
		{"no dot4", func(ts []kernels.Target) []kernels.Target { ts[1].Dot4 = kernels.Dot4None; return ts }, []string{`"gfx1100"`, "Dot4"}},
		{"amd with ptx", func(ts []kernels.Target) []kernels.Target { ts[1].PTX = 78; return ts }, []string{`"gfx1100"`, "PTX"}},
		{"amd without budget", func(ts []kernels.Target) []kernels.Target { ts[1].VGPRs = 0; return ts }, []string{`"gfx1100"`, "VGPRs"}},
		{"nvidia matrix on amd", func(ts []kernels.Target) []kernels.Target { ts[1].Matrix = nv.Matrix; return ts }, []string{`"gfx1100"`, "NVIDIA"}},
		{"amd matrix on nvidia", func(ts []kernels.Target) []kernels.Target { ts[len(ts)-1].Matrix = amd.Matrix; return ts }, []string{`"sm_90"`, "AMD matrix"}},
		{"old ptx", func(ts []kernels.Target) []kernels.Target { ts[len(ts)-1].PTX = 42; return ts }, []string{`"sm_90"`, "PTX version 42"}},
		{"gfx name on nvidia", func(ts []kernels.Target) []kernels.Target { ts[1].Vendor = kernels.VendorNVIDIA; return ts }, []string{`"gfx1100"`, "sm_"}},
		{"lds", func(ts []kernels.Target) []kernels.Target { ts[1].LDSBytes = 1000; return ts }, []string{`"gfx1100"`, "LDSBytes"}},
		{"empty", func([]kernels.Target) []kernels.Target { return nil }, []string{"empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.edit(append([]kernels.Target(nil), kernels.Targets...))
			err := validateTargets(ts)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidateSpecsRejects(t *testing.T) {
	tdir := filepath.Join(root, templateDir)
	copySpecs := func() []kernels.Spec {
		out := append([]kernels.Spec(nil), kernels.Specs...)
		for i := range out {
			out[i].Args = append([]kernels.Arg(nil), out[i].Args...)
			out[i].Axes = append([]kernels.Axis(nil), out[i].Axes...)
		}
		return out
	}
	idx := func(family string) int {
		for i, s := range kernels.Specs {
			if s.Family == family {
				return i
			}
		}
		t.Fatalf("no family %q", family)
		return -1
	}
	im, qz := idx("imma_tile"), idx("quantize_q8_1")
	matrixOnly := kernels.Axis{Name: "op", Values: []kernels.Value{{Name: "mma", Needs: kernels.NeedInt8Matrix}}}
	noMatrix := append([]kernels.Target(nil), kernels.Targets...)
	for i := range noMatrix {
		noMatrix[i].Matrix = kernels.MatrixNone
	}
	tests := []struct {
		name    string
		edit    func(s []kernels.Spec) []kernels.Spec
		targets []kernels.Target
		wants   []string
	}{
		{"unsorted", func(s []kernels.Spec) []kernels.Spec { s[0], s[1] = s[1], s[0]; return s }, nil, []string{"sorted"}},
		{"missing template", func(s []kernels.Spec) []kernels.Spec { s[im].Template = "no_such_family"; return s }, nil, []string{`("imma_tile")`, "no_such_family.tmpl"}},
		{"prelude as template", func(s []kernels.Spec) []kernels.Spec { s[im].Template = "prelude"; return s }, nil, []string{"prelude"}},
		{"threads not a wave multiple", func(s []kernels.Spec) []kernels.Spec { s[im].Threads = 48; return s }, nil, []string{"Threads 48"}},
		{"pointer without C type", func(s []kernels.Spec) []kernels.Spec { s[im].Args[0].CType = ""; return s }, nil, []string{`Args[0] ("a")`, "CType"}},
		{"keyword arg", func(s []kernels.Spec) []kernels.Spec { s[im].Args[3].Name = "int"; return s }, nil, []string{`Args[3] ("int")`, "keyword"}},
		{"duplicate arg", func(s []kernels.Spec) []kernels.Spec { s[im].Args[1].Name = "a"; return s }, nil, []string{"duplicate"}},
		{"arg without doc", func(s []kernels.Spec) []kernels.Spec { s[qz].Args[2].Doc = ""; return s }, nil, []string{`"quantize_q8_1"`, "Doc"}},
		{"no axes", func(s []kernels.Spec) []kernels.Spec { s[im].Axes = nil; return s }, nil, []string{"Axes"}},
		{"variant pruned everywhere", func(s []kernels.Spec) []kernels.Spec { s[im].Axes = []kernels.Axis{matrixOnly}; return s }, noMatrix, []string{`"mma" is pruned on every target`}},
		{"bad value name", func(s []kernels.Spec) []kernels.Spec {
			s[qz].Axes = []kernels.Axis{{Name: "src", Values: []kernels.Value{{Name: "F32"}}}}
			return s
		}, nil, []string{`"F32"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.targets
			if ts == nil {
				ts = kernels.Targets
			}
			err := validateSpecs(tc.edit(copySpecs()), ts, tdir)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
