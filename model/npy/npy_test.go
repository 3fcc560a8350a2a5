package npy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
)

func build(descr, shape string, vals []float32, pad int) []byte {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
	b = append(b, h...)
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return append(b, make([]byte, pad)...)
}

func TestParse(t *testing.T) {
	a, err := Parse(build("<f4", "(2, 3)", []float32{1, 2, 3, 4, 5, -6}, 0))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Shape) != "[2 3]" || a.Data[5] != -6 {
		t.Fatalf("got %v %v", a.Shape, a.Data)
	}
	a, err = Parse(build("<f4", "(4,)", []float32{1, 2, 3, 4}, 0))
	if err != nil || fmt.Sprint(a.Shape) != "[4]" {
		t.Fatalf("1-D: %v %v", a, err)
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{build("<f8", "(1,)", []float32{1, 2}, 0), "float32"},
		{build("<f4", "(3,)", []float32{1, 2}, 0), "needs 12 data bytes"},
		{build("<f4", "(1,)", []float32{1}, 4), "needs 4 data bytes"},
		{[]byte("NUMPY"), "bad magic"},
	} {
		if _, err := Parse(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(build("<f4", "(2, 3)", make([]float32, 6), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b)
		if err != nil {
			return
		}
		n := 1
		for _, d := range a.Shape {
			n *= d
		}
		if n != len(a.Data) {
			t.Fatalf("shape %v but %d values", a.Shape, len(a.Data))
		}
	})
}
