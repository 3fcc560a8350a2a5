package synth

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tokenizer"
	"github.com/strata-hip/strata/quant"
)

// TestTinyLoadsAndRoutesZipf writes the tiny shape in several expert types, loads it in
// the CPU engine, runs 240 random tokens and checks that the experts the router picks
// follow the popularity it was built for: Spearman rank correlation of pick counts with
// p_e, pooled over layers, of at least 0.8 (an unskewed router gives about 0).
func TestTinyLoadsAndRoutesZipf(t *testing.T) {
	for _, c := range []struct {
		preset string
		typ    quant.Type
	}{{"tiny", quant.Q8_0}, {"tiny", quant.Q4_K}, {"tiny", quant.IQ2_XS}, {"tiny-next", quant.Q4_K}} {
		s, typ := Presets[c.preset], c.typ
		t.Run(c.preset+"/"+typ.String(), func(t *testing.T) {
			o := Options{ExpertType: typ, Seed: 42}
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := Write(path, s, o); err != nil {
				t.Fatal(err)
			}
			src, err := model.OpenGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			m, err := model.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			if m.MatrixType() != strings.ToUpper(typ.String()) {
				t.Fatalf("experts stored as %s, want %s", m.MatrixType(), typ)
			}
			tok, err := tokenizer.FromGGUF(src.F)
			if err != nil {
				t.Fatal(err)
			}
			if ids := tok.Encode("hi there", false); len(ids) != 8 {
				t.Fatalf("byte-level tokenizer: %q is %d tokens, want 8", "hi there", len(ids))
			}
			st, err := m.NewState(256)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			ids := make([]int32, 240)
			for i := range ids {
				ids[i] = int32(rng.IntN(s.Vocab))
			}
			var tr model.Trace
			logits, err := st.Forward(ids, false, &tr)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("non-finite logit")
				}
			}
			var rho float64
			for l := 0; l < s.Layers; l++ {
				counts := make([]float64, s.Experts)
				for _, picks := range tr.Experts[l] {
					for _, e := range picks {
						counts[e]++
					}
				}
				r := spearman(counts, Popularity(s, o, l))
				t.Logf("layer %d: pick counts %v, rank correlation with Zipf %.2f", l, counts, r)
				rho += r / float64(s.Layers)
			}
			if rho < 0.8 {
				t.Errorf("mean rank correlation of picks with the Zipf popularity %.2f < 0.8", rho)
			}
		})
	}
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			r[idx[k]] = float64(i+j-1) / 2
		}
		i = j
	}
	return r
}

func spearman(a, b []float64) float64 {
	ra, rb := ranks(a), ranks(b)
	var ma, mb float64
	for i := range ra {
		ma += ra[i]
		mb += rb[i]
	}
	ma /= float64(len(ra))
	mb /= float64(len(rb))
	var sab, saa, sbb float64
	for i := range ra {
		sab += (ra[i] - ma) * (rb[i] - mb)
		saa += (ra[i] - ma) * (ra[i] - ma)
		sbb += (rb[i] - mb) * (rb[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

func TestBadShapes(t *testing.T) {
	s := Presets["tiny"]
	for _, c := range []struct {
		mod  func(*Shape, *Options)
		want string
	}{
		{func(s *Shape, o *Options) { s.Arch = "llama" }, `architecture "llama" is not supported`},
		{func(s *Shape, o *Options) { s.HeadsKV = 3 }, "not a multiple of heads-kv"},
		{func(s *Shape, o *Options) { s.Vocab = 100 }, "vocab 100 is below"},
		{func(s *Shape, o *Options) { s.ExpertFF = 96 }, "cannot hold rows of 96"},
		{func(s *Shape, o *Options) { o.DenseType = quant.Q4_K }, "the embedding must be q8_0, f16 or bf16"},
		{func(s *Shape, o *Options) { o.ExpertType = quant.Q8_1 }, "not a weight type"},
	} {
		s2, o := s, Options{ExpertType: quant.Q4_K}
		c.mod(&s2, &o)
		_, err := Build(s2, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestTinyHeadRowsDistinct: the tiny shape's output head has no two equal rows (equal rows
// give exactly tied logits, which made a GPU-vs-CPU greedy comparison ambiguous).
func TestTinyHeadRowsDistinct(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := Write(path, Presets["tiny"], Options{ExpertType: quant.IQ2_XS, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, ok := src.Tensor("output.weight")
	if !ok {
		t.Fatal("no output.weight")
	}
	seen := map[string]int{}
	for r := 0; r < out.Rows(); r++ {
		row := string(out.Data[r*out.RowBytes : (r+1)*out.RowBytes])
		if prev, dup := seen[row]; dup {
			t.Fatalf("output rows %d and %d are equal", prev, r)
		}
		seen[row] = r
	}
}
