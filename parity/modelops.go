package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/strata-hip/strata/runtime/gpu"
)

// Helpers shared by the model-op families (rmsnorm, rope, embed, sample, attention_decode,
// gated_delta_net): f32 buffers and a harness run of several launches in order.

// seqLaunch is one kernel launch of a sequence.
type seqLaunch struct {
	fn          *gpu.Func
	grid, block gpu.Dim3
	args        []byte
}

// runSeq is Harness.Run for a sequence of launches (a split and its reduce; a prefill
// followed by decode steps carrying state): every buffer is refilled, the launches run in
// order on the default stream under each poison, and the payloads of outs from the second
// run come back after checking both runs wrote the same bytes. The time is the whole
// sequence's, from events around it.
func (h *Harness) runSeq(ls []seqLaunch, outs ...Buf) ([][]byte, time.Duration, error) {
	return h.runLaunches(ls, 120*time.Second, outs...)
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	if len(b)%4 != 0 {
		panic(fmt.Sprintf("parity: %d bytes is not f32 data", len(b)))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func moF64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// moInputs uploads each byte slice as a read-only input, in order.
func (h *Harness) moInputs(data ...[]byte) ([]Buf, error) {
	out := make([]Buf, len(data))
	for i, d := range data {
		b, err := h.Input(d)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// moBlock is a one-dimensional block of n threads.
func moBlock(n int) gpu.Dim3 { return gpu.Dim3{X: uint32(n), Y: 1, Z: 1} }

// sigmoid64, silu64 and softplus64 are the float64 forms of model/forward.go's gates.
func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64    { return x * sigmoid64(x) }
func softplus64(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// payload returns b's bytes from what Run or runSeq returned for outs (b must be one of
// outs).
func (h *Harness) payload(outs []Buf, got [][]byte, b Buf) []byte {
	for i, o := range outs {
		if o.g == b.g {
			return got[i]
		}
	}
	panic("parity: buffer not among the outputs")
}

func moF64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}
