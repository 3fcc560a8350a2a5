package parity

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Bound is one declared check of a kernel variant's output against its reference.
// Exact checks compare bit for bit; float checks bound the worst row and the NMSE.
// NaN or Inf in an output never passes.
type Bound struct {
	Name      string  // what is compared, e.g. "bytes", "dequant", "c"
	Exact     bool    // every element must equal the reference exactly
	MaxRowRel float64 // max over rows of max|got−ref| / (the row's scale)
	NMSE      float64 // ‖got−ref‖² / ‖ref‖² over the whole output; 0 = not checked
	Why       string  // the derivation: where the bound's number comes from
}

func (b Bound) String() string {
	if b.Exact {
		return "exact"
	}
	s := fmt.Sprintf("max_row_rel ≤ %.3g", b.MaxRowRel)
	if b.NMSE > 0 {
		s += fmt.Sprintf(", nmse ≤ %.3g", b.NMSE)
	}
	return s
}

// Report is the outcome of one comparison.
type Report struct {
	N         int     // elements compared
	Mismatch  int     // exact: elements that differ
	NonFinite int     // NaN/Inf outputs
	MaxRowRel float64 // worst row's relative error
	NMSE      float64
	Worst     string // the worst element: index, got, want
}

// Verify returns nil when r satisfies b, else an error with the worst element.
func (b Bound) Verify(r Report) error {
	switch {
	case r.N == 0:
		return fmt.Errorf("%s: nothing compared", b.Name)
	case r.NonFinite > 0:
		return fmt.Errorf("%s: %d NaN/Inf outputs; first: %s", b.Name, r.NonFinite, r.Worst)
	case b.Exact && r.Mismatch > 0:
		return fmt.Errorf("%s: %d of %d elements differ (bound: exact); first: %s", b.Name, r.Mismatch, r.N, r.Worst)
	case !b.Exact && !(r.MaxRowRel <= b.MaxRowRel):
		return fmt.Errorf("%s: max row relative error %.4g > %.4g; worst: %s", b.Name, r.MaxRowRel, b.MaxRowRel, r.Worst)
	case !b.Exact && b.NMSE > 0 && !(r.NMSE <= b.NMSE):
		return fmt.Errorf("%s: NMSE %.4g > %.4g; worst: %s", b.Name, r.NMSE, b.NMSE, r.Worst)
	}
	return nil
}

// CompareExact compares element by element; got and want must have equal length.
func CompareExact[T comparable](got, want []T) Report {
	r := Report{N: len(want)}
	if len(got) != len(want) {
		r.Mismatch = max(len(got), len(want))
		r.Worst = fmt.Sprintf("length %d, want %d", len(got), len(want))
		return r
	}
	for i := range want {
		if got[i] != want[i] {
			if r.Mismatch == 0 {
				r.Worst = fmt.Sprintf("[%d] got %v want %v", i, got[i], want[i])
			}
			r.Mismatch++
		}
	}
	return r
}

// CompareRows compares float outputs row by row: rows of rowLen elements, each row's
// error measured against scale(row) (e.g. the row's largest |ref|). A zero scale
// makes any nonzero error infinite.
func CompareRows(got, want []float64, rowLen int, scale func(row int) float64) Report {
	r := Report{N: len(want)}
	if len(got) != len(want) || rowLen <= 0 || len(want)%rowLen != 0 {
		r.NonFinite = 1
		r.Worst = fmt.Sprintf("shape: got %d, want %d elements in rows of %d", len(got), len(want), rowLen)
		return r
	}
	var num, den float64
	for row := 0; row < len(want)/rowLen; row++ {
		s := scale(row)
		for i := row * rowLen; i < (row+1)*rowLen; i++ {
			g, w := got[i], want[i]
			if math.IsNaN(g) || math.IsInf(g, 0) {
				if r.NonFinite == 0 {
					r.Worst = fmt.Sprintf("[%d] (row %d) got %v want %v", i, row, g, w)
				}
				r.NonFinite++
				continue
			}
			e := math.Abs(g - w)
			num += e * e
			den += w * w
			rel := e / s
			if e == 0 {
				rel = 0
			}
			if rel > r.MaxRowRel {
				r.MaxRowRel = rel
				if r.NonFinite == 0 {
					r.Worst = fmt.Sprintf("[%d] (row %d) got %.9g want %.9g, |err| %.3g, row scale %.3g", i, row, g, w, e, s)
				}
			}
		}
	}
	if den > 0 {
		r.NMSE = num / den
	} else if num > 0 {
		r.NMSE = math.Inf(1)
	}
	return r
}

// renderLedger writes every family's bounds, sorted, with their derivations.
func renderLedger(fams []*Family) string {
	var b strings.Builder
	b.WriteString("# Parity bounds, rendered from parity/<family>.go by TestBoundsLedger; do not edit.\n")
	b.WriteString("# Regenerate: go test ./parity -run TestBoundsLedger -write\n")
	b.WriteString("# family/variant/check: bound\n#     derivation\n")
	var keys []string
	lines := map[string]string{}
	for _, f := range fams {
		for v, bs := range f.Bounds {
			for _, bd := range bs {
				k := f.Name + "/" + v + "/" + bd.Name
				keys = append(keys, k)
				lines[k] = fmt.Sprintf("%s: %s\n%s", k, bd, indent(bd.Why))
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("\n")
		b.WriteString(lines[k])
	}
	return b.String()
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString("    " + strings.TrimSpace(l) + "\n")
	}
	return b.String()
}
