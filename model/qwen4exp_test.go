package model_test

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-hip/strata/model"
)

// TestQwen4ExpChunkedPrefill: feeding a prompt in chunks of 5, 6 and the rest (so PLE
// history, DeltaNet conv and recurrent states, cached indexer keys and pooled blocks all
// cross call boundaries, and the sparse selection is active from position 11) gives the
// logits of one full prefill. Both paths do the same float operations per token except
// the matrix-product path (fused dots for ≤ 3 tokens), so they agree to float32 rounding:
// bound 1e-4 absolute on logits of magnitude ≤ 6.
func TestQwen4ExpChunkedPrefill(t *testing.T) {
	m, prompts := tinyQwen4Exp(t)
	ids := append(append([]int32(nil), prompts[0][0]...), prompts[0][1]...)
	V := m.Vocab
	full, _ := m.NewState(len(ids))
	want, err := full.Forward(ids, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	inc, _ := m.NewState(len(ids))
	var worst float64
	for _, r := range [][2]int{{0, 5}, {5, 11}, {11, 13}, {13, len(ids)}} {
		got, err := inc.Forward(ids[r[0]:r[1]], true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			worst = math.Max(worst, math.Abs(float64(v-want[r[0]*V+i])))
		}
	}
	if worst > 1e-4 {
		t.Fatalf("chunked prefill differs from full prefill by %.2e (bound 1e-4)", worst)
	}
	t.Logf("max |diff| %.2e over %d positions", worst, len(ids))
}

// countingSource serves a model with its PLE table wrapped to count the rows decoded.
type countingSource struct {
	model.Source
	table *model.Tensor
}

func (c countingSource) Tensor(name string) (*model.Tensor, bool) {
	if name == "per_layer_token_embd.weight" {
		return c.table, true
	}
	return c.Source.Tensor(name)
}

// TestQwen4ExpPLEReadsOnlyAddressedRows: a forward pass over T tokens decodes exactly
// T × (hash heads) rows of the n-gram table (loading decodes none), never the table.
func TestQwen4ExpPLEReadsOnlyAddressedRows(t *testing.T) {
	src := tinySourceQwen4Exp(t)
	orig, ok := src.Tensor("per_layer_token_embd.weight")
	if !ok {
		t.Fatal("no per_layer_token_embd.weight")
	}
	var rows atomic.Int64
	tab := *orig
	tab.Decode = func(dst []float32, b []byte) { rows.Add(1); orig.Decode(dst, b) }
	tab.Dot = nil
	m, err := model.Load(countingSource{src, &tab})
	if err != nil {
		t.Fatal(err)
	}
	if n := rows.Load(); n != 0 {
		t.Fatalf("loading decoded %d table rows, want 0", n)
	}
	st, _ := m.NewState(32)
	ids := []int32{785, 3974, 13876, 38835, 34208, 916, 279}
	if _, err := st.Forward(ids, false, nil); err != nil {
		t.Fatal(err)
	}
	const heads = 4 // (ngram_size − 1) · heads_per_ngram of the tiny model
	if n := rows.Load(); n != int64(len(ids)*heads) {
		t.Fatalf("a %d-token forward decoded %d table rows of %d, want %d", len(ids), n, orig.Rows(), len(ids)*heads)
	}
}

// q4MetaSource serves a model with edited metadata.
type q4MetaSource struct {
	model.Source
	meta model.MapMeta
}

func (s q4MetaSource) Meta() model.Meta { return s.meta }

// TestQwen4ExpBadMetadata: malformed qwen4exp metadata fails Load with an error naming the
// key, never a panic or a silently wrong model.
func TestQwen4ExpBadMetadata(t *testing.T) {
	src := tinySourceQwen4Exp(t)
	base, ok := src.Meta().(model.MapMeta)
	if !ok {
		t.Fatalf("in-memory source metadata is %T", src.Meta())
	}
	for _, tc := range []struct {
		name, want string
		edit       func(model.MapMeta)
	}{
		{"missing hc count", "qwen4exp.hyper_connection.count", func(m model.MapMeta) { delete(m, "qwen4exp.hyper_connection.count") }},
		{"short compress ratios", "compress_ratios has 2 entries", func(m model.MapMeta) { m["qwen4exp.attention.compress_ratios"] = []uint32{0, 4} }},
		{"multipliers length", "ple.layer_multipliers has 2 entries", func(m model.MapMeta) { m["qwen4exp.ple.layer_multipliers"] = []uint64{3, 5} }},
		{"table too small", "PLE hash head 3 addresses rows up to", func(m model.MapMeta) {
			m["qwen4exp.ple.head_vocab_sizes"] = []uint64{1009, 1013, 1019, 9000}
		}},
		{"gate type", "output_gate_type", func(m model.MapMeta) { m["qwen4exp.ssm.output_gate_type"] = "tanh" }},
		{"two MTP blocks", "nextn_predict_layers", func(m model.MapMeta) { m["qwen4exp.nextn_predict_layers"] = uint32(2) }},
		{"top-k not a multiple", "indexer.top_k", func(m model.MapMeta) { m["qwen4exp.attention.indexer.top_k"] = uint32(6) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model.MapMeta{}
			for k, v := range base {
				m[k] = v
			}
			tc.edit(m)
			_, err := model.Load(q4MetaSource{src, m})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
