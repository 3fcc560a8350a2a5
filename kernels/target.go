package kernels

import (
	"fmt"
	"strconv"
)

// Vendor selects the prelude, the source language and the compiler mode of a target.
type Vendor uint8

const (
	VendorAMD    Vendor = iota + 1 // HIP source (.hip), ELF code object (.co)
	VendorNVIDIA                   // CUDA source (.cu), PTX (.ptx)
)

func (v Vendor) String() string {
	switch v {
	case VendorAMD:
		return "amd"
	case VendorNVIDIA:
		return "nvidia"
	}
	return "Vendor(" + strconv.Itoa(int(v)) + ")"
}

// Matrix is the int8→int32 matrix instruction a target has, if any. Zero means none.
// Each value has its own lane layout (see the fragment comments in the preludes and
// matrix-fragments.md); the prelude hides them behind one 16×16 tile API.
type Matrix uint8

const (
	MatrixNone      Matrix = iota // no int8 matrix op: dp4a variants only
	MatrixWMMAGfx11               // v_wmma_i32_16x16x16_iu8, A/B replicated in both half-waves, C rows interleaved
	MatrixWMMAGfx12               // v_wmma_i32_16x16x16_iu8 (gfx12 builtin), 8 int8 per lane for A and B, C rows in halves
	MatrixMMASync                 // mma.sync.aligned.m16n8k32 / m16n8k16 .s8.s8.s32, two per 16×16 tile
)

func (m Matrix) String() string {
	switch m {
	case MatrixNone:
		return "none"
	case MatrixWMMAGfx11:
		return "wmma_gfx11"
	case MatrixWMMAGfx12:
		return "wmma_gfx12"
	case MatrixMMASync:
		return "mma_sync"
	}
	return "Matrix(" + strconv.Itoa(int(m)) + ")"
}

// Dot4 is the signed int8 four-way dot product instruction of a target. Zero means none
// (no supported target lacks one; gen rejects a row without it).
type Dot4 uint8

const (
	Dot4None   Dot4 = iota
	Dot4SDot4       // gfx1030: __builtin_amdgcn_sdot4 → v_dot4c_i32_i8 (signed only; no mixed-sign form)
	Dot4SUDot4      // gfx11/gfx12: __builtin_amdgcn_sudot4 → v_dot4_i32_iu8 with per-operand sign flags
	Dot4DP4A        // NVIDIA: PTX dp4a.{s32,u32}.{s32,u32}
)

func (d Dot4) String() string {
	switch d {
	case Dot4None:
		return "none"
	case Dot4SDot4:
		return "sdot4"
	case Dot4SUDot4:
		return "sudot4"
	case Dot4DP4A:
		return "dp4a"
	}
	return "Dot4(" + strconv.Itoa(int(d)) + ")"
}

// Target is one ISA that Strata emits and compiles code for. Every policy question about a
// target is answered by a field or a method here, never by comparing its name elsewhere.
// Zero values mean "absent" (Matrix: 0 = no matrix op; VGPRs: 0 = not checkable).
type Target struct {
	Name     string // ISA name as the compilers spell it: "gfx1100", "sm_90"
	Vendor   Vendor // which prelude, source extension, compiler mode and object format
	Wave     int    // lanes per wave/warp; every kernel is written for this width
	Matrix   Matrix // int8 16×16 matrix instruction; MatrixNone = dp4a variants only
	Dot4     Dot4   // signed int8 4-way dot instruction (every target has one)
	LDSBytes int    // static LDS / shared memory one workgroup may use, in bytes
	VGPRs    int    // per-lane VGPR budget a kernel must stay within (AMD); 0 = not checkable from PTX
	PTX      int    // NVIDIA: PTX ISA version ×10 to emit, the lowest the target accepts; 0 for AMD
	Cards    string // example products, for people choosing a target
}

// IsAMD reports whether t is compiled as HIP into an AMD ELF code object.
func (t Target) IsAMD() bool { return t.Vendor == VendorAMD }

// IsNVIDIA reports whether t is compiled as CUDA into PTX.
func (t Target) IsNVIDIA() bool { return t.Vendor == VendorNVIDIA }

// HasInt8Matrix reports whether t has an int8 matrix instruction, i.e. whether kernels
// get an "mma" variant for it.
func (t Target) HasInt8Matrix() bool { return t.Matrix != MatrixNone }

// SourceExt is the extension of generated sources for t (".hip" or ".cu").
func (t Target) SourceExt() string {
	if t.IsNVIDIA() {
		return ".cu"
	}
	return ".hip"
}

// ObjectExt is the extension of compiled code objects for t (".co" ELF or ".ptx").
func (t Target) ObjectExt() string {
	if t.IsNVIDIA() {
		return ".ptx"
	}
	return ".co"
}

// CompileFlags are the clang flags (after the compiler name, before -o and the source) that
// turn one generated source of t into its code object with Debian's clang-19. The sources
// are freestanding, so no ROCm or CUDA installation is needed.
func (t Target) CompileFlags() []string {
	common := []string{"-O3", "-std=c++17", "-Wall", "-Wextra", "-Werror"}
	if t.IsNVIDIA() {
		// clang without a CUDA install defaults to an old PTX ISA that lacks shfl.sync and
		// barrier.sync; ask for the lowest version the target needs.
		return append([]string{"-x", "cuda", "--cuda-gpu-arch=" + t.Name, "-nocudainc", "-nocudalib",
			"--cuda-device-only", "-S", "-Xclang", "-target-feature", "-Xclang", "+ptx" + strconv.Itoa(t.PTX)}, common...)
	}
	return append([]string{"-x", "hip", "--offload-arch=" + t.Name, "-nogpulib", "-nogpuinc",
		"--cuda-device-only", "--no-gpu-bundle-output", "-c"}, common...)
}

// PTXVersion is the PTX ISA version the NVIDIA target emits, as PTX spells it ("7.8");
// "" for AMD.
func (t Target) PTXVersion() string {
	if t.PTX == 0 {
		return ""
	}
	return strconv.Itoa(t.PTX/10) + "." + strconv.Itoa(t.PTX%10)
}

// MatrixInstr is the text the disassembly (AMD) or PTX (NVIDIA) of an "mma" variant must
// contain (comma-separated parts must all appear); "" when t has no matrix op.
func (t Target) MatrixInstr() string {
	switch t.Matrix {
	case MatrixWMMAGfx11, MatrixWMMAGfx12:
		return "v_wmma_i32_16x16x16_iu8"
	case MatrixMMASync:
		// An int8 mma.sync of either K (m16n8k32, or m16n8k16 where a group's two 16-element
		// halves need separate sums): both parts must appear.
		return "mma.sync.aligned.m16n8k,.s32.s8.s8.s32"
	}
	return ""
}

// Dot4Instr is the text the disassembly or PTX of a "dp4a" variant must contain.
func (t Target) Dot4Instr() string {
	switch t.Dot4 {
	case Dot4SDot4:
		// clamp=false gives the accumulating VOP2 form; clamp=true would emit v_dot4_i32_i8.
		return "v_dot4c_i32_i8"
	case Dot4SUDot4:
		return "v_dot4_i32_iu8"
	case Dot4DP4A:
		return "dp4a."
	}
	return ""
}

// Instr is the instruction a variant promising isa must contain on t ("" = no promise).
func (t Target) Instr(isa ISA) string {
	switch isa {
	case ISAInt8Matrix:
		return t.MatrixInstr()
	case ISADot4:
		return t.Dot4Instr()
	}
	return ""
}

// Can reports whether t can run a variant value that needs n, and if not, why.
func (t Target) Can(n Need) (ok bool, why string) {
	switch n {
	case NeedNothing:
		return true, ""
	case NeedInt8Matrix:
		if !t.HasInt8Matrix() {
			return false, "target has no int8 matrix instruction"
		}
		return true, ""
	case NeedNVIDIA:
		if !t.IsNVIDIA() {
			return false, "NVIDIA only"
		}
		return true, ""
	}
	return false, fmt.Sprintf("unknown need %d", n)
}

// Targets is the table of every ISA Strata builds for, sorted by Name. A new GPU is one
// row here plus `go generate ./...`; gen validates the table before writing anything.
var Targets = []Target{
	// RDNA2: no matrix op; sdot4 only (no mixed-sign dot). LDS 64 KiB per workgroup.
	{Name: "gfx1030", Vendor: VendorAMD, Wave: 32, Matrix: MatrixNone, Dot4: Dot4SDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 6800/6900 (RDNA2)"},
	// RDNA3: gfx11 WMMA.
	{Name: "gfx1100", Vendor: VendorAMD, Wave: 32, Matrix: MatrixWMMAGfx11, Dot4: Dot4SUDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 7900 XT/XTX"},
	{Name: "gfx1101", Vendor: VendorAMD, Wave: 32, Matrix: MatrixWMMAGfx11, Dot4: Dot4SUDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 7800/7700 XT"},
	{Name: "gfx1102", Vendor: VendorAMD, Wave: 32, Matrix: MatrixWMMAGfx11, Dot4: Dot4SUDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 7600"},
	// RDNA4: gfx12 WMMA.
	{Name: "gfx1200", Vendor: VendorAMD, Wave: 32, Matrix: MatrixWMMAGfx12, Dot4: Dot4SUDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 9060 XT"},
	{Name: "gfx1201", Vendor: VendorAMD, Wave: 32, Matrix: MatrixWMMAGfx12, Dot4: Dot4SUDot4, LDSBytes: 65536, VGPRs: 128, Cards: "RX 9070/9070 XT, AI PRO R9700"},
	// NVIDIA: static shared memory is capped at 48 KiB per block (more needs the dynamic
	// opt-in); register use is decided by ptxas at load time, so VGPRs is 0.
	{Name: "sm_80", Vendor: VendorNVIDIA, Wave: 32, Matrix: MatrixMMASync, Dot4: Dot4DP4A, LDSBytes: 49152, PTX: 70, Cards: "A100"},
	{Name: "sm_86", Vendor: VendorNVIDIA, Wave: 32, Matrix: MatrixMMASync, Dot4: Dot4DP4A, LDSBytes: 49152, PTX: 71, Cards: "RTX 30"},
	{Name: "sm_89", Vendor: VendorNVIDIA, Wave: 32, Matrix: MatrixMMASync, Dot4: Dot4DP4A, LDSBytes: 49152, PTX: 78, Cards: "RTX 40"},
	{Name: "sm_90", Vendor: VendorNVIDIA, Wave: 32, Matrix: MatrixMMASync, Dot4: Dot4DP4A, LDSBytes: 49152, PTX: 78, Cards: "H100/H200"},
}

// LookupTarget returns the row named name.
func LookupTarget(name string) (Target, bool) {
	for _, t := range Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}
