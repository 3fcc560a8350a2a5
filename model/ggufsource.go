package model

import (
	"fmt"
	"strings"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/quant"
)

// ggufMeta adapts a GGUF file to Meta.
type ggufMeta struct{ f *gguf.File }

func (m ggufMeta) Has(key string) bool { return m.f.Has(key) }

func (m ggufMeta) Uint(key string) (uint64, error) {
	v, err := m.f.Int(key)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("%s: metadata key %s = %d must not be negative", m.f.Path(), key, v)
	}
	return uint64(v), nil
}

func (m ggufMeta) Float(key string) (float64, error) { return m.f.Float64(key) }
func (m ggufMeta) String(key string) (string, error) { return m.f.String(key) }
func (m ggufMeta) Bool(key string) (bool, error)     { return m.f.Bool(key) }

// GGUFSource serves a model's weights straight from a mapped GGUF file.
type GGUFSource struct {
	F       *gguf.File
	tensors map[string]*Tensor
	names   []string
}

// OpenGGUF maps and validates a GGUF file and prepares every tensor for row decoding;
// a tensor of a type the quant package cannot decode is an error naming it.
func OpenGGUF(path string) (*GGUFSource, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	s, err := NewGGUFSource(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// NewGGUFSource serves the tensors of an opened GGUF file (for example one parsed from
// embedded bytes with gguf.ParseBytes). Close closes f.
func NewGGUFSource(f *gguf.File) (*GGUFSource, error) {
	// T10 before anything is prepared: the first tensor of a type quant cannot decode fails,
	// as a *gguf.Error naming the file, the tensor and its info's offset.
	if err := f.CheckSupportedTypes(cpuTypes); err != nil {
		return nil, err
	}
	s := &GGUFSource{F: f, tensors: map[string]*Tensor{}}
	for _, ti := range f.Tensors() {
		t, err := s.prepare(ti)
		if err != nil {
			return nil, err
		}
		s.tensors[ti.Name] = t
		s.names = append(s.names, ti.Name)
	}
	return s, nil
}

// cpuTypes are the tensor types the CPU engine reads: F32 and quant's weight formats
// (quant.Info.Weight: DecodeRow accepts them).
var cpuTypes = func() []gguf.Type {
	ts := []gguf.Type{gguf.F32}
	for _, t := range quant.WeightTypes() {
		ts = append(ts, gguf.Type(t))
	}
	return ts
}()

func (s *GGUFSource) prepare(ti gguf.TensorInfo) (*Tensor, error) {
	path := s.F.Path()
	// gguf.Open already holds n_dims to 1..MaxDims (T3); Expect with the tensor's own dims
	// adds the one check left, that no dimension is zero (T5).
	if _, err := s.F.Expect(ti.Name, ti.Dims); err != nil {
		return nil, err
	}
	dims := make([]int, len(ti.Dims))
	for i, d := range ti.Dims {
		if d > 1<<40 {
			return nil, fmt.Errorf("%s: tensor %s has dimension %d", path, ti.Name, d)
		}
		dims[i] = int(d)
	}
	t, err := NewQuantTensor(ti.Name, quant.Type(ti.Type), dims, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if t.Data, err = s.F.Data(ti.Name); err != nil {
		return nil, err
	}
	if rows := t.Rows(); rows*t.RowBytes != len(t.Data) {
		return nil, fmt.Errorf("%s: tensor %s: %d rows of %d bytes do not fill its %d bytes", path, ti.Name, rows, t.RowBytes, len(t.Data))
	}
	return t, nil
}

// NewQuantTensor describes a tensor of ggml type qt with the given dims over data (which
// may be set later), choosing its row decoder and the fastest single-row dot available:
// a fused float dot for F32, Q8_0, Q4_K and Q6_K, otherwise decode-then-dot. (quant.VecDotCPU,
// ggml's integer dot against a Q8_K activation, was measured slower here: it is the
// bit-exact reference, not a fast path.)
func NewQuantTensor(name string, qt quant.Type, dims []int, data []byte) (*Tensor, error) {
	rb, err := qt.RowBytes(dims[0])
	if err != nil {
		return nil, fmt.Errorf("tensor %s: unsupported tensor type %s for this engine: %v", name, qt, err)
	}
	t := &Tensor{Name: name, Type: strings.ToUpper(qt.String()), Dims: dims, Data: data, RowBytes: rb}
	switch qt {
	case quant.F32:
		t.Decode, t.Dot = DecodeF32, dotF32
	case quant.F16:
		t.Decode = DecodeF16
	case quant.BF16:
		t.Decode = DecodeBF16
	default:
		t.Decode = func(dst []float32, src []byte) {
			if err := quant.DecodeRow(qt, src, dst); err != nil {
				// Row sizes were checked when the tensor was made; a programming error.
				panic("model: decoding " + name + ": " + err.Error())
			}
		}
		switch qt {
		case quant.Q8_0:
			t.Dot = dotQ8_0
		case quant.Q4_K:
			t.Dot = dotQ4K
		case quant.Q6_K:
			t.Dot = dotQ6K
		}
	}
	return t, nil
}

// Path is the file's path.
func (s *GGUFSource) Path() string { return s.F.Path() }

// Meta is the file's metadata.
func (s *GGUFSource) Meta() Meta { return ggufMeta{s.F} }

// Tensor returns a tensor by name.
func (s *GGUFSource) Tensor(name string) (*Tensor, bool) { t, ok := s.tensors[name]; return t, ok }

// Names lists the tensors in file order.
func (s *GGUFSource) Names() []string { return s.names }

// Close unmaps the file; the model must not be used afterwards.
func (s *GGUFSource) Close() error { return s.F.Close() }

// MatrixType is the storage type of the model's expert matrices (what a user calls the
// model's quantization), e.g. "Q8_0".
func (m *Model) MatrixType() string {
	if len(m.layers) > 0 && m.layers[0].gateExps != nil {
		return m.layers[0].gateExps.Type
	}
	if m.q4 != nil && len(m.q4.layers) > 0 && m.q4.layers[0].moe.gateExps != nil {
		return m.q4.layers[0].moe.gateExps.Type
	}
	return m.tokEmbd.Type
}
