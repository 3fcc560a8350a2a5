package kernels

import (
	"slices"
	"strings"
	"testing"
)

// The instructions DESIGN.md's target table promises, written out by hand.
func TestTargetInstructions(t *testing.T) {
	want := map[string][2]string{ // matrix, dot4
		"gfx1030": {"", "v_dot4c_i32_i8"},
		"gfx1100": {"v_wmma_i32_16x16x16_iu8", "v_dot4_i32_iu8"},
		"gfx1101": {"v_wmma_i32_16x16x16_iu8", "v_dot4_i32_iu8"},
		"gfx1102": {"v_wmma_i32_16x16x16_iu8", "v_dot4_i32_iu8"},
		"gfx1200": {"v_wmma_i32_16x16x16_iu8", "v_dot4_i32_iu8"},
		"gfx1201": {"v_wmma_i32_16x16x16_iu8", "v_dot4_i32_iu8"},
		"sm_80":   {"mma.sync.aligned.m16n8k,.s32.s8.s8.s32", "dp4a."},
		"sm_86":   {"mma.sync.aligned.m16n8k,.s32.s8.s8.s32", "dp4a."},
		"sm_89":   {"mma.sync.aligned.m16n8k,.s32.s8.s8.s32", "dp4a."},
		"sm_90":   {"mma.sync.aligned.m16n8k,.s32.s8.s8.s32", "dp4a."},
	}
	if len(Targets) != len(want) {
		t.Errorf("%d targets, want %d", len(Targets), len(want))
	}
	for _, tg := range Targets {
		w, ok := want[tg.Name]
		if !ok {
			t.Errorf("unexpected target %s", tg.Name)
			continue
		}
		if got := [2]string{tg.MatrixInstr(), tg.Dot4Instr()}; got != w {
			t.Errorf("%s: instructions %q, want %q", tg.Name, got, w)
		}
		if tg.HasInt8Matrix() != (w[0] != "") {
			t.Errorf("%s: HasInt8Matrix = %v", tg.Name, tg.HasInt8Matrix())
		}
		wantExt := [2]string{".hip", ".co"}
		if strings.HasPrefix(tg.Name, "sm_") {
			wantExt = [2]string{".cu", ".ptx"}
		}
		if got := [2]string{tg.SourceExt(), tg.ObjectExt()}; got != wantExt {
			t.Errorf("%s: extensions %q, want %q", tg.Name, got, wantExt)
		}
	}
}

func TestCompileFlags(t *testing.T) {
	for name, want := range map[string][]string{
		"gfx1201": {"-x", "hip", "--offload-arch=gfx1201", "-nogpulib", "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output", "-c"},
		"sm_90":   {"-x", "cuda", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib", "--cuda-device-only", "-S", "+ptx78"},
	} {
		tg, ok := LookupTarget(name)
		if !ok {
			t.Fatalf("no target %s", name)
		}
		flags := tg.CompileFlags()
		for _, w := range want {
			if !slices.Contains(flags, w) {
				t.Errorf("%s: flags %q lack %q", name, flags, w)
			}
		}
		if slices.Contains(flags, "-mwavefrontsize64") {
			t.Errorf("%s: wave64 flag", name)
		}
	}
}

func TestVariantsPrune(t *testing.T) {
	s, ok := LookupSpec("imma_tile")
	if !ok {
		t.Fatal("no imma_tile spec")
	}
	names := func(vs []Variant) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	rdna2, _ := LookupTarget("gfx1030")
	kept, pruned := s.Variants(rdna2)
	if got := names(kept); !slices.Equal(got, []string{"dp4a"}) {
		t.Errorf("gfx1030 keeps %q, want [dp4a]", got)
	}
	if len(pruned) != 1 || pruned[0].Variant.Name != "mma" || !strings.Contains(pruned[0].Why, "no int8 matrix") {
		t.Errorf("gfx1030 prunes %+v, want mma for lacking a matrix instruction", pruned)
	}
	rdna4, _ := LookupTarget("gfx1201")
	kept, pruned = s.Variants(rdna4)
	if got := names(kept); !slices.Equal(got, []string{"mma", "dp4a"}) || len(pruned) != 0 {
		t.Errorf("gfx1201 keeps %q and prunes %d, want [mma dp4a] and 0", got, len(pruned))
	}
	if s.Symbol(kept[0]) != "strata_imma_tile_mma" {
		t.Errorf("symbol %q", s.Symbol(kept[0]))
	}
	if !slices.Equal(kept[0].Promise, []ISA{ISAInt8Matrix}) || !slices.Equal(kept[1].Promise, []ISA{ISADot4}) {
		t.Errorf("promises %v, %v", kept[0].Promise, kept[1].Promise)
	}
}

func TestAllVariantsCrossProduct(t *testing.T) {
	s := Spec{Family: "f", Axes: []Axis{
		{Name: "op", Values: []Value{{Name: "mma", Needs: NeedInt8Matrix, Promise: ISAInt8Matrix}, {Name: "dp4a"}}},
		{Name: "type", Values: []Value{{Name: "q8"}, {Name: "q4k"}, {Name: "iq3s"}}},
	}}
	var got []string
	for _, v := range s.AllVariants() {
		got = append(got, v.Name+"="+v.Values["op"]+"/"+v.Values["type"])
	}
	want := []string{"mma_q8=mma/q8", "mma_q4k=mma/q4k", "mma_iq3s=mma/iq3s", "dp4a_q8=dp4a/q8", "dp4a_q4k=dp4a/q4k", "dp4a_iq3s=dp4a/iq3s"}
	if !slices.Equal(got, want) {
		t.Errorf("variants %q, want %q", got, want)
	}
	rdna2, _ := LookupTarget("gfx1030")
	kept, pruned := s.Variants(rdna2)
	if len(kept) != 3 || len(pruned) != 3 {
		t.Errorf("gfx1030 keeps %d and prunes %d, want 3 and 3", len(kept), len(pruned))
	}
}

func TestArgTypeSizes(t *testing.T) {
	for ty, want := range map[ArgType]int{ArgPtr: 8, ArgI32: 4, ArgU32: 4, ArgF32: 4, ArgI64: 8, ArgU64: 8, 0: 0, 99: 0} {
		if got := ty.Size(); got != want {
			t.Errorf("ArgType(%d).Size() = %d, want %d", ty, got, want)
		}
	}
}
