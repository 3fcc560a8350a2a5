package quant

import (
	"bytes"
	"fmt"
	"testing"
)

func init() {
	vectorChecks = append(vectorChecks, checkQuantizeVectors)
}

// checkQuantizeVectors re-quantizes the vectors' source floats with the reference
// quantizer of the weight type (where there is one) and the activation with the
// vec_dot type's and the CPU q8_1 reference quantizers, and compares with ggml's bytes.
func checkQuantizeVectors(t *testing.T, v *vectorFile, typ Type, src []float32, wq []byte) counts {
	c := counts{}
	switch typ {
	case Q8_0, Q2_0, Q4_K, Q6_K, F16, BF16:
		got := make([]byte, v.RowBytes)
		for r := 0; r < v.Rows; r++ {
			if err := Quantize(typ, src[r*v.K:(r+1)*v.K], got); err != nil {
				t.Fatalf("row %d: %v", r, err)
			}
			want := wq[r*v.RowBytes : (r+1)*v.RowBytes]
			if !bytes.Equal(got, want) {
				t.Errorf("Quantize(%s) row %d: %s", typ, r, firstDiff(got, want, typ.BlockBytes()))
			}
			c["quantized-bytes"] += len(got)
		}
	}
	act := f32s(v.section("act_f32"))
	actQ := v.section("act_q")
	got := make([]byte, len(actQ))
	if err := Quantize(Type(v.VecDotTypeID), act, got); err != nil {
		t.Fatalf("activation: %v", err)
	}
	if !bytes.Equal(got, actQ) {
		t.Errorf("Quantize(%s) activation: %s", Type(v.VecDotTypeID), firstDiff(got, actQ, Type(v.VecDotTypeID).BlockBytes()))
	}
	c["act-bytes"] += len(got)
	q81 := v.section("act_q8_1")
	got = make([]byte, len(q81))
	if err := Quantize(Q8_1, act, got); err != nil {
		t.Fatalf("activation q8_1: %v", err)
	}
	if !bytes.Equal(got, q81) {
		t.Errorf("Quantize(q8_1) activation: %s", firstDiff(got, q81, 36))
	}
	c["act-bytes"] += len(got)
	return c
}

// firstDiff describes where two byte strings first differ, by block and offset.
func firstDiff(got, want []byte, blockBytes int) string {
	n := 0
	first := -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if first < 0 {
		return "equal"
	}
	return fmt.Sprintf("block %d byte %d: got %d want %d (%d bytes differ)", first/blockBytes, first%blockBytes, got[first], want[first], n)
}
