package parity

import "testing"

// TestMmvqCaseBounds: every mmvq case checks exactly one y bound, the one whose derivation
// covers its K ("y" up to 14336, "y-long" up to 40960); no case exceeds the derivations;
// and some one-column case has K > 32768 (sm_90's segmented activation staging: 1024
// Q8_1 groups per LDS segment at one column).
func TestMmvqCaseBounds(t *testing.T) {
	f := families["mmvq"]
	segmented := false
	for _, c := range f.Cases {
		k := c.Dims[1]
		if k > 40960 {
			t.Errorf("%s: K = %d is beyond the y-long derivation (K ≤ 40960)", c.Name, k)
		}
		if k > 32768 && c.Dims[2] == 1 {
			segmented = true
		}
		for v, bs := range f.Bounds {
			got := map[string]bool{}
			for _, b := range mmvqCaseBounds(bs, k) {
				got[b.Name] = true
			}
			want := "y"
			if k > mmvqLongK {
				want = "y-long"
			}
			if !got[want] || got["y"] == got["y-long"] || !got["int"] || !got["err"] {
				t.Errorf("%s/%s (K = %d): checks %v, want %s, int and err", v, c.Name, k, got, want)
			}
		}
	}
	if !segmented {
		t.Error("no one-column case with K > 32768: the segmented staging path is not reached")
	}
}

// TestMmvqGridX: the parity and benchmark grids come from kernels/abi's rows per block
// (quantized types 16 rows a block, F16/BF16 8), and an unknown symbol or target is an error.
func TestMmvqGridX(t *testing.T) {
	for _, c := range []struct {
		target, symbol string
		rows, want     int
	}{
		{"", "strata_mmvq_q80", 4096, 256},
		{"sm_90", "strata_mmvq_iq2xs", 7, 1},
		{"gfx1100", "strata_mmvq_q6k", 4097, 257},
		{"", "strata_mmvq_f16", 4096, 512},
	} {
		got, err := mmvqGridX(c.target, c.symbol, c.rows)
		if err != nil || got != c.want {
			t.Errorf("mmvqGridX(%q, %s, %d) = %d, %v; want %d", c.target, c.symbol, c.rows, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"", "strata_mmvq_nope"}, {"sm_1", "strata_mmvq_q80"}} {
		if _, err := mmvqGridX(c[0], c[1], 16); err == nil {
			t.Errorf("mmvqGridX(%q, %s): no error", c[0], c[1])
		}
	}
}
