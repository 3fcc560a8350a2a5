package gguf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// TensorInfo describes one tensor. Dims are ggml's ne[0..n_dims-1] (ne[0] is the
// contiguous row length). Offset is relative to the shard's data section, FileOffset is
// absolute in the shard's file. Dims is shared: do not modify it.
type TensorInfo struct {
	Name       string
	Type       Type
	Dims       []uint64
	Offset     uint64 // from the start of the shard's data section
	FileOffset uint64 // from the start of the shard file
	Size       uint64 // bytes
	Shard      int    // index into File.Paths()
}

// Elements is the product of the dims (validated to fit in int64 at Open).
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Split metadata keys (llama.cpp's gguf-split conventions).
const (
	KeySplitNo           = "split.no"            // UINT16, 0-based shard index
	KeySplitCount        = "split.count"         // UINT16, number of shards
	KeySplitTensorsCount = "split.tensors.count" // INT32, tensors over all shards
)

// File is an opened, validated GGUF model: one file or all shards of a split model.
// It is immutable after Open and safe for concurrent readers. The byte slices Data returns
// alias the mapping and are valid only until Close.
type File struct {
	path    string
	shards  []*shard
	tensors []TensorInfo
	byName  map[string]int
	infoOff []int64 // file offset of each tensor's info, parallel to tensors
}

var shardName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// ShardPath returns the file name of shard i (0-based) of n for a split model with the
// given prefix: prefix-00001-of-00003.gguf (llama.cpp's naming).
func ShardPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// Open maps and validates path. A name of the form PREFIX-0000k-of-0000N.gguf opens all N
// shards as one model (any shard's name may be given). Every shard is validated fully
// before Open returns; the error is an *Error naming the file, offset and Rule.
func Open(path string) (*File, error) {
	paths := []string{path}
	if m := shardName.FindStringSubmatch(filepath.Base(path)); m != nil {
		n, _ := strconv.Atoi(m[3])
		k, _ := strconv.Atoi(m[2])
		if n < 1 || k < 1 || k > n {
			return nil, newErr(path, -1, RuleSplit, "file name", "shard %d of %d is not a valid split position", k, n)
		}
		prefix := filepath.Join(filepath.Dir(path), m[1])
		paths = make([]string, n)
		for i := range paths {
			paths[i] = ShardPath(prefix, i, n)
		}
	}
	var shards []*shard
	closeAll := func() {
		for _, s := range shards {
			s.unmap()
		}
	}
	for i, p := range paths {
		s, err := openShard(p)
		if err != nil {
			closeAll()
			var pe *os.PathError
			if len(paths) > 1 && errors.As(err, &pe) && errors.Is(err, os.ErrNotExist) {
				return nil, &Error{Path: p, Offset: -1, Rule: RuleSplit, Field: "shard file",
					Detail: fmt.Sprintf("shard %d of %d is missing (download every part of the model)", i+1, len(paths)), Err: err}
			}
			return nil, err
		}
		shards = append(shards, s)
	}
	f, err := assemble(path, shards)
	if err != nil {
		closeAll()
		return nil, err
	}
	return f, nil
}

// ParseBytes validates a single-file GGUF held in memory (an embedded model, a test
// fixture) with the same checks as Open. Data slices alias b; Close does nothing.
func ParseBytes(name string, b []byte) (*File, error) {
	var s *shard
	err := guardFault(func() string { return name }, b, func() error {
		var perr error
		s, perr = parse(name, b)
		return perr
	})
	if err != nil {
		return nil, err
	}
	s.unmap = func() error { return nil }
	return assemble(name, []*shard{s})
}

// assemble joins validated shards into one model after the split checks (S7).
func assemble(path string, shards []*shard) (*File, error) {
	f := &File{path: path, shards: shards, byName: map[string]int{}}
	if err := f.checkSplit(); err != nil {
		return nil, err
	}
	for i, s := range f.shards {
		for k, t := range s.tensors {
			t.Shard = i
			if j, dup := f.byName[t.Name]; dup {
				return nil, newErr(s.path, s.infoOff[k], RuleDuplicateTensor, fmt.Sprintf("tensor %q", t.Name),
					"also in shard %d (%s): shards of different models mixed?", f.tensors[j].Shard+1, f.shards[f.tensors[j].Shard].path)
			}
			f.byName[t.Name] = len(f.tensors)
			f.tensors = append(f.tensors, t)
			f.infoOff = append(f.infoOff, s.infoOff[k])
		}
	}
	return f, nil
}

func openShard(path string) (*shard, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Rule: RuleIO, Field: "open", Err: err}
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Rule: RuleIO, Field: "stat", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, newErr(path, -1, RuleIO, "open", "not a regular file")
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Rule: RuleIO, Field: "mmap", Err: err}
	}
	var s *shard
	err = guardFault(func() string { return path }, data, func() error {
		var perr error
		s, perr = parse(path, data)
		return perr
	})
	if err != nil {
		unmap()
		return nil, err
	}
	registerMapping(data, path)
	s.unmap = func() error { unregisterMapping(data); return unmap() }
	return s, nil
}

// checkSplit applies S7: a split model's shards agree on split.count and
// split.tensors.count, each has its own split.no, and the tensor total matches.
func (f *File) checkSplit() error {
	n := len(f.shards)
	first := f.shards[0]
	total := 0
	for i, s := range f.shards {
		total += len(s.tensors)
		cnt, hasCnt, err := splitKey[uint16](s, KeySplitCount)
		if err != nil {
			return err
		}
		if n == 1 {
			if hasCnt && cnt > 1 {
				return newErr(s.path, s.kvOffset(KeySplitCount), RuleSplit, KeySplitCount,
					"file is one of %d shards; open it by its -0000k-of-%05d.gguf name so all shards load", cnt, cnt)
			}
			return nil
		}
		no, hasNo, err := splitKey[uint16](s, KeySplitNo)
		if err != nil {
			return err
		}
		if !hasCnt || !hasNo {
			return newErr(s.path, -1, RuleSplit, KeySplitNo, "shard %d of %d lacks %s/%s", i+1, n, KeySplitNo, KeySplitCount)
		}
		if int(cnt) != n {
			return newErr(s.path, s.kvOffset(KeySplitCount), RuleSplit, KeySplitCount, "says %d shards, the file names say %d", cnt, n)
		}
		if int(no) != i {
			return newErr(s.path, s.kvOffset(KeySplitNo), RuleSplit, KeySplitNo, "is %d, expected %d for shard %d of %d (renamed or mixed shards?)", no, i, i+1, n)
		}
		tc, hasTC, err := splitKey[int32](s, KeySplitTensorsCount)
		if err != nil {
			return err
		}
		ftc, fhasTC, _ := splitKey[int32](first, KeySplitTensorsCount)
		if hasTC != fhasTC || tc != ftc {
			return newErr(s.path, s.kvOffset(KeySplitTensorsCount), RuleSplit, KeySplitTensorsCount,
				"differs from shard 1 (%d vs %d): shards of different models mixed?", tc, ftc)
		}
		if a, ok := s.keys["general.architecture"]; ok && i > 0 {
			fa, fok := first.keys["general.architecture"]
			if fok && s.kvs[a].Value.x != first.kvs[fa].Value.x {
				return newErr(s.path, s.kvOff[a], RuleSplit, "general.architecture", "differs from shard 1: shards of different models mixed?")
			}
		}
	}
	if tc, has, _ := splitKey[int32](first, KeySplitTensorsCount); has && int(tc) != total {
		return newErr(first.path, first.kvOffset(KeySplitTensorsCount), RuleSplit, KeySplitTensorsCount,
			"says %d tensors, the %d shards hold %d", tc, n, total)
	}
	return nil
}

func splitKey[T uint16 | int32](s *shard, key string) (T, bool, error) {
	i, ok := s.keys[key]
	if !ok {
		return 0, false, nil
	}
	v, ok := s.kvs[i].Value.x.(T)
	if !ok {
		var zero T
		return 0, false, newErr(s.path, s.kvOff[i], RuleSplit, key, "has type %s, expected %T", s.kvs[i].Value.TypeName(), zero)
	}
	return v, true, nil
}

func (s *shard) kvOffset(key string) int64 {
	if i, ok := s.keys[key]; ok {
		return s.kvOff[i]
	}
	return -1
}

// Close unmaps every shard. Slices from Data become invalid; Close is idempotent.
func (f *File) Close() error {
	var first error
	for _, s := range f.shards {
		if s.unmap != nil {
			if err := s.unmap(); err != nil && first == nil {
				first = err
			}
			s.unmap, s.data = nil, nil
		}
	}
	return first
}

// Path is the path Open was given.
func (f *File) Path() string { return f.path }

// Paths lists the shard files in order (one entry for an unsplit model).
func (f *File) Paths() []string {
	out := make([]string, len(f.shards))
	for i, s := range f.shards {
		out[i] = s.path
	}
	return out
}

// Version is the GGUF version of the first shard (2 or 3).
func (f *File) Version() uint32 { return f.shards[0].version }

// Alignment is the first shard's data alignment (general.alignment or 32).
func (f *File) Alignment() uint64 { return f.shards[0].alignment }

// DataOffset is the absolute offset of shard i's data section.
func (f *File) DataOffset(shard int) uint64 { return f.shards[shard].dataStart }

// FileSize is the size in bytes of shard i's file.
func (f *File) FileSize(shard int) int64 { return int64(len(f.shards[shard].data)) }

// Warnings lists accepted oddities (D3 trailing bytes) over all shards.
func (f *File) Warnings() []*Error {
	var w []*Error
	for _, s := range f.shards {
		w = append(w, s.warnings...)
	}
	return w
}

// Tensors lists every tensor in file order (shard by shard). Do not modify it.
func (f *File) Tensors() []TensorInfo { return f.tensors }

// Tensor returns the named tensor's info.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// InfoOffset is the file offset (in its shard) of the named tensor's info, or -1.
func (f *File) InfoOffset(name string) int64 {
	if i, ok := f.byName[name]; ok {
		return f.infoOff[i]
	}
	return -1
}

// tensorErr is an error about a tensor at its info's offset.
func (f *File) tensorErr(t TensorInfo, rule Rule, format string, args ...any) *Error {
	return newErr(f.shards[t.Shard].path, f.InfoOffset(t.Name), rule, fmt.Sprintf("tensor %q", t.Name), format, args...)
}

// Data returns the named tensor's bytes as a slice of the mapping (no copy; valid until
// Close; read-only: writing faults). Reading it may fault if the file is truncated while
// mapped: copy through CopyOut where that must become an error.
func (f *File) Data(name string) ([]byte, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, newErr(f.path, -1, RuleTensorSet, fmt.Sprintf("tensor %q", name), "not in the file")
	}
	t := f.tensors[i]
	s := f.shards[t.Shard]
	if s.data == nil {
		return nil, newErr(s.path, -1, RuleIO, fmt.Sprintf("tensor %q", name), "file is closed")
	}
	end := t.FileOffset + t.Size
	return s.data[t.FileOffset:end:end], nil
}
