// Package safetensors reads Hugging Face .safetensors files (single files and sharded
// checkpoints with model.safetensors.index.json), validating the header against the file
// before any tensor is read: every tensor's byte range must lie inside the data section,
// match its dtype and shape exactly, and not overlap another.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
)

// maxHeader caps the JSON header; real checkpoints have headers under a few MB.
const maxHeader = 100 << 20

// DType sizes in bytes for the element types this package reads.
var dtypeSize = map[string]int{"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}

// Info describes one tensor of a checkpoint.
type Info struct {
	Name  string
	DType string // "BF16", "F16", "F32", ...
	Shape []int  // row-major, outermost first (PyTorch order)
	file  *shard
	begin int64 // absolute file offset
	size  int64
}

type shard struct {
	path string
	f    *os.File
}

// Checkpoint is a set of tensors from one or more .safetensors files.
type Checkpoint struct {
	tensors map[string]*Info
	shards  []*shard
}

// Open reads the header of one .safetensors file, or of every shard listed by a
// model.safetensors.index.json when path is a directory or an index file.
func Open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	c := &Checkpoint{tensors: map[string]*Info{}}
	var files []string
	switch {
	case st.IsDir():
		idx := filepath.Join(path, "model.safetensors.index.json")
		if _, err := os.Stat(idx); err == nil {
			if files, err = indexFiles(idx); err != nil {
				return nil, err
			}
		} else {
			files, _ = filepath.Glob(filepath.Join(path, "*.safetensors"))
			if len(files) == 0 {
				return nil, fmt.Errorf("safetensors: %s holds no *.safetensors file (for the tiny oracle models, rebuild it with make_weights.py)", path)
			}
		}
	case filepath.Ext(path) == ".json":
		if files, err = indexFiles(path); err != nil {
			return nil, err
		}
	default:
		files = []string{path}
	}
	for _, f := range files {
		if err := c.addShard(f); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func indexFiles(idx string) ([]string, error) {
	raw, err := os.ReadFile(idx)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &ix); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", idx, err)
	}
	seen := map[string]bool{}
	var files []string
	for _, f := range ix.WeightMap {
		if filepath.Base(f) != f {
			return nil, fmt.Errorf("safetensors: %s: shard name %q is not a plain file name", idx, f)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, filepath.Join(filepath.Dir(idx), f))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("safetensors: %s: empty weight_map", idx)
	}
	return files, nil
}

func (c *Checkpoint) addShard(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	sh := &shard{path: path, f: f}
	c.shards = append(c.shards, sh)
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	var lenb [8]byte
	if _, err := f.ReadAt(lenb[:], 0); err != nil {
		return fmt.Errorf("safetensors: %s: file too short for the 8-byte header length (%d bytes)", path, size)
	}
	hl := binary.LittleEndian.Uint64(lenb[:])
	if hl > maxHeader || int64(hl) > size-8 {
		return fmt.Errorf("safetensors: %s: header length %d exceeds the file (%d bytes) or the %d-byte cap", path, hl, size, maxHeader)
	}
	hb := make([]byte, hl)
	if _, err := f.ReadAt(hb, 8); err != nil {
		return fmt.Errorf("safetensors: %s: reading header: %w", path, err)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return fmt.Errorf("safetensors: %s: header is not a JSON object: %w", path, err)
	}
	dataStart := int64(8 + hl)
	dataLen := size - dataStart
	type rng struct {
		b, e int64
		name string
	}
	var ranges []rng
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("safetensors: %s: tensor %q: %w", path, name, err)
		}
		es, ok := dtypeSize[e.DType]
		if !ok {
			return fmt.Errorf("safetensors: %s: tensor %q: unsupported dtype %q", path, name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > dataLen {
			return fmt.Errorf("safetensors: %s: tensor %q: data_offsets %v outside the %d-byte data section (file truncated?)", path, name, e.Offsets, dataLen)
		}
		n := uint64(es)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: %s: tensor %q: negative dimension %d", path, name, d)
			}
			hi, lo := bits.Mul64(n, uint64(d))
			if hi != 0 || lo > math.MaxInt64 {
				return fmt.Errorf("safetensors: %s: tensor %q: shape %v overflows", path, name, e.Shape)
			}
			n = lo
			shape[i] = int(d)
		}
		if int64(n) != e.Offsets[1]-e.Offsets[0] {
			return fmt.Errorf("safetensors: %s: tensor %q: %s%v needs %d bytes, data_offsets give %d", path, name, e.DType, e.Shape, n, e.Offsets[1]-e.Offsets[0])
		}
		if _, dup := c.tensors[name]; dup {
			return fmt.Errorf("safetensors: %s: tensor %q appears in two shards", path, name)
		}
		c.tensors[name] = &Info{Name: name, DType: e.DType, Shape: shape, file: sh, begin: dataStart + e.Offsets[0], size: int64(n)}
		ranges = append(ranges, rng{e.Offsets[0], e.Offsets[1], name})
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].b < ranges[j].b })
	for i := 1; i < len(ranges); i++ {
		if ranges[i].b < ranges[i-1].e {
			return fmt.Errorf("safetensors: %s: tensors %q and %q overlap", path, ranges[i-1].name, ranges[i].name)
		}
	}
	return nil
}

// Close releases the files.
func (c *Checkpoint) Close() error {
	var first error
	for _, s := range c.shards {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.shards = nil
	return first
}

// Names lists the tensor names, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.tensors))
	for n := range c.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Info returns the description of a tensor, or nil if the checkpoint has none by that name.
func (c *Checkpoint) Info(name string) *Info { return c.tensors[name] }

// Float32 reads a BF16, F16 or F32 tensor and widens it exactly to float32.
func (c *Checkpoint) Float32(name string) ([]float32, *Info, error) {
	in := c.tensors[name]
	if in == nil {
		return nil, nil, fmt.Errorf("safetensors: no tensor %q in the checkpoint", name)
	}
	out, err := in.float32s(name, 0, int(in.size)/dtypeSize[in.DType])
	if err != nil {
		return nil, nil, err
	}
	return out, in, nil
}

// float32s reads n elements of tensor name (in) from element off on, widened exactly.
func (in *Info) float32s(name string, off, n int) ([]float32, error) {
	es := dtypeSize[in.DType]
	raw := make([]byte, n*es)
	if _, err := in.file.f.ReadAt(raw, in.begin+int64(off*es)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", in.file.path, name, err)
	}
	out := make([]float32, n)
	switch in.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case "F16":
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		return nil, fmt.Errorf("safetensors: %s: tensor %q has dtype %s; only F32, F16 and BF16 weights are supported", in.file.path, name, in.DType)
	}
	return out, nil
}

// F16ToF32 widens an IEEE half-precision value exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1F
	man := uint32(h) & 0x3FF
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0xFF<<23 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal half: value = man * 2^-24
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}
