package parity

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
)

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

// TestMmvqGeomsTable: kernels.MmvqGeoms agrees with every NVIDIA target's generated
// decode-geometry kernels: strata_mmvq_<type>_g<g> of a quantized type runs
// strata_mmvq_rows_x<QT, 1, R, U> (8·R rows a block, kernels/abi's RowsPerBlock), F16/BF16's
// exist where FR ≠ 0 and run rows_f<QT, 1, FR> (8·FR rows a block); no default kernel calls
// a geometry's path.
func TestMmvqGeomsTable(t *testing.T) {
	n := 0
	for _, tg := range kernels.Targets {
		if !tg.IsNVIDIA() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(moduleRoot(), "kernels", "out", tg.Name, "mmvq.cu"))
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		body := func(sym string) string { // the kernel's text, up to the next kernel
			i := strings.Index(src, " "+sym+"(const struct")
			if i < 0 {
				return ""
			}
			j := strings.Index(src[i+1:], "STRATA_KERNEL ")
			if j < 0 {
				return src[i:]
			}
			return src[i : i+1+j]
		}
		co, _ := abi.Find(tg.Name, "mmvq")
		rows := map[string]int{}
		for _, v := range co.Variants {
			rows[v.Name] = v.RowsPerBlock
		}
		for v, qt := range mmvqTypes {
			f := qt == quant.F16 || qt == quant.BF16
			if d := body("strata_mmvq_" + v); d == "" || strings.Contains(d, "late ? 2 : 1") {
				t.Errorf("%s: default kernel strata_mmvq_%s missing or with a geometry's path", tg.Name, v)
			}
			for g, m := range kernels.MmvqGeoms {
				if g == 0 {
					continue
				}
				sym := fmt.Sprintf("strata_mmvq_%s_g%d", v, g)
				pf := ""
				if m.PF || m.W {
					pf = fmt.Sprintf(", %v", m.PF)
				}
				if m.W {
					pf += ", true"
				}
				call, want := fmt.Sprintf("strata_mmvq_rows_x<QT, 1, %d, %d%s>(p, w, &tab, xs, z, late ? 2 : 1);", m.R, m.U, pf), 8*m.R
				if f {
					call, want = fmt.Sprintf("strata_mmvq_rows_f<QT, 1, %d>(p, w, z, late ? 2 : 1);", m.FR), 8*m.FR
				}
				d := body(sym)
				if (d != "") != (want != 0) || rows[fmt.Sprintf("%s_g%d", v, g)] != want {
					t.Errorf("%s: %s present %v, %d rows a block in kernels/abi; MmvqGeoms[%d] wants %d", tg.Name, sym, d != "", rows[fmt.Sprintf("%s_g%d", v, g)], g, want)
				} else if d != "" && !strings.Contains(d, call) {
					t.Errorf("%s: %s does not call %q", tg.Name, sym, call)
				}
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no NVIDIA target")
	}
}

// TestMmvqStdGeom: every kernel mmvqStdGeom names for issue 5's 4096×14336 row, and every
// geometry mmvqExpertGeom names for its expert shapes, exists as a decode-geometry variant of
// a quantized type on every NVIDIA target (kernels/abi).
func TestMmvqStdGeom(t *testing.T) {
	n := 0
	for _, tg := range kernels.Targets {
		if !tg.IsNVIDIA() {
			continue
		}
		co, ok := abi.Find(tg.Name, "mmvq")
		if !ok {
			t.Fatalf("%s: no mmvq code object", tg.Name)
		}
		have := map[string]bool{}
		for _, v := range co.Variants {
			have[v.Name] = true
		}
		for v, g := range mmvqStdGeom {
			qt, ok := mmvqTypes[v]
			if !ok || qt == quant.F16 || qt == quant.BF16 || g < 1 || g >= len(kernels.MmvqGeoms) || !have[fmt.Sprintf("%s_g%d", v, g)] {
				t.Errorf("%s: mmvqStdGeom[%q] = %d is no quantized decode-geometry variant", tg.Name, v, g)
			}
		}
		for v, gs := range mmvqExpertGeom {
			qt, ok := mmvqTypes[v]
			for _, g := range gs {
				if !ok || g != 0 && (qt == quant.F16 || qt == quant.BF16 || g >= len(kernels.MmvqGeoms) || !have[fmt.Sprintf("%s_g%d", v, g)]) {
					t.Errorf("%s: mmvqExpertGeom[%q] = %d is no quantized decode-geometry variant", tg.Name, v, g)
				}
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no NVIDIA target")
	}
}
