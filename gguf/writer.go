package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"
)

// Writer builds GGUF files: metadata in the order it is added, tensors in the order they
// are added, each tensor's data padded to the alignment (general.alignment, default 32).
// It validates what it is given with the reader's rules, so what it writes always opens.
// Tensor data comes either as bytes or from a streaming source, so multi-gigabyte outputs
// need not be held in memory.
type Writer struct {
	version   uint32
	alignment uint64
	kvs       []KV
	keys      map[string]bool
	tensors   []*wtensor
	names     map[string]bool
}

type wtensor struct {
	name string
	typ  Type
	dims []uint64
	size uint64
	data []byte
	src  func(io.Writer) error
}

// NewWriter returns an empty GGUF version 3 writer.
func NewWriter() *Writer {
	return &Writer{version: 3, alignment: DefaultAlignment, keys: map[string]bool{}, names: map[string]bool{}}
}

// SetVersion selects GGUF version 2 or 3 (identical layout for little-endian files).
func (w *Writer) SetVersion(v uint32) error {
	if v != 2 && v != 3 {
		return fmt.Errorf("gguf: writer: version %d unsupported (2 or 3)", v)
	}
	w.version = v
	return nil
}

// AddKV appends a metadata entry. v is a Go value of a GGUF type (see Value) or a Value.
// Setting general.alignment (a uint32 power of two, multiple of 8, ≤ MaxAlignment) sets
// the data alignment. The split.* keys are reserved: WriteShards sets them.
func (w *Writer) AddKV(key string, v any) error {
	val, err := ValueOf(v)
	if err != nil {
		return fmt.Errorf("gguf: writer: key %q: %w", key, err)
	}
	switch {
	case key == "" || len(key) > MaxKeyLen || !validKey(key):
		return fmt.Errorf("gguf: writer: key %s must be 1..%d printable ASCII bytes", sanitize(key), MaxKeyLen)
	case w.keys[key]:
		return fmt.Errorf("gguf: writer: key %q added twice", key)
	case key == KeySplitNo || key == KeySplitCount || key == KeySplitTensorsCount:
		return fmt.Errorf("gguf: writer: key %q is set by WriteShards, do not add it", key)
	}
	if val.typ == TypeString {
		if s := val.x.(string); len(s) > MaxStringLen || !utf8.ValidString(s) {
			return fmt.Errorf("gguf: writer: key %q: string value must be valid UTF-8 of at most %d bytes", key, MaxStringLen)
		}
	}
	if val.typ == TypeArray && val.elem == TypeString {
		for i, s := range val.x.([]string) {
			if len(s) > MaxStringLen {
				return fmt.Errorf("gguf: writer: key %q element %d: %d bytes exceeds %d", key, i, len(s), MaxStringLen)
			}
		}
	}
	if key == KeyAlignment {
		d := &decoder{path: "(writer)"}
		if e := checkAlignment(d, 0, val); e != nil {
			return fmt.Errorf("gguf: writer: %s", e.Detail)
		}
		w.alignment = uint64(val.x.(uint32))
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: val})
	return nil
}

// AddTensor appends a tensor whose bytes are in memory; len(data) must equal its size.
func (w *Writer) AddTensor(name string, t Type, dims []uint64, data []byte) error {
	wt, err := w.newTensor(name, t, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != wt.size {
		return fmt.Errorf("gguf: writer: tensor %q: %d data bytes, %s %v needs %d", name, len(data), t, dims, wt.size)
	}
	wt.data = data
	w.tensors = append(w.tensors, wt)
	return nil
}

// AddTensorFunc appends a tensor whose bytes src writes when the file is written; src
// must write exactly the tensor's size (checked). src may be called once per Write call.
func (w *Writer) AddTensorFunc(name string, t Type, dims []uint64, src func(io.Writer) error) error {
	wt, err := w.newTensor(name, t, dims)
	if err != nil {
		return err
	}
	wt.src = src
	w.tensors = append(w.tensors, wt)
	return nil
}

func (w *Writer) newTensor(name string, t Type, dims []uint64) (*wtensor, error) {
	switch {
	case len(name) > MaxTensorNameLen || !validTensorName(name):
		return nil, fmt.Errorf("gguf: writer: tensor name %s must be 1..%d bytes of printable UTF-8 on one line", sanitize(name), MaxTensorNameLen)
	case w.names[name]:
		return nil, fmt.Errorf("gguf: writer: tensor %q added twice", name)
	case len(dims) == 0 || len(dims) > MaxDims:
		return nil, fmt.Errorf("gguf: writer: tensor %q: %d dims, must be 1..%d", name, len(dims), MaxDims)
	}
	for _, d := range dims {
		if d > math.MaxInt64 {
			return nil, fmt.Errorf("gguf: writer: tensor %q: dimension %d ≥ 2^63", name, d)
		}
	}
	size, rule := ByteSize(t, dims)
	if rule != "" {
		return nil, fmt.Errorf("gguf: writer: tensor %q: %s %v: %s %s", name, t, dims, rule, rule.Title())
	}
	w.names[name] = true
	return &wtensor{name: name, typ: t, dims: append([]uint64(nil), dims...), size: size}, nil
}

// EncodeHeader returns the bytes of a single-file output up to the aligned start of the
// data section, and the size of the data section that must follow (each tensor padded).
func (w *Writer) EncodeHeader() (header []byte, dataSize uint64, err error) {
	return w.encode(w.kvs, w.tensors)
}

func (w *Writer) encode(kvs []KV, ts []*wtensor) ([]byte, uint64, error) {
	var b bytes.Buffer
	le := binary.LittleEndian
	put := func(v any) { binary.Write(&b, le, v) } // bytes.Buffer writes cannot fail
	putStr := func(s string) { put(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	put(w.version)
	put(uint64(len(ts)))
	put(uint64(len(kvs)))
	for _, kv := range kvs {
		putStr(kv.Key)
		put(uint32(kv.Value.typ))
		v := kv.Value
		if v.typ == TypeArray {
			put(uint32(v.elem))
			put(uint64(v.Len()))
			if ss, ok := v.x.([]string); ok {
				for _, s := range ss {
					putStr(s)
				}
				continue
			}
		}
		switch x := v.x.(type) {
		case string:
			putStr(x)
		case []bool:
			for _, e := range x {
				put(e)
			}
		default:
			put(x) // fixed-size scalars and slices; bool encodes as one byte 0/1
		}
	}
	var off uint64
	for _, t := range ts {
		putStr(t.name)
		put(uint32(len(t.dims)))
		put(t.dims)
		put(uint32(t.typ))
		put(off)
		padded, ok1 := padU64(t.size, w.alignment)
		next, ok2 := addU64(off, padded)
		if !ok1 || !ok2 {
			return nil, 0, errors.New("gguf: writer: data section size overflows")
		}
		off = next
	}
	if pad := (w.alignment - uint64(b.Len())%w.alignment) % w.alignment; pad > 0 {
		b.Write(make([]byte, pad))
	}
	return b.Bytes(), off, nil
}

// WriteTo writes a single-file GGUF to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	return w.write(out, w.kvs, w.tensors)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (w *Writer) write(out io.Writer, kvs []KV, ts []*wtensor) (int64, error) {
	hdr, _, err := w.encode(kvs, ts)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	cw := &countWriter{w: bw}
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, err
	}
	zeros := make([]byte, w.alignment)
	for _, t := range ts {
		start := cw.n
		if t.src != nil {
			if err := t.src(cw); err != nil {
				return cw.n, fmt.Errorf("gguf: writer: tensor %q source: %w", t.name, err)
			}
		} else if _, err := cw.Write(t.data); err != nil {
			return cw.n, err
		}
		if got := uint64(cw.n - start); got != t.size {
			return cw.n, fmt.Errorf("gguf: writer: tensor %q: source wrote %d bytes, expected %d", t.name, got, t.size)
		}
		if pad := (w.alignment - t.size%w.alignment) % w.alignment; pad > 0 {
			if _, err := cw.Write(zeros[:pad]); err != nil {
				return cw.n, err
			}
		}
	}
	return cw.n, bw.Flush()
}

// WriteFile writes a single-file GGUF to path (replaced only once fully written).
func (w *Writer) WriteFile(path string) error {
	return writeFile(path, func(f io.Writer) error { _, err := w.write(f, w.kvs, w.tensors); return err })
}

// writeFile writes through PATH.partial and renames it into place only when everything
// was written, so a failed conversion never leaves a truncated PATH behind.
func writeFile(path string, fn func(io.Writer) error) error {
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// SplitOptions limit each shard of WriteShards; zero means no limit.
type SplitOptions struct {
	MaxTensors int    // tensors per shard
	MaxBytes   uint64 // tensor data bytes per shard (a larger single tensor gets a shard of its own)
}

// WriteShards writes the model as PREFIX-0000k-of-0000N.gguf files in llama.cpp's split
// layout: shard 1 holds all metadata, every shard holds split.no (UINT16, 0-based),
// split.count (UINT16) and split.tensors.count (INT32); later shards also carry
// general.architecture and general.alignment when set. It returns the paths written.
func (w *Writer) WriteShards(prefix string, opt SplitOptions) ([]string, error) {
	var groups [][]*wtensor
	var cur []*wtensor
	var curBytes uint64
	for _, t := range w.tensors {
		full := len(cur) > 0 && ((opt.MaxTensors > 0 && len(cur) >= opt.MaxTensors) ||
			(opt.MaxBytes > 0 && curBytes+t.size > opt.MaxBytes))
		if full {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += t.size
	}
	groups = append(groups, cur)
	n := len(groups)
	if n > math.MaxUint16 || len(w.tensors) > math.MaxInt32 {
		return nil, fmt.Errorf("gguf: writer: %d shards / %d tensors exceed the split keys' ranges", n, len(w.tensors))
	}
	var paths []string
	for i, g := range groups {
		var kvs []KV
		if i == 0 {
			kvs = append(kvs, w.kvs...)
		} else {
			for _, kv := range w.kvs {
				if kv.Key == "general.architecture" || kv.Key == KeyAlignment {
					kvs = append(kvs, kv)
				}
			}
		}
		kvs = append(kvs,
			KV{KeySplitNo, Value{TypeUint16, 0, uint16(i)}},
			KV{KeySplitCount, Value{TypeUint16, 0, uint16(n)}},
			KV{KeySplitTensorsCount, Value{TypeInt32, 0, int32(len(w.tensors))}})
		p := ShardPath(prefix, i, n)
		if err := writeFile(p, func(f io.Writer) error { _, err := w.write(f, kvs, g); return err }); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
