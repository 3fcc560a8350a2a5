package abi

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestFind(t *testing.T) {
	co, ok := Find("gfx1030", "imma_tile")
	if !ok {
		t.Fatal("no gfx1030 imma_tile code object")
	}
	if co.Path != "gfx1030/imma_tile.co" || co.Vendor != "amd" {
		t.Errorf("gfx1030 imma_tile: %+v", co)
	}
	if _, ok := co.Symbol("mma"); ok {
		t.Error("gfx1030 has no int8 matrix op, but lists an mma variant")
	}
	if s, ok := co.Symbol("dp4a"); !ok || s != SymImmaTileDp4a {
		t.Errorf("gfx1030 dp4a symbol %q, %v", s, ok)
	}
	co, ok = Find("sm_90", "quantize_q8_1")
	if !ok || co.Path != "sm_90/quantize_q8_1.ptx" || co.Vendor != "nvidia" {
		t.Errorf("sm_90 quantize_q8_1: %+v, %v", co, ok)
	}
	if s, ok := co.Symbol("f32"); !ok || s != "strata_quantize_q8_1_f32" {
		t.Errorf("sm_90 quantize symbol %q, %v", s, ok)
	}
	if _, ok := Find("gfx9999", "imma_tile"); ok {
		t.Error("found a code object for an unknown target")
	}
	names := TargetNames()
	if len(names) != 10 || names[0] != "gfx1030" || names[9] != "sm_90" {
		t.Errorf("TargetNames = %q", names)
	}
}

// Bytes must match the in-memory layout (on this little-endian host) and a hand-written
// encoding.
func TestBytes(t *testing.T) {
	a := ImmaTileArgs{A: 0x1122334455667788, Bt: 0x0102030405060708, C: 0xa0a1a2a3a4a5a6a7, K: 48, Lda: -16, Ldbt: 64, Ldc: 7}
	want := []byte{
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0xa7, 0xa6, 0xa5, 0xa4, 0xa3, 0xa2, 0xa1, 0xa0,
		48, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff, 64, 0, 0, 0, 7, 0, 0, 0,
	}
	if got := a.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("ImmaTileArgs.Bytes() = % x\nwant % x", got, want)
	}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	if !bytes.Equal(a.Bytes(), mem) {
		t.Errorf("Bytes differs from the struct's memory")
	}
	q := QuantizeQ81Args{X: 1, Y: 2, Ncols: 4096, NcolsPadded: 4096, Nrows: 3, XStride: 4100}
	if got := q.Bytes(); len(got) != QuantizeQ81ArgsSize || got[8] != 2 || got[16] != 0 || got[17] != 0x10 || got[28] != 0x04 || got[29] != 0x10 {
		t.Errorf("QuantizeQ81Args.Bytes() = % x", got)
	}
}

func TestTargetFor(t *testing.T) {
	for arch, want := range map[string]string{
		"gfx1100":                 "gfx1100",
		"gfx1201:sramecc-:xnack-": "gfx1201",
		" gfx1030 ":               "gfx1030",
		"gfx1151":                 "", // an ISA without code objects: no fallback on AMD
		"gfx90a:sramecc+:xnack-":  "",
		"sm_90":                   "sm_90",
		"sm_87":                   "sm_86",
		"sm_120":                  "sm_90",
		"sm_75":                   "", // below every NVIDIA target
		"sm_x":                    "",
		"":                        "",
	} {
		got, ok := TargetFor(arch)
		if got != want || ok != (want != "") {
			t.Errorf("TargetFor(%q) = %q, %v; want %q", arch, got, ok, want)
		}
	}
}
