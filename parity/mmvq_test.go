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
