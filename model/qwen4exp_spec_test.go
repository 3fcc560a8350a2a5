package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/model/tinygen"
)

// tinyQwen4Exp loads the tiny qwen4exp model (rebuilt from its oracle's tensor list) and
// returns it with the oracle's prompts and greedy continuations.
func tinyQwen4Exp(t *testing.T) (*model.Model, [][2][]int32) {
	t.Helper()
	if q4Tiny.m != nil {
		return q4Tiny.m, q4Tiny.prompts
	}
	src := tinySourceQwen4Exp(t)
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Prompts []struct {
			IDs    []int32 `json:"ids"`
			Greedy []int32 `json:"greedy_ids"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(q4Tiny.oracle, &o); err != nil {
		t.Fatal(err)
	}
	var ps [][2][]int32
	for _, p := range o.Prompts {
		ps = append(ps, [2][]int32{p.IDs, p.Greedy})
	}
	q4Tiny.m, q4Tiny.prompts = m, ps
	return m, ps
}

// tinySourceQwen4Exp converts the tiny qwen4exp checkpoint (rebuilt from its oracle's
// tensor list) in memory, once per test binary.
func tinySourceQwen4Exp(t *testing.T) model.Source {
	t.Helper()
	if q4Tiny.src != nil {
		return q4Tiny.src
	}
	od := filepath.Join("testdata", "tiny-qwen4exp")
	raw, err := os.ReadFile(filepath.Join(od, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tinygen.WriteHF(od, dir); err != nil {
		t.Fatal(err)
	}
	p, err := convert.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	src, err := p.Source()
	if err != nil {
		t.Fatal(err)
	}
	q4Tiny.src, q4Tiny.oracle = src, raw
	return src
}

// q4Tiny caches the loaded tiny model for the tests of this binary (its weights are in
// memory; nothing refers to the temporary directory after loading).
var q4Tiny struct {
	src     model.Source
	oracle  []byte
	m       *model.Model
	prompts [][2][]int32
}

// TestQwen4ExpDraftGreedyIdentical: greedy decoding with MTP drafts of 2 tokens must give
// exactly the oracle's greedy continuation (the output of plain greedy decoding).
func TestQwen4ExpDraftGreedyIdentical(t *testing.T) {
	m, prompts := tinyQwen4Exp(t)
	mtpArgmax := []int32{68093, 30823, 82307} // oracle: argmax of the MTP cell after the prompt, fed greedy_ids[0]
	for _, n := range []int{2} {              // TestQwen4ExpVerifyAcceptsAndRejects covers 3
		var total model.SpecStats
		for pi, pr := range prompts {
			st, err := m.NewState(len(pr[0]) + len(pr[1]) + 8)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := st.NewSpeculator(pr[0], n, model.NewSampler(model.SamplerConfig{Temp: 0, RepeatPenalty: 1}), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for len(got) < len(pr[1]) {
				toks, err := sp.Next()
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 && sp.LastDrafts[0] != mtpArgmax[pi] {
					t.Errorf("prompt %d: first MTP draft %d, the oracle's MTP argmax is %d", pi, sp.LastDrafts[0], mtpArgmax[pi])
				}
				got = append(got, toks...)
			}
			got = got[:len(pr[1])]
			if string(fmtIDs(got)) != string(fmtIDs(pr[1])) {
				t.Errorf("draft %d: got %v, want %v", n, got, pr[1])
			}
			total.Steps += sp.Stats.Steps
			total.Drafted += sp.Stats.Drafted
			total.Accepted += sp.Stats.Accepted
		}
		t.Logf("draft %d: %d steps, %d drafted, %d accepted (%.0f%%)", n, total.Steps, total.Drafted, total.Accepted, 100*total.AcceptRate())
	}
}

func fmtIDs(v []int32) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestQwen4ExpVerifyAcceptsAndRejects drives the verification with known drafts: the
// oracle's own continuation (every draft accepted, one pass per n+1 tokens) and the same
// with every third draft wrong (partial acceptance, rollback). Both must reproduce the
// greedy continuation, and the acceptance counts must be what the drafts imply.
func TestQwen4ExpVerifyAcceptsAndRejects(t *testing.T) {
	m, prompts := tinyQwen4Exp(t)
	const n = 3
	for _, corrupt := range []bool{false, true} {
		for pi, pr := range prompts {
			want := pr[1]
			st, err := m.NewState(len(pr[0]) + len(want) + 8)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := st.NewSpeculator(pr[0], n, model.NewSampler(model.SamplerConfig{Temp: 0, RepeatPenalty: 1}), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			wrong := 0
			for len(got) < len(want) {
				// got[len(got)] will be the main model's own pick; drafts guess the rest.
				var drafts []int32
				for k := len(got) + 1; k < len(want) && len(drafts) < n; k++ {
					d := want[k]
					if corrupt && k%3 == 0 {
						d = (d + 1) % int32(m.Vocab)
						wrong++
					}
					drafts = append(drafts, d)
				}
				toks, err := sp.NextWithDrafts(drafts)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, toks...)
			}
			if string(fmtIDs(got[:len(want)])) != string(fmtIDs(want)) {
				t.Errorf("prompt %d corrupt=%v: got %v, want %v", pi, corrupt, got[:len(want)], want)
			}
			s := sp.Stats
			if !corrupt && s.Accepted != s.Drafted {
				t.Errorf("prompt %d: correct drafts: %d of %d accepted", pi, s.Accepted, s.Drafted)
			}
			if corrupt && (s.Accepted == 0 || s.Accepted == s.Drafted) {
				t.Errorf("prompt %d: corrupted drafts: %d of %d accepted; want a partial acceptance", pi, s.Accepted, s.Drafted)
			}
			t.Logf("prompt %d corrupt=%v: %d steps, %d drafted, %d accepted", pi, corrupt, s.Steps, s.Drafted, s.Accepted)
		}
	}
}
