package model

import (
	"fmt"
	"runtime/debug"
)

// MTPTrace receives the MTP layer's values for the cells of one MTPForward call:
// FinalHidden [T·H] (the MTP mixer output), Selected [T] (the MTP indexer's key positions
// per cell), Experts [T][k].
type MTPTrace struct {
	FinalHidden []float32
	Selected    [][]int
	Experts     [][]int
}

// PreMixer returns the pre-mixer 4-stream stacks [T][HC·H] of the tokens of the last
// ForwardQ4 call (the MTP head's input), or nil for other architectures.
func (s *State) PreMixer() []float32 {
	if s.q4 == nil {
		return nil
	}
	return s.q4.preMixer
}

// MTPPos is the number of MTP cells processed so far.
func (s *State) MTPPos() int {
	if s.q4 == nil {
		return 0
	}
	return s.q4.mtpPos
}

// MTPForward runs MTP cells t = MTPPos(), ... (spec §9): cell t pairs a 4-stream stack R_t
// (the main model's pre-mixer stack at position t, or for later draft steps the MTP layer's
// own pre-mixer output) with the next token x_{t+1}, runs at rope position t, and predicts
// x_{t+2}. R holds len(next) stacks. It returns the logits (all cells, or the last only)
// and the MTP layer's pre-mixer output stacks.
func (s *State) MTPForward(R []float32, next []int32, all bool, tr *MTPTrace) (logits, stacks []float32, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.faultGuard(&err)
	m := s.m
	if m.q4 == nil || m.q4.mtp == nil {
		return nil, nil, fmt.Errorf("model: %s has no MTP head", m.src.Path())
	}
	c, q := &m.Cfg, &m.q4.cfg
	T, H := len(next), c.Embd
	HH := q.HC * H
	if T == 0 || len(R) != T*HH {
		return nil, nil, fmt.Errorf("model: MTPForward: %d stacks of %d values for %d tokens", len(R)/max(HH, 1), HH, T)
	}
	if s.q4.mtpPos+T > s.MaxCtx {
		return nil, nil, fmt.Errorf("model: MTP cells past the context of %d", s.MaxCtx)
	}
	mt := m.q4.mtp
	x := make([]float32, T*q.HC*2*H)
	en := make([]float32, H)
	hn := make([]float32, HH)
	for t, id := range next {
		if id < 0 || int(id) >= m.Vocab {
			return nil, nil, fmt.Errorf("model: token id %d is outside the vocabulary of %d", id, m.Vocab)
		}
		m.tokEmbd.Row(en, int(id))
		rmsNorm(en, en, mt.enorm, c.Eps)
		rmsNorm(hn, R[t*HH:(t+1)*HH], mt.hnorm, c.Eps) // one RMS over all HC·H values
		for ch := 0; ch < q.HC; ch++ {
			row := x[(t*q.HC+ch)*2*H:]
			copy(row[:H], en)
			copy(row[H:2*H], hn[ch*H:(ch+1)*H])
		}
	}
	// eh_proj · [e | h_c] = fc_embedding·e + fc_hidden·h_c: one product per stream.
	Rm := make([]float32, T*HH)
	matmul(Rm, mt.ehProj, 0, H, x, T*q.HC)
	var lt *q4LayerTrace
	if tr != nil {
		lt = &q4LayerTrace{}
	}
	s.q4Decoder(&mt.layer, -1, &s.q4.mtp, Rm, T, s.q4.mtpPos, lt)
	h := make([]float32, T*H)
	s.q4HCRead(&mt.mixer, Rm, T, h, nil)
	if tr != nil {
		tr.FinalHidden, tr.Selected, tr.Experts = append([]float32(nil), h...), lt.selected, lt.experts
	}
	s.q4.mtpPos += T
	V := m.Vocab
	if all {
		logits = make([]float32, T*V)
		matmul(logits, m.output, 0, V, h, T)
	} else {
		logits = make([]float32, V)
		matmul(logits, m.output, 0, V, h[(T-1)*H:], 1)
	}
	return logits, Rm, nil
}

// q4Snap is a copy of a qwen4exp sequence's recurrent state; the KV and indexer caches are
// append-only, so restoring the position truncates them on the next call.
type q4Snap struct {
	pos, mtpPos int
	conv, ssm   [][]float32
	pleHist     []float32
	pleToks     []int32
	preMixer    []float32
}

func (s *State) q4Save() *q4Snap {
	cp := func(v [][]float32) [][]float32 {
		out := make([][]float32, len(v))
		for i, x := range v {
			out[i] = append([]float32(nil), x...)
		}
		return out
	}
	st := s.q4
	return &q4Snap{pos: s.pos, mtpPos: st.mtpPos, conv: cp(st.conv), ssm: cp(st.ssm),
		pleHist: append([]float32(nil), st.pleHist...), pleToks: append([]int32(nil), st.pleToks...), preMixer: st.preMixer}
}

func (s *State) q4Restore(sn *q4Snap) {
	st := s.q4
	s.pos, st.mtpPos = sn.pos, sn.mtpPos
	for i := range st.conv {
		copy(st.conv[i], sn.conv[i])
		copy(st.ssm[i], sn.ssm[i])
	}
	copy(st.pleHist, sn.pleHist)
	st.pleToks = append(st.pleToks[:0], sn.pleToks...)
	st.preMixer = sn.preMixer
}

// RewindMTP forgets MTP cells from position n on (draft cells that ran on the MTP layer's
// own stacks instead of the main model's).
func (s *State) RewindMTP(n int) {
	if s.q4 != nil && n < s.q4.mtpPos {
		s.q4.mtpPos = n
	}
}
