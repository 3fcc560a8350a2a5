package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Int64s reads an I64 tensor (hash constants and other integer tables) exactly.
func (c *Checkpoint) Int64s(name string) ([]int64, error) {
	in := c.tensors[name]
	if in == nil {
		return nil, fmt.Errorf("safetensors: no tensor %q in the checkpoint", name)
	}
	if in.DType != "I64" {
		return nil, fmt.Errorf("safetensors: %s: tensor %q has dtype %s, want I64", in.file.path, name, in.DType)
	}
	raw := make([]byte, in.size)
	if _, err := in.file.f.ReadAt(raw, in.begin); err != nil && err != io.EOF {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", in.file.path, name, err)
	}
	out := make([]int64, len(raw)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out, nil
}

// Float32Rows reads rows [r0, r0+n) of a BF16, F16 or F32 tensor (the outermost dimension
// is the row), widened exactly, without reading the rest: a 50 GB table is converted a
// slice at a time.
func (c *Checkpoint) Float32Rows(name string, r0, n int) ([]float32, error) {
	in := c.tensors[name]
	if in == nil {
		return nil, fmt.Errorf("safetensors: no tensor %q in the checkpoint", name)
	}
	if len(in.Shape) == 0 || r0 < 0 || n < 0 || r0+n > in.Shape[0] {
		return nil, fmt.Errorf("safetensors: %s: tensor %q%v: rows [%d, %d) out of range", in.file.path, name, in.Shape, r0, r0+n)
	}
	rowElems := 1
	for _, d := range in.Shape[1:] {
		rowElems *= d
	}
	return in.float32s(name, r0*rowElems, n*rowElems)
}
