package gguf

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sampleKVs has one entry of every metadata type, scalars and arrays, in a fixed order.
func sampleKVs() []KV {
	kv := func(k string, x any) KV {
		v, err := ValueOf(x)
		if err != nil {
			panic(err)
		}
		return KV{k, v}
	}
	return []KV{
		kv("general.architecture", "qwen3moe"),
		kv("general.name", "tiny ünïcode ✓"),
		kv("t.u8", uint8(200)), kv("t.i8", int8(-100)),
		kv("t.u16", uint16(60000)), kv("t.i16", int16(-30000)),
		kv("t.u32", uint32(4000000000)), kv("t.i32", int32(-2000000000)),
		kv("t.f32", float32(1.5)), kv("t.bool", true), kv("t.false", false),
		kv("t.u64", uint64(math.MaxUint64)), kv("t.i64", int64(math.MinInt64)),
		kv("t.f64", math.Pi),
		kv("t.au8", []uint8{1, 2, 255}), kv("t.ai8", []int8{-1, 0, 1}),
		kv("t.au16", []uint16{1, 65535}), kv("t.ai16", []int16{-32768, 7}),
		kv("t.au32", []uint32{0, 1 << 31}), kv("t.ai32", []int32{-5, 5}),
		kv("t.af32", []float32{0.25, -2}), kv("t.abool", []bool{true, false, true}),
		kv("t.astr", []string{"a", "", "\xff raw bytes"}), kv("t.au64", []uint64{1 << 63}),
		kv("t.ai64", []int64{-1 << 63}), kv("t.af64", []float64{1e300}),
		kv("t.empty", []float32{}),
	}
}

type sampleTensor struct {
	name string
	typ  Type
	dims []uint64
}

var sampleTensors = []sampleTensor{
	{"token_embd.weight", Q8_0, []uint64{64, 3}},
	{"blk.0.ffn_up_exps.weight", Q4_K, []uint64{256, 2, 2}},
	{"blk.0.attn_norm.weight", F32, []uint64{7}},
	{"blk.0.x", Q2_0, []uint64{128, 1, 1, 2}},
	{"blk.0.empty", F16, []uint64{0, 4}},
	{"output.weight", BF16, []uint64{5, 3}},
}

// patterned returns n bytes that differ per tensor, so a misplaced slice shows.
func patterned(n uint64, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func buildSample(t testing.TB, align uint32) (*Writer, [][]byte) {
	w := NewWriter()
	for _, kv := range sampleKVs() {
		noErr(t, w.AddKV(kv.Key, kv.Value))
	}
	if align != 0 {
		noErr(t, w.AddKV(KeyAlignment, align))
	}
	var datas [][]byte
	for i, st := range sampleTensors {
		size, rule := ByteSize(st.typ, st.dims)
		equal(t, Rule(""), rule)
		data := patterned(size, byte(i))
		datas = append(datas, data)
		if i%2 == 0 {
			noErr(t, w.AddTensor(st.name, st.typ, st.dims, data))
		} else {
			noErr(t, w.AddTensorFunc(st.name, st.typ, st.dims, func(out io.Writer) error {
				_, err := out.Write(data)
				return err
			}))
		}
	}
	return w, datas
}

func writeTemp(t testing.TB, name string, b []byte) string {
	p := filepath.Join(t.TempDir(), name)
	noErr(t, os.WriteFile(p, b, 0o644))
	return p
}

func encode(t testing.TB, w *Writer) []byte {
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	noErr(t, err)
	return buf.Bytes()
}

func checkSample(t *testing.T, f *File, datas [][]byte, wantKVs []KV) {
	t.Helper()
	equal(t, len(wantKVs), len(f.KVs()))
	for i, kv := range f.KVs() {
		equal(t, wantKVs[i].Key, kv.Key)
		equal(t, wantKVs[i].Value.Type(), kv.Value.Type(), kv.Key)
		equal(t, wantKVs[i].Value.ElemType(), kv.Value.ElemType(), kv.Key)
		if d := cmp.Diff(wantKVs[i].Value.Any(), kv.Value.Any()); d != "" {
			t.Fatalf("key %s: %s", kv.Key, d)
		}
	}
	equal(t, len(sampleTensors), len(f.Tensors()))
	for i, ti := range f.Tensors() {
		st := sampleTensors[i]
		equal(t, st.name, ti.Name)
		equal(t, st.typ, ti.Type)
		equal(t, st.dims, ti.Dims)
		equal(t, uint64(0), ti.Offset%f.Alignment(), ti.Name)
		got, err := f.Data(st.name)
		noErr(t, err)
		equal(t, datas[i], got, st.name)
		cp := make([]byte, len(got))
		n, err := CopyOut(cp, got)
		noErr(t, err)
		equal(t, len(got), n)
		equal(t, datas[i], cp)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 8, 64, 4096} {
		t.Run("align"+itoa(int(align)), func(t *testing.T) {
			w, datas := buildSample(t, align)
			raw := encode(t, w)
			f, err := Open(writeTemp(t, "m.gguf", raw))
			noErr(t, err)
			defer f.Close()
			want := sampleKVs()
			if align != 0 {
				want = append(want, KV{KeyAlignment, Value{TypeUint32, 0, align}})
			} else {
				align = DefaultAlignment
			}
			equal(t, uint64(align), f.Alignment())
			checkSample(t, f, datas, want)
			equal(t, 0, len(f.Warnings()))
			equal(t, 0, len(raw)%int(align), "file ends padded to the alignment")

			// Reading and writing again gives the identical bytes.
			w2 := NewWriter()
			for _, kv := range f.KVs() {
				noErr(t, w2.AddKV(kv.Key, kv.Value))
			}
			for _, ti := range f.Tensors() {
				d, _ := f.Data(ti.Name)
				noErr(t, w2.AddTensor(ti.Name, ti.Type, ti.Dims, d))
			}
			equal(t, raw, encode(t, w2))
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
