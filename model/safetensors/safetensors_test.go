package safetensors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// file builds a .safetensors file from a header and data.
func file(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	out := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	return append(append(out, header...), data...)
}

func write(t testing.TB, b []byte) string {
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadDTypes(t *testing.T) {
	data := []byte{
		0x80, 0x3f, 0x00, 0xc0, // BF16 1, -2
		0x00, 0x3c, 0x01, 0x00, // F16 1, smallest subnormal 2^-24
	}
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(0.25))
	hdr := `{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},` +
		`"b":{"dtype":"F16","shape":[1,2],"data_offsets":[4,8]},"c":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	c, err := Open(write(t, file(hdr, data)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string][]float32{"a": {1, -2}, "b": {1, float32(math.Ldexp(1, -24))}, "c": {0.25}}
	for n, w := range want {
		got, _, err := c.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("%s[%d] = %g, want %g", n, i, got[i], w[i])
			}
		}
	}
	if got := strings.Join(c.Names(), ","); got != "a,b,c" {
		t.Errorf("Names() = %s", got)
	}
}

func TestRejects(t *testing.T) {
	for _, c := range []struct {
		name, hdr string
		data      int
		want      string
	}{
		{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlap"},
		{"size", `{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8, "needs 12 bytes"},
		{"beyond-eof", `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, 8, "outside"},
		{"dtype", `{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}`, 8, "unsupported dtype"},
		{"negative", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 8, "negative"},
		{"overflow", `{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, 8, "overflows"},
		{"not-json", `[1,2]`, 0, "JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(write(t, file(c.hdr, make([]byte, c.data))))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	_, err := Open(write(t, []byte{1, 2, 3}))
	if err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("3-byte file: %v", err)
	}
	b := file(`{}`, nil)
	binary.LittleEndian.PutUint64(b, 1<<40)
	if _, err = Open(write(t, b)); err == nil || !strings.Contains(err.Error(), "header length") {
		t.Fatalf("huge header length: %v", err)
	}
}

// FuzzOpen: any bytes give a checkpoint or an error, never a panic, and every tensor of
// an accepted file reads without error when its dtype is a float type.
func FuzzOpen(f *testing.F) {
	f.Add(file(`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(file(`{"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[],"data_offsets":[4,6]}}`, make([]byte, 6)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Open(write(t, b))
		if err != nil {
			return
		}
		defer c.Close()
		for _, n := range c.Names() {
			if d := c.Info(n).DType; d == "F32" || d == "F16" || d == "BF16" {
				if _, _, err := c.Float32(n); err != nil {
					t.Fatalf("%s: %v", n, err)
				}
			}
		}
	})
}
