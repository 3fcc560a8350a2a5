package gguf

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzGGUF feeds arbitrary bytes to the parser. Every input must either be rejected with
// an *Error carrying a Rule and an in-file offset, or be fully usable: every value
// printable, every tensor's bytes inside the input, and the content surviving a
// write/read round trip through the Writer.
func FuzzGGUF(f *testing.F) {
	f.Add(base(f))
	for _, align := range []uint32{0, 8, 4096} {
		w, _ := buildSample(f, align)
		f.Add(encode(f, w))
	}
	f.Add([]byte("GGUF\x03\x00\x00\x00" + strings.Repeat("\x00", 16)))
	for _, c := range malformedCases() {
		if c.file != nil {
			f.Add(c.file(f))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseBytes("fuzz.gguf", b)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) || ge.Rule == "" || ge.Path != "fuzz.gguf" {
				t.Fatalf("not a proper *Error: %v", err)
			}
			if ge.Offset < -1 || ge.Offset > int64(len(b)) {
				t.Fatalf("offset %d outside the %d-byte input: %v", ge.Offset, len(b), err)
			}
			return
		}
		defer file.Close()
		for _, kv := range file.KVs() {
			_ = kv.Value.Summary(4)
		}
		_, _ = file.VocabSize()
		_, _ = file.ChatTemplate()
		_, _ = file.Architecture()
		w := NewWriter()
		for _, kv := range file.KVs() {
			if strings.HasPrefix(kv.Key, "split.") {
				continue
			}
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatalf("reader accepted what the writer rejects: %v", err)
			}
		}
		for _, ti := range file.Tensors() {
			d, err := file.Data(ti.Name)
			if err != nil || uint64(len(d)) != ti.Size || ti.FileOffset+ti.Size > uint64(len(b)) {
				t.Fatalf("tensor %q: %d bytes at %d of %d, err %v", ti.Name, len(d), ti.FileOffset, len(b), err)
			}
			if !bytes.Equal(d, b[ti.FileOffset:ti.FileOffset+ti.Size]) {
				t.Fatalf("tensor %q: Data is not the file's bytes", ti.Name)
			}
			_ = file.CheckFinite(ti.Name)
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, d); err != nil {
				t.Fatalf("reader accepted a tensor the writer rejects: %v", err)
			}
		}
		again, err := ParseBytes("again.gguf", encode(t, w))
		if err != nil {
			t.Fatalf("writer output does not parse: %v", err)
		}
		kvs := []KV{}
		for _, kv := range file.KVs() {
			if !strings.HasPrefix(kv.Key, "split.") {
				kvs = append(kvs, kv)
			}
		}
		if d := cmp.Diff(kvs, append([]KV{}, again.KVs()...), cmp.Comparer(sameValue)); d != "" {
			t.Fatalf("metadata changed in a round trip:\n%s", d)
		}
		equal(t, len(file.Tensors()), len(again.Tensors()))
		for i, ti := range again.Tensors() {
			a, _ := file.Data(ti.Name)
			c, _ := again.Data(ti.Name)
			if ti.Name != file.Tensors()[i].Name || !bytes.Equal(a, c) {
				t.Fatalf("tensor %d changed in a round trip", i)
			}
		}
	})
}

// sameValue compares values bit for bit (NaN equals NaN with the same bits).
func sameValue(a, b Value) bool {
	if a.Type() != b.Type() || a.ElemType() != b.ElemType() {
		return false
	}
	return cmp.Equal(a.Any(), b.Any(), cmp.Comparer(func(x, y float32) bool { return x == y || x != x && y != y }),
		cmp.Comparer(func(x, y float64) bool { return x == y || x != x && y != y }))
}
