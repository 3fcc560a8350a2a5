package gguf

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestHandAssembled reads a file assembled byte by byte from the GGUF specification, not
// by the Writer, so a misreading of the format shared by Writer and reader would show.
func TestHandAssembled(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	u32 := func(v uint32) { b = le.AppendUint32(b, v) }
	u64 := func(v uint64) { b = le.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }

	b = append(b, 'G', 'G', 'U', 'F')
	u32(3) // version
	u64(2) // n_tensors
	u64(4) // n_kv
	str("general.architecture")
	u32(8) // STRING
	str("qwen3moe")
	str("general.alignment")
	u32(4) // UINT32
	u32(64)
	str("a.f32s")
	u32(9) // ARRAY
	u32(6) // of FLOAT32
	u64(2)
	u32(math.Float32bits(1.5))
	u32(math.Float32bits(-2))
	str("a.i16")
	u32(3) // INT16
	b = le.AppendUint16(b, uint16(0xFFFE))
	// tensor infos: name, n_dims, ne[..], type, offset
	str("w")
	u32(2)
	u64(32)
	u64(2)
	u32(8) // Q8_0: 2 rows × 34 bytes = 68
	u64(0)
	str("n")
	u32(1)
	u64(3)
	u32(0)   // F32: 12 bytes
	u64(128) // 68 padded to 64 → 128
	for len(b)%64 != 0 {
		b = append(b, 0)
	}
	dataStart := len(b)
	for i := 0; i < 68; i++ {
		b = append(b, byte(i))
	}
	for len(b)%64 != 0 {
		b = append(b, 0)
	}
	for _, v := range []float32{1, 2, 3} {
		u32(math.Float32bits(v))
	}

	f, err := ParseBytes("hand.gguf", b)
	noErr(t, err)
	equal(t, uint64(64), f.Alignment())
	equal(t, uint64(dataStart), f.DataOffset(0))
	arch, err := f.Architecture()
	noErr(t, err)
	equal(t, "qwen3moe", arch)
	fs, err := f.Float32s("a.f32s")
	noErr(t, err)
	equal(t, []float32{1.5, -2}, fs)
	v, ok := f.Value("a.i16")
	isTrue(t, ok)
	equal(t, int16(-2), v.Any())
	ts := f.Tensors()
	equal(t, 2, len(ts))
	equal(t, TensorInfo{Name: "w", Type: Q8_0, Dims: []uint64{32, 2}, Offset: 0, FileOffset: uint64(dataStart), Size: 68}, ts[0])
	equal(t, TensorInfo{Name: "n", Type: F32, Dims: []uint64{3}, Offset: 128, FileOffset: uint64(dataStart + 128), Size: 12}, ts[1])
	d, err := f.Data("n")
	noErr(t, err)
	equal(t, b[len(b)-12:], d)
	equal(t, 0, len(f.Warnings()), "the file ends at the last tensor's end, unpadded: valid")
}
