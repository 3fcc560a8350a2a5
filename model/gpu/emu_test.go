package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"unsafe"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// emu gives the fake driver memory and kernels: every launch runs a plain Go rendering
// of the kernel family's documented contract (kernels/specs.go) on the fake device's
// memory, and checks its launch grid against that contract. With it the engine's whole
// composition — which buffer goes where, strides, slot tables, the copies — runs on the
// CPU and can be compared with the CPU engine. It proves the composition, not the
// kernels (the parity suite does that on a GPU).
type emu struct {
	allocs map[uintptr][]byte // device address → memory
	starts []uintptr
	err    error // first contract violation

	// exact: Q8_1 buffers read back the f32 values they were quantized from (the
	// composition without the activation rounding; diagnostics only).
	exact bool
	q81x  map[uint64][]float32
	// keep: record the f32 values behind every Q8_1 buffer; then mmvq launches on a weight
	// in exactW, and moe_decode launches when exactMoE, read them instead (diagnostics).
	keep     bool
	exactW   map[uint64]bool
	exactMoE bool
	// noise: multiply the residual of the add-norm number noiseAt of each token (counted
	// from the token's first norm, w0 its weight) by 1 + √noise·g, g standard normal:
	// a relative perturbation of NMSE noise (diagnostics).
	noise   float64
	noiseAt int
	w0      uint64
	addIdx  int
	rng     *rand.Rand
	cancel  *[]float64 // per head and delta-net launch: the cancellation of o = Sᵀq
	// resid, when non-nil, receives every residual an add-norm writes (diagnostics).
	resid *[][]float32
	// host, when set, resolves addresses of mapped host memory; hostBytes counts the bytes
	// read or written through it.
	host      func(p uint64, n int) []byte
	hostBytes int64
	// fetched counts the experts expert_fetch copied (the mapped look-ahead), landed those
	// it copied into a landing slot (land.go); fetchWrong makes it take id+1 (mod E) for
	// every predicted id: every prediction wrong.
	fetched, landed int
	fetchWrong      bool
	// parts, when set (watch), are the planned allocations of an engine's resident region
	// at the bytes each Need asked for: moe_prefill's workspaces must each lie inside the
	// one their address falls in, at the size the kernel's contract gives them (within).
	parts []emuPart
}

// emuPart is one planned allocation: [lo, hi) and its name.
type emuPart struct {
	lo, hi uint64
	name   string
}

// watch makes the emulator check kernel workspaces against eng's memory plan (within).
func (m *emu) watch(eng *Engine) {
	m.parts = m.parts[:0]
	for _, r := range eng.plan.Resident {
		lo := uint64(eng.mem.Ptr(r.Name))
		m.parts = append(m.parts, emuPart{lo, lo + r.Bytes, r.Name})
	}
}

// within fails unless [p, p+n) lies inside the planned allocation p falls in (when the
// emulator watches a plan; what names the workspace).
func (m *emu) within(p uint64, n int, what string) {
	for _, r := range m.parts {
		if p >= r.lo && p < r.hi {
			if p+uint64(n) > r.hi {
				m.fail("%s: %d bytes at offset %d of %s, which holds %d", what, n, p-r.lo, r.name, r.hi-r.lo)
			}
			return
		}
	}
}

func newEmu() *emu { return &emu{allocs: map[uintptr][]byte{}} }

func (m *emu) alloc(p rt.DevPtr, n uintptr) {
	m.allocs[uintptr(p)] = make([]byte, n)
	m.starts = append(m.starts, uintptr(p))
	sort.Slice(m.starts, func(i, j int) bool { return m.starts[i] < m.starts[j] })
}

func (m *emu) free(p rt.DevPtr) {
	delete(m.allocs, uintptr(p))
	for i, s := range m.starts {
		if s == uintptr(p) {
			m.starts = append(m.starts[:i], m.starts[i+1:]...)
			break
		}
	}
}

// at returns n bytes of device memory at p; outside every allocation is a contract error.
func (m *emu) at(p uint64, n int) []byte {
	i := sort.Search(len(m.starts), func(i int) bool { return m.starts[i] > uintptr(p) }) - 1
	if i >= 0 {
		b := m.allocs[m.starts[i]]
		off := uintptr(p) - m.starts[i]
		if off+uintptr(n) <= uintptr(len(b)) {
			return b[off : off+uintptr(n)]
		}
	}
	if m.host != nil { // mapped host memory (fakeDriver.mapHost)
		if h := m.host(p, n); h != nil {
			m.hostBytes += int64(n)
			return h
		}
	}
	m.fail("access of %d bytes at %#x outside every allocation", n, p)
	return make([]byte, n)
}

func (m *emu) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf("emu: "+format, args...)
	}
}

func (m *emu) f32(p uint64, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(m.at(p+uint64(4*i), 4)))
}

func (m *emu) setF32(p uint64, i int, v float32) {
	binary.LittleEndian.PutUint32(m.at(p+uint64(4*i), 4), math.Float32bits(v))
}

func (m *emu) f32s(p uint64, n int) []float32 {
	out := make([]float32, n)
	b := m.at(p, 4*n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// q81 decodes n values of Q8_1 blocks at p.
func (m *emu) q81(p uint64, n int) []float32 {
	if x, ok := m.q81x[p]; m.exact && ok && len(x) >= n {
		return append([]float32(nil), x[:n]...)
	}
	b := m.at(p, n/32*36)
	out := make([]float32, n)
	for blk := 0; blk < n/32; blk++ {
		d := quant.F16ToF32(binary.LittleEndian.Uint16(b[36*blk:]))
		for i := 0; i < 32; i++ {
			out[32*blk+i] = d * float32(int8(b[36*blk+4+i]))
		}
	}
	return out
}

func (m *emu) putQ81(p uint64, x []float32) {
	if m.exact || m.keep {
		if m.q81x == nil {
			m.q81x = map[uint64][]float32{}
		}
		m.q81x[p] = append([]float32(nil), x...)
	}
	if err := quant.QuantizeQ8_1GPU(x, m.at(p, (len(x)+31)/32*36)); err != nil {
		m.fail("quantize: %v", err)
	}
}

func args[T any](b []byte) T {
	var v T
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v
}

var variantType = func() map[string]quant.Type {
	m := map[string]quant.Type{}
	for t, v := range typeVariant {
		m[v] = t
	}
	return m
}()

// rowDot is Σ_k W[row][k]·x[k] with W's row of type t at p, in float64.
func (m *emu) rowDot(t quant.Type, p uint64, x []float32) float32 {
	rb, err := t.RowBytes(len(x))
	if err != nil {
		m.fail("%v", err)
		return 0
	}
	w := make([]float32, len(x))
	if err := quant.DecodeRow(t, m.at(p, rb), w); err != nil {
		m.fail("%v", err)
	}
	var s float64
	for i := range w {
		s += float64(w[i]) * float64(x[i])
	}
	return float32(s)
}

func (m *emu) launch(sym string, grid, block rt.Dim3, b []byte) {
	m.checkBlock(sym, block)
	fam, variant, _ := strings.Cut(strings.TrimPrefix(sym, "strata_"), "_")
	for _, f := range []string{"quantize_q8_1", "moe_decode", "attention_decode", "rmsnorm_row", "moe_prefill", "attention_prefill", "expert_fetch"} {
		if strings.HasPrefix(strings.TrimPrefix(sym, "strata_"), f+"_") {
			fam, variant = f, strings.TrimPrefix(sym, "strata_"+f+"_")
		}
	}
	want := func(g rt.Dim3) {
		if g != grid {
			m.fail("%s launched with grid %v, its contract says %v", sym, grid, g)
		}
	}
	ceil := func(a, b int) uint32 { return uint32((a + b - 1) / b) }
	switch fam {
	case "rmsnorm", "rmsnorm_row":
		a := args[abi.RmsnormArgs](b) // rmsnorm_row declares the same fields (parity's TestRMSNormRowArgs)
		if fam == "rmsnorm" {
			want(rt.Dim3{X: ceil(int(a.Rows), 8), Y: 1, Z: 1})
		} else {
			want(rt.Dim3{X: uint32(a.Rows), Y: 1, Z: 1})
		}
		n := int(a.N)
		variant = strings.TrimSuffix(variant, "wave") // rmsnorm_row's baseline Q8_1 step: the same function
		if a.W == m.w0 && variant == "q81" {
			m.addIdx = 0 // a token's first norm
		}
		for i := 0; i < int(a.Rows); i++ {
			off := (i/int(a.Heads))*int(a.TokStride) + (i%int(a.Heads))*int(a.HeadStride)
			x := m.f32s(a.X+uint64(4*off), n)
			if variant == "add" || variant == "addq81" {
				r := m.f32s(a.R+uint64(4*off), n)
				for j := range x {
					x[j] += r[j]
				}
				if m.noise > 0 && m.addIdx == m.noiseAt {
					for j := range x {
						x[j] *= float32(1 + math.Sqrt(m.noise)*m.rng.NormFloat64())
					}
				}
				m.addIdx++
				for j := range x {
					m.setF32(a.Xo, off+j, x[j])
				}
				if m.resid != nil {
					*m.resid = append(*m.resid, append([]float32(nil), x...))
				}
			}
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			inv := float32(1 / math.Sqrt(ss/float64(n)+float64(a.Eps)))
			w := m.f32s(a.W, n)
			y := make([]float32, n)
			for j := range y {
				y[j] = x[j] * inv * w[j]
			}
			if a.Y != 0 {
				for j := range y {
					m.setF32(a.Y, off+j, y[j])
				}
			}
			if variant == "q81" || variant == "addq81" {
				m.putQ81(a.Q+uint64(i*n/32*36), y)
			}
		}
	case "sample":
		// argmax (the engine's greedy token): model/sample.go's choice, in one launch or as
		// argmaxp's per-block bests (index, value bits) and argmaxf's best of them.
		a := args[abi.SampleArgs](b)
		const none = 0x7fffffff
		best := func(lo, hi int) (int, float32) {
			bi, bv := none, float32(math.Inf(-1))
			for i := lo; i < hi; i++ {
				if v := m.f32(a.Logits, i); v > bv {
					bi, bv = i, v
				}
			}
			return bi, bv
		}
		switch variant {
		case "argmax":
			want(rt.Dim3{X: 1, Y: 1, Z: 1})
			bi, _ := best(0, int(a.N))
			if bi == none {
				bi = 0
			}
			binary.LittleEndian.PutUint32(m.at(a.Out, 4), uint32(bi))
		case "argmaxp":
			want(rt.Dim3{X: uint32(a.Parts), Y: 1, Z: 1})
			n, parts := int(a.N), int(a.Parts)
			if parts < 1 || parts > n {
				m.fail("%s: %d parts of %d logits", sym, parts, n)
				return
			}
			l := (n + parts - 1) / parts
			for p := 0; p < parts; p++ {
				bi, bv := best(min(n, p*l), min(n, (p+1)*l))
				binary.LittleEndian.PutUint32(m.at(a.Part+uint64(8*p), 4), uint32(bi))
				binary.LittleEndian.PutUint32(m.at(a.Part+uint64(8*p+4), 4), math.Float32bits(bv))
			}
		case "argmaxf":
			want(rt.Dim3{X: 1, Y: 1, Z: 1})
			bi, bv := none, float32(math.Inf(-1))
			for p := 0; p < int(a.Parts); p++ {
				i := int(int32(binary.LittleEndian.Uint32(m.at(a.Part+uint64(8*p), 4))))
				v := math.Float32frombits(binary.LittleEndian.Uint32(m.at(a.Part+uint64(8*p+4), 4)))
				if v > bv || (v == bv && i < bi) {
					bi, bv = i, v
				}
			}
			if bi == none {
				bi = 0
			}
			binary.LittleEndian.PutUint32(m.at(a.Out, 4), uint32(bi))
		default:
			m.fail("%s: the engine launches sample's argmax variants only", sym)
		}
	case "rope":
		a := args[abi.RopeArgs](b)
		half := int(a.RotDims) / 2
		want(rt.Dim3{X: ceil(int(a.Rows)*half, 256), Y: 1, Z: 1})
		for i := 0; i < int(a.Rows); i++ {
			t := i / int(a.Heads)
			off := t*int(a.TokStride) + (i%int(a.Heads))*int(a.HeadStride)
			pos := float32(int32(binary.LittleEndian.Uint32(m.at(a.Pos+uint64(4*t), 4))))
			for j := 0; j < half; j++ {
				ang := float64(pos * m.f32(a.Freq, j))
				c, s := float32(math.Cos(ang)), float32(math.Sin(ang))
				x0, x1 := m.f32(a.X, off+j), m.f32(a.X, off+j+half)
				m.setF32(a.X, off+j, x0*c-x1*s)
				m.setF32(a.X, off+j+half, x1*c+x0*s)
			}
		}
	case "mmvq":
		a := args[abi.MmvqArgs](b)
		// mmvq is grid-strided: any x ≥ 1 computes every row; ceil(rows/RowsPerBlock) (kernels/abi)
		// covers each row once, with no block that only stages its activations and exits —
		// the grid the engine must launch; a decode-geometry kernel (<type>_g<N>) only with
		// one column, its own RowsPerBlock, and prefetch 2 only with one.
		base, geom, _ := strings.Cut(variant, "_g")
		t := variantType[base]
		rpb := m.rowsPerBlock("mmvq", variant)
		if (geom != "" && a.Ncols != 1) || (a.Prefetch == 2 && geom == "") {
			m.fail("mmvq: %s with %d columns, prefetch %d", variant, a.Ncols, a.Prefetch)
		}
		want(rt.Dim3{X: ceil(int(a.Rows), rpb), Y: 1, Z: grid.Z})
		if a.Slots != 0 || a.Ncols < 1 || a.Ncols > 8 || a.XMatStride%32 != 0 {
			m.fail("mmvq: the emulator covers dense products (1..8 columns of matrix z's x at z·x_mat_stride, a multiple of 32)")
		}
		if a.XColStride%32 != 0 || int(a.XColStride) < int(a.K) || (a.Ncols > 1 && int(a.YColStride) < int(a.Rows)) {
			m.fail("mmvq: column strides %d/%d break the contract (k %d, rows %d)", a.XColStride, a.YColStride, a.K, a.Rows)
		}
		k := int(a.K)
		rb, _ := t.RowBytes(k)
		for z := 0; z < int(grid.Z); z++ {
			w := a.W + uint64(int64(z)*a.WMatBytes)
			for col := 0; col < int(a.Ncols); col++ {
				xo := z*int(a.XMatStride) + col*int(a.XColStride)
				var x []float32
				if t == quant.F16 || t == quant.BF16 {
					x = m.f32s(a.Xf+uint64(4*xo), k)
				} else if xe, ok := m.q81x[a.Xq]; m.exactW[a.W] && ok && xo == 0 {
					x = xe[:k]
				} else {
					x = m.q81(a.Xq+uint64(xo/32*36), k)
				}
				for r := 0; r < int(a.Rows); r++ {
					m.setF32(a.Y, z*int(a.YMatStride)+col*int(a.YColStride)+r, m.rowDot(t, w+uint64(r*rb), x))
				}
			}
		}
	case "quantize_q8_1":
		a := args[abi.QuantizeQ81Args](b)
		want(rt.Dim3{X: ceil(int(a.NcolsPadded), 256), Y: uint32(min(int(a.Nrows), 65535)), Z: 1})
		for r := 0; r < int(a.Nrows); r++ {
			x := make([]float32, a.NcolsPadded)
			copy(x, m.f32s(a.X+uint64(4*r*int(a.XStride)), int(a.Ncols)))
			m.putQ81(a.Y+uint64(r*int(a.NcolsPadded)/32*36), x)
		}
	case "attention_decode":
		a := args[abi.AttentionDecodeArgs](b)
		nh, nkv, hd, n := int(a.Nh), int(a.Nkv), int(a.Hd), int(a.N)
		if variant == "prep_f16" {
			m.attentionPrep(grid, a)
			return
		}
		if strings.HasPrefix(variant, "store") {
			if variant != "store_f16" {
				m.fail("attention_decode: the emulator covers the f16 cache only")
			}
			rows := int(a.KvRows) * nkv * hd
			want(rt.Dim3{X: ceil(rows, 64), Y: 1, Z: 1})
			for _, kv := range [][2]uint64{{a.Kn, a.K}, {a.Vn, a.V}} {
				x := m.f32s(kv[0], rows)
				dst := m.at(kv[1]+uint64(2*int(a.KvPos)*nkv*hd), 2*rows)
				for i, v := range x {
					binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToF16(v))
				}
			}
			return
		}
		// the kernel's contract (split_len > 0, nsplit = ceil(n/split_len)) within the
		// parity bound's limits (≤ 1024 positions per split, ≤ 256 splits)
		if a.SplitLen <= 0 || a.SplitLen > 1024 || int(a.Nsplit) != (n+int(a.SplitLen)-1)/int(a.SplitLen) || a.Nsplit > 256 {
			m.fail("attention_decode: split_len %d, nsplit %d for n %d break the contract", a.SplitLen, a.Nsplit, n)
		}
		if strings.HasPrefix(variant, "split") {
			want(rt.Dim3{X: uint32(nkv), Y: uint32(a.Nsplit), Z: 1})
			m.at(a.Part, 4*nh*int(a.Nsplit)*(hd+2)) // the workspace must exist
			return
		}
		want(rt.Dim3{X: uint32(nh), Y: 1, Z: 1})
		kvd := nkv * hd
		h16 := func(base uint64, j, g, i int) float32 {
			return quant.F16ToF32(binary.LittleEndian.Uint16(m.at(base+uint64(2*(j*kvd+g*hd+i)), 2)))
		}
		for h := 0; h < nh; h++ {
			attendHead(m, m.f32s(a.Q+uint64(4*h*hd), hd), n, h/(nh/nkv), h16, a.K, a.V, a.Scale, a.Gate, a.Out, h*hd)
		}
		if variant == "reduceq_f16" { // out also as Q8_1 blocks
			m.putQ81(a.Oq, m.f32s(a.Out, nh*hd))
		} else if variant != "reduce_f16" {
			m.fail("attention_decode: the emulator has no variant %s", variant)
		}
	case "moe_decode":
		a := args[abi.MoeDecodeArgs](b)
		t := variantType[variant]
		E, K, H, F := int(a.NExpert), int(a.KUsed), int(a.NEmbd), int(a.NFf)
		slot := func(tab uint64, e int) uint64 { return binary.LittleEndian.Uint64(m.at(tab+uint64(8*e), 8)) }
		id := func(j int) int { return int(int32(binary.LittleEndian.Uint32(m.at(a.Ids+uint64(4*j), 4)))) }
		errAt := func(j int) bool { return binary.LittleEndian.Uint32(m.at(a.Err+uint64(4*j), 4)) != 0 }
		if a.Phase == 3 { // router + gate/up in one launch (phase 1's grid): phase 0, then 1
			for tk := 0; tk < int(a.Tokens); tk++ {
				o := uint64(4 * tk * K)
				m.topK(a.Logits+uint64(4*tk*E), a.Ids+o, a.Wts+o, a.Err+o, E, K, a.Renorm != 0, func(e int) bool {
					return slot(a.SlotsGate, e) != 0 && slot(a.SlotsUp, e) != 0 && slot(a.SlotsDown, e) != 0
				})
			}
			a.Phase = 1
		}
		switch a.Phase {
		case 0:
			want(rt.Dim3{X: uint32(a.Tokens), Y: 1, Z: 1})
			for tk := 0; tk < int(a.Tokens); tk++ {
				o := uint64(4 * tk * K)
				m.topK(a.Logits+uint64(4*tk*E), a.Ids+o, a.Wts+o, a.Err+o, E, K, a.Renorm != 0, func(e int) bool {
					return slot(a.SlotsGate, e) != 0 && slot(a.SlotsUp, e) != 0 && slot(a.SlotsDown, e) != 0
				})
			}
		case 1:
			want(rt.Dim3{X: uint32(F / 32), Y: uint32(K), Z: uint32(a.Tokens)})
			rb, _ := t.RowBytes(H)
			for tk := 0; tk < int(a.Tokens); tk++ {
				xp := a.X + uint64(tk*H/32*36)
				x := m.q81(xp, H)
				if xe, ok := m.q81x[xp]; m.exactMoE && ok {
					x = xe[:H]
				}
				for j := tk * K; j < (tk+1)*K; j++ {
					hv := make([]float32, F)
					if !errAt(j) {
						g, u := slot(a.SlotsGate, id(j)), slot(a.SlotsUp, id(j))
						for r := 0; r < F; r++ {
							gv := m.rowDot(t, g+uint64(r*rb), x)
							uv := m.rowDot(t, u+uint64(r*rb), x)
							hv[r] = gv / (1 + float32(math.Exp(float64(-gv)))) * uv
						}
					}
					m.putQ81(a.H+uint64(j*F/32*36), hv)
				}
			}
		case 2:
			want(rt.Dim3{X: ceil(H, 8), Y: 1, Z: uint32(a.Tokens)})
			rb, _ := t.RowBytes(F)
			for tk := 0; tk < int(a.Tokens); tk++ {
				y := make([]float32, H)
				for j := tk * K; j < (tk+1)*K; j++ {
					if errAt(j) {
						if slot(a.SlotsGate, id(j)) != 0 {
							m.fail("moe_decode phase 2: expert %d is resident but err is set: phase 0 ran before its slot table", id(j))
						}
						continue
					}
					hv := m.q81(a.H+uint64(j*F/32*36), F)
					if xe, ok := m.q81x[a.H+uint64(j*F/32*36)]; m.exactMoE && ok {
						hv = xe[:F]
					}
					d := slot(a.SlotsDown, id(j))
					wj := m.f32(a.Wts, j)
					for r := 0; r < H; r++ {
						y[r] += wj * m.rowDot(t, d+uint64(r*rb), hv)
					}
				}
				for r := range y {
					m.setF32(a.Y, tk*H+r, y[r])
				}
			}
		}
	case "expert_fetch":
		m.expertFetch(grid, args[abi.ExpertFetchArgs](b))
	case "fill":
		a := args[abi.FillArgs](b)
		want(rt.Dim3{X: max(1, ceil(int(a.N), abi.FillThreads)), Y: 1, Z: 1})
		for i := 0; i < int(a.N); i++ {
			binary.LittleEndian.PutUint32(m.at(a.P+uint64(4*i), 4), a.V)
		}
	case "mmq", "mmq8", "mmq8c", "mmq8cz": // one C struct layout (kernels/specs.go mmqArgs)
		m.mmq(variant, grid, args[abi.MmqArgs](b))
	case "moe_prefill":
		m.moePrefill(variant, grid, args[abi.MoePrefillArgs](b))
	case "attention_prefill":
		m.attentionPrefill(variant, grid, args[abi.AttentionPrefillArgs](b))
	case "gated":
		m.deltaNet(strings.TrimPrefix(sym, "strata_gated_delta_net_"), grid, args[abi.GatedDeltaNetArgs](b))
	default:
		m.fail("no emulation of %s", sym)
	}
}

// familyThreads is the block size each family is compiled for (kernels/specs.go Threads,
// kernels/abi's <Family>Threads): every launch must give exactly it.
var familyThreads = map[string]int{
	"attention_decode": abi.AttentionDecodeThreads, "attention_prefill": abi.AttentionPrefillThreads, "fill": abi.FillThreads, "expert_fetch": abi.ExpertFetchThreads,
	"gated_delta_net": abi.GatedDeltaNetThreads, "mmq": abi.MmqThreads, "mmq8": abi.Mmq8Threads, "mmq8c": abi.Mmq8cThreads,
	"mmq8cz": abi.Mmq8czThreads, "mmvq": abi.MmvqThreads,
	"moe_decode": abi.MoeDecodeThreads, "moe_prefill": abi.MoePrefillThreads, "quantize_q8_1": abi.QuantizeQ81Threads,
	"rmsnorm": abi.RmsnormThreads, "rmsnorm_row": abi.RmsnormRowThreads, "rope": abi.RopeThreads, "sample": abi.SampleThreads,
}

// checkBlock fails a launch of sym (found among fakeTarget's code objects) whose block is not
// its family's (familyThreads) by 1 by 1: a kernel compiled for 256 threads launched with 128
// would leave half its tile unstaged and uncomputed.
func (m *emu) checkBlock(sym string, block rt.Dim3) {
	for _, co := range abi.CodeObjects {
		if co.Target != fakeTarget {
			continue
		}
		for _, v := range co.Variants {
			if v.Symbol != sym {
				continue
			}
			th, ok := familyThreads[co.Family]
			if !ok {
				m.fail("%s: no block size known for family %s (familyThreads)", sym, co.Family)
			} else if block != (rt.Dim3{X: uint32(th), Y: 1, Z: 1}) {
				m.fail("%s launched with block %v, its family %s is compiled for (%d, 1, 1)", sym, block, co.Family, th)
			}
			return
		}
	}
	m.fail("%s: no such kernel among %s's code objects", sym, fakeTarget)
}

// rowsPerBlock is the rows one block of family's variant covers, as kernels/abi declares it
// for the emulated target (fakeTarget); a variant without the declaration is a failure.
func (m *emu) rowsPerBlock(family, variant string) int {
	co, _ := abi.Find(fakeTarget, family)
	for _, v := range co.Variants {
		if v.Name == variant && v.RowsPerBlock > 0 {
			return v.RowsPerBlock
		}
	}
	m.fail("%s/%s: kernels/abi declares no rows per block for %s", family, variant, fakeTarget)
	return 1
}

// topK is moe_decode phase 0 for one token: softmax over the E logits at lp, the K largest
// (ties to the lower id) into ids, their probabilities (renormalised over the K when renorm)
// into wts, and err 1 where resident(id) is false.
func (m *emu) topK(lp, ids, wts, errs uint64, E, K int, renorm bool, resident func(int) bool) {
	l := m.f32s(lp, E)
	mx := float32(math.Inf(-1))
	for _, v := range l {
		mx = max(mx, v)
	}
	var sum float32
	for _, v := range l {
		sum += float32(math.Exp(float64(v - mx)))
	}
	taken := map[int]bool{}
	var sel float32
	w := make([]float32, K)
	for j := 0; j < K; j++ {
		best := -1
		for e := 0; e < E; e++ {
			if !taken[e] && (best < 0 || l[e] > l[best]) {
				best = e
			}
		}
		taken[best] = true
		w[j] = float32(math.Exp(float64(l[best]-mx))) / sum
		sel += w[j]
		binary.LittleEndian.PutUint32(m.at(ids+uint64(4*j), 4), uint32(best))
		binary.LittleEndian.PutUint32(m.at(errs+uint64(4*j), 4), map[bool]uint32{true: 0, false: 1}[resident(best)])
	}
	for j := range w {
		if renorm {
			w[j] /= sel
		}
		m.setF32(wts, j, w[j])
	}
}

// tile is the BM and BN of a prefill variant's name (…_r<BM>t<BN>).
func tile(variant string) (bm, bn int) {
	i := strings.LastIndex(variant, "_r")
	fmt.Sscanf(variant[i+2:], "%dt%d", &bm, &bn)
	return bm, bn
}

// mmq: y[t·ldy + r] = Σ_k W[r][k]·x[t][k], x the Q8_1 rows (parity/mmq.go's reference: the
// exact integer group sums times the two scales; rendered here in float64).
func (m *emu) mmq(variant string, grid rt.Dim3, a abi.MmqArgs) {
	bm, bn := tile(variant)
	t := variantType[variant[:strings.Index(variant, "_")]]
	if g := (rt.Dim3{X: uint32((int(a.Rows) + bm - 1) / bm), Y: uint32((int(a.Tokens) + bn - 1) / bn), Z: 1}); g != grid {
		m.fail("mmq launched with grid %v, its contract says %v", grid, g)
	}
	if a.HookGroup != -1 || int(a.XRowBlocks) < int(a.K)/32 || a.Ldy < a.Rows {
		m.fail("mmq: hook %d, x_row_blocks %d, ldy %d break the contract", a.HookGroup, a.XRowBlocks, a.Ldy)
	}
	k := int(a.K)
	rb, _ := t.RowBytes(k)
	for tk := 0; tk < int(a.Tokens); tk++ {
		x := m.q81(a.X+uint64(tk*int(a.XRowBlocks)*36), k)
		for r := 0; r < int(a.Rows); r++ {
			m.setF32(a.Y, tk*int(a.Ldy)+r, m.rowDot(t, a.W+uint64(r*rb), x))
		}
	}
}

// moePrefill renders moe_prefill's four phases (parity/moe_prefill.go: mpRouteRef, mpHRef,
// mpYRef, mpOutRef): 0 the schedule and pair lists, 1 h = SiLU(gate·x)·(up·x) requantised to
// Q8_1 per pair, 2 the down projection per pair, 3 out[t] += Σ_s wts[t][s]·yp[t·k+s].
func (m *emu) moePrefill(variant string, grid rt.Dim3, a abi.MoePrefillArgs) {
	bm, bn := tile(variant)
	t := variantType[variant[:strings.Index(variant, "_")]]
	T, K, E, H, F := int(a.Tokens), int(a.KUsed), int(a.NExpert), int(a.Hidden), int(a.NFf)
	np := T * K
	mt := (np+bn-1)/bn + E
	if E < 1 || E > 1024 || int(a.XRowBlocks) < H/32 || int(a.Ldo) < H {
		m.fail("moe_prefill: n_expert %d, x_row_blocks %d, ldo %d break the contract", E, a.XRowBlocks, a.Ldo)
	}
	id := func(p int) int { return int(int32(binary.LittleEndian.Uint32(m.at(a.Ids+uint64(4*p), 4)))) }
	// mat is expert e's matrix j (0 gate, 1 up, 2 down): at its slot table entry when tabs
	// is set (a null entry breaks the contract: the engine must have placed every expert
	// the chunk uses), else at its dense stack's base + e·stride.
	mat := func(j, e int) uint64 {
		if a.Tabs != 0 {
			w := binary.LittleEndian.Uint64(m.at(a.Tabs+uint64(8*(j*E+e)), 8))
			if w == 0 {
				m.fail("moe_prefill: expert %d's slot table entry %d is null", e, j)
			}
			return w
		}
		switch j {
		case 0:
			return a.Wg + uint64(int64(e)*a.GuMatBytes)
		case 1:
			return a.Wu + uint64(int64(e)*a.GuMatBytes)
		}
		return a.Wd + uint64(int64(e)*a.DMatBytes)
	}
	want := func(g rt.Dim3) {
		if g != grid {
			m.fail("moe_prefill phase %d launched with grid %v, its contract says %v", a.Phase, grid, g)
		}
	}
	// the workspaces at their contract's sizes for this launch: the schedule holds max_tiles
	// at the variant's BN (phase 0 writes it, phases 1 and 2 walk it)
	m.within(a.Sched, 4*(2*E+1+2*mt), fmt.Sprintf("moe_prefill phase %d schedule (r%dt%d, max_tiles %d)", a.Phase, bm, bn, mt))
	m.within(a.List, 4*np, "moe_prefill pair list")
	m.within(a.Hq, np*F/32*36, "moe_prefill hq")
	m.within(a.Yp, 4*np*H, "moe_prefill yp")
	switch a.Phase {
	case 0:
		want(rt.Dim3{X: uint32(E), Y: 1, Z: 1}) // one block per expert
		ids := make([]int32, np)
		seen := map[[2]int]bool{}
		for p := range ids {
			ids[p] = int32(id(p))
			if ids[p] < 0 || int(ids[p]) >= E || seen[[2]int{p / K, int(ids[p])}] {
				m.fail("moe_prefill: pair %d has expert %d: outside [0, %d) or repeated in its token", p, ids[p], E)
				return
			}
			seen[[2]int{p / K, int(ids[p])}] = true
		}
		sched := make([]int32, 2*E+1+2*mt)
		for _, e := range ids {
			sched[e]++
		}
		var off int32
		nt := 0
		for e := 0; e < E; e++ {
			sched[E+e] = off
			for t0 := int32(0); t0 < sched[e]; t0 += int32(bn) {
				sched[2*E+1+2*nt], sched[2*E+2+2*nt] = int32(e), t0
				nt++
			}
			off += sched[e]
		}
		sched[2*E] = int32(nt)
		pos := append([]int32(nil), sched[E:2*E]...)
		list := make([]int32, np)
		for p, e := range ids {
			list[pos[e]] = int32(p)
			pos[e]++
		}
		for i, v := range sched {
			binary.LittleEndian.PutUint32(m.at(a.Sched+uint64(4*i), 4), uint32(v))
		}
		for i, v := range list {
			binary.LittleEndian.PutUint32(m.at(a.List+uint64(4*i), 4), uint32(v))
		}
	case 1:
		want(rt.Dim3{X: uint32((F + bm/2 - 1) / (bm / 2)), Y: uint32(mt), Z: 1})
		rb, _ := t.RowBytes(H)
		for p := 0; p < np; p++ {
			x := m.q81(a.X+uint64((p/K)*int(a.XRowBlocks)*36), H)
			g, u := mat(0, id(p)), mat(1, id(p))
			hv := make([]float32, F)
			for r := 0; r < F; r++ {
				gv := m.rowDot(t, g+uint64(r*rb), x)
				uv := m.rowDot(t, u+uint64(r*rb), x)
				hv[r] = gv / (1 + float32(math.Exp(float64(-gv)))) * uv
			}
			m.putQ81(a.Hq+uint64(p*F/32*36), hv)
		}
	case 2:
		want(rt.Dim3{X: uint32((H + bm - 1) / bm), Y: uint32(mt), Z: 1})
		rb, _ := t.RowBytes(F)
		for p := 0; p < np; p++ {
			hv := m.q81(a.Hq+uint64(p*F/32*36), F)
			d := mat(2, id(p))
			for r := 0; r < H; r++ {
				m.setF32(a.Yp, p*H+r, m.rowDot(t, d+uint64(r*rb), hv))
			}
		}
	case 3:
		want(rt.Dim3{X: uint32((H + 127) / 128), Y: uint32(min(T, 65535)), Z: 1})
		for tk := 0; tk < T; tk++ {
			for c := 0; c < H; c++ {
				v := m.f32(a.Out, tk*int(a.Ldo)+c)
				for s := 0; s < K; s++ {
					v += m.f32(a.Wts, tk*K+s) * m.f32(a.Yp, (tk*K+s)*H+c)
				}
				m.setF32(a.Out, tk*int(a.Ldo)+c, v)
			}
		}
	default:
		m.fail("moe_prefill: phase %d", a.Phase)
	}
}

// attentionPrep renders attention_decode/prep_f16: each q and k head normed as rmsnorm's
// f32 rendering does it and rotated as rope's, in place for q; k and v stored into the f16
// cache at the position pos[0] holds.
func (m *emu) attentionPrep(grid rt.Dim3, a abi.AttentionDecodeArgs) {
	nh, nkv, hd, half := int(a.Nh), int(a.Nkv), int(a.Hd), int(a.RotDims)/2
	if grid != (rt.Dim3{X: uint32((nh + 2*nkv + 3) / 4), Y: 1, Z: 1}) {
		m.fail("attention_decode/prep_f16 launched with grid %v for %d + 2·%d heads", grid, nh, nkv)
	}
	if hd%32 != 0 || hd > 256 || half > hd/2 || half < 0 {
		m.fail("attention_decode/prep_f16: hd %d, rot_dims %d break the contract", hd, a.RotDims)
	}
	pos := int(int32(binary.LittleEndian.Uint32(m.at(a.Pos, 4))))
	norm := func(x []float32, w uint64) {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(hd)+float64(a.Eps)))
		wt := m.f32s(w, hd)
		for j := range x {
			x[j] = x[j] * inv * wt[j]
		}
		for j := 0; j < half; j++ {
			ang := float64(float32(pos) * m.f32(a.Freq, j))
			c, s := float32(math.Cos(ang)), float32(math.Sin(ang))
			x0, x1 := x[j], x[j+half]
			x[j], x[j+half] = x0*c-x1*s, x1*c+x0*s
		}
	}
	for h := 0; h < nh; h++ {
		x := m.f32s(a.Q+uint64(4*h*hd), hd)
		norm(x, a.Qw)
		for j, v := range x {
			m.setF32(a.Q, h*hd+j, v)
		}
	}
	store := func(cache uint64, x []float32, h int) {
		dst := m.at(cache+uint64(2*(pos*nkv*hd+h*hd)), 2*hd)
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToF16(v))
		}
	}
	for h := 0; h < nkv; h++ {
		k := m.f32s(a.Kn+uint64(4*h*hd), hd)
		norm(k, a.Kw)
		store(a.K, k, h)
		store(a.V, m.f32s(a.Vn+uint64(4*h*hd), hd), h)
	}
}

// attendHead renders one query head q against cache positions 0..n−1 of kv head g (h16 reads
// element i of position j from the K or V cache at base) in float64: scaled dot products,
// softmax, the weighted V sum, times sigmoid(gate) where gate ≠ 0; the head's hd outputs go
// to out from element off (the gate is read at the same elements).
func attendHead(m *emu, q []float32, n, g int, h16 func(base uint64, j, g, i int) float32, k, v uint64, scale float32, gate, out uint64, off int) {
	sc := make([]float64, n)
	mx := math.Inf(-1)
	for j := 0; j < n; j++ {
		var d float64
		for i := range q {
			d += float64(q[i]) * float64(h16(k, j, g, i))
		}
		sc[j] = d * float64(scale)
		mx = math.Max(mx, sc[j])
	}
	var sum float64
	for j := range sc {
		sc[j] = math.Exp(sc[j] - mx)
		sum += sc[j]
	}
	for i := range q {
		var acc float64
		for j := 0; j < n; j++ {
			acc += sc[j] / sum * float64(h16(v, j, g, i))
		}
		o := float32(acc)
		if gate != 0 {
			o *= float32(1 / (1 + math.Exp(-float64(m.f32(gate, off+i)))))
		}
		m.setF32(out, off+i, o)
	}
}

// attentionPrefill renders attention_prefill (f16 cache; f16, f16mma, f16mma256 (hd 256
// only) and f16old, each with its launch grid): query i of t
// attends causally to positions 0..n−t+i with the decode emulation's float64 softmax.
func (m *emu) attentionPrefill(variant string, grid rt.Dim3, a abi.AttentionPrefillArgs) {
	T, n, nh, nkv, hd := int(a.T), int(a.N), int(a.Nh), int(a.Nkv), int(a.Hd)
	hdOK := variant == "f16" || variant == "f16old" || variant == "f16mma" || variant == "f16mma256" && hd == 256
	if !hdOK || T < 1 || T > n || nh%nkv != 0 {
		m.fail("attention_prefill: variant %s, t %d, n %d, heads %d/%d, hd %d break the contract (or the emulator: f16 caches only)", variant, T, n, nh, nkv, hd)
		return
	}
	g := rt.Dim3{X: uint32((T*(nh/nkv) + 15) / 16), Y: uint32(nkv), Z: 1}
	switch variant {
	case "f16old":
		g = rt.Dim3{X: uint32((T + 7) / 8), Y: uint32(nh), Z: 1}
	case "f16mma":
		g = rt.Dim3{X: uint32((T*(nh/nkv) + 63) / 64), Y: uint32(nkv), Z: 1}
	case "f16mma256":
		g = rt.Dim3{X: uint32((T*(nh/nkv) + 31) / 32), Y: uint32(nkv), Z: 1}
	}
	if g != grid {
		m.fail("attention_prefill launched with grid %v, its contract says %v", grid, g)
	}
	kvd := nkv * hd
	h16 := func(base uint64, j, g, i int) float32 {
		return quant.F16ToF32(binary.LittleEndian.Uint16(m.at(base+uint64(2*(j*kvd+g*hd+i)), 2)))
	}
	for tk := 0; tk < T; tk++ {
		np := n - T + tk + 1
		for h := 0; h < nh; h++ {
			attendHead(m, m.f32s(a.Q+uint64(4*(tk*nh+h)*hd), hd), np, h/(nh/nkv), h16, a.K, a.V, a.Scale, a.Gate, a.Out, (tk*nh+h)*hd)
		}
	}
}

// deltaNet emulates gated_delta_net for t tokens, as model/forward.go computes it token by
// token: the conv over the t rows of x (each window reaching back into conv_in), the
// recurrence over the t rows of xc in order, S carried from token to token.
func (m *emu) deltaNet(stage string, grid rt.Dim3, a abi.GatedDeltaNetArgs) {
	C, nk, nv, dk, dv, T := int(a.C), int(a.Nk), int(a.Nv), int(a.Dk), int(a.Dv), int(a.T)
	if T < 1 {
		m.fail("gated_delta_net: t %d", T)
		return
	}
	sig := func(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }
	if stage == "conv" {
		if want := (rt.Dim3{X: uint32((C + 511) / 512), Y: uint32(min(T, 65535)), Z: 1}); grid != want {
			m.fail("gated_delta_net conv launched with grid %v, want %v", grid, want)
		}
		x := m.f32s(a.X, T*C)
		w := m.f32s(a.ConvW, 4*C)
		st := m.f32s(a.ConvIn, 3*C)
		in := func(t, ch int) float32 { // input t of this call, −3..T−1
			if t >= 0 {
				return x[t*C+ch]
			}
			return st[(3+t)*C+ch]
		}
		for tk := 0; tk < T; tk++ {
			for ch := 0; ch < C; ch++ {
				var sum float32
				for j := 0; j < 4; j++ {
					sum += w[ch*4+j] * in(tk+j-3, ch)
				}
				m.setF32(a.Xc, tk*C+ch, sum*sig(sum))
			}
		}
		for ch := 0; ch < C; ch++ {
			for r := 0; r < 3; r++ {
				m.setF32(a.ConvOut, r*C+ch, in(T-3+r, ch))
			}
		}
		return
	}
	switch stage {
	case "recsplit": // the recurrence, o written before the norm (gnorm follows)
		if want := (rt.Dim3{X: uint32(nv), Y: uint32((dv + 31) / 32), Z: 1}); grid != want {
			m.fail("gated_delta_net recsplit launched with grid %v, want %v", grid, want)
		}
		for tk := 0; tk < T; tk++ {
			m.deltaStep(a, tk, C, nk, nv, dk, dv, sig, true)
		}
		return
	case "gnorm": // the gated norm of every (token, head) row of o, in place
		if want := (rt.Dim3{X: uint32((T*nv + 3) / 4), Y: 1, Z: 1}); grid != want {
			m.fail("gated_delta_net gnorm launched with grid %v, want %v", grid, want)
		}
		nw := m.f32s(a.NormW, dv)
		for row := 0; row < T*nv; row++ {
			out := m.f32s(a.O+uint64(4*row*dv), dv)
			z := m.f32s(a.Z+uint64(4*row*dv), dv)
			m.gatedNorm(a, row*dv, out, z, nw, sig)
		}
		return
	case "recurrent", "recurrentq":
	default:
		m.fail("gated_delta_net: stage %q not emulated", stage)
		return
	}
	if want := (rt.Dim3{X: uint32(nv), Y: 1, Z: 1}); grid != want {
		m.fail("gated_delta_net %s launched with grid %v, want %v", stage, grid, want)
	}
	for tk := 0; tk < T; tk++ {
		m.deltaStep(a, tk, C, nk, nv, dk, dv, sig, false)
	}
	if stage == "recurrentq" { // o also as Q8_1 blocks
		if dv%32 != 0 {
			m.fail("gated_delta_net recurrentq with dv %d", dv)
		}
		m.putQ81(a.Oq, m.f32s(a.O, T*nv*dv))
	}
}

// gatedNorm writes out·inv·w·silu(z) (inv = 1/√(mean out² + eps)) to o from element at.
func (m *emu) gatedNorm(a abi.GatedDeltaNetArgs, at int, out, z, nw []float32, sig func(float32) float32) {
	var ss float64
	for _, x := range out {
		ss += float64(x) * float64(x)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(out))+float64(a.Eps)))
	for j := range out {
		zz := z[j]
		m.setF32(a.O, at+j, out[j]*inv*nw[j]*(zz*sig(zz)))
	}
}

// deltaStep is the recurrence for token tk of a gated_delta_net call (rows tk of xc, z, ba
// and o; S read from and written back to state); raw (recsplit) writes o before the norm.
func (m *emu) deltaStep(a abi.GatedDeltaNetArgs, tk, C, nk, nv, dk, dv int, sig func(float32) float32, raw bool) {
	kd := nk * dk
	cv := m.f32s(a.Xc+uint64(4*tk*C), C)
	for h := 0; h < 2*nk; h++ {
		v := cv[h*dk : (h+1)*dk]
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		inv := float32(1 / math.Sqrt(ss+1e-6))
		if h < nk {
			inv *= float32(1 / math.Sqrt(float64(dk)))
		}
		for i := range v {
			v[i] *= inv
		}
	}
	r := nv / nk
	ba := m.f32s(a.Ba+uint64(4*tk*2*nv), 2*nv)
	ssmA, dt, nw := m.f32s(a.SsmA, nv), m.f32s(a.DtBias, nv), m.f32s(a.NormW, dv)
	z := m.f32s(a.Z+uint64(4*tk*nv*dv), nv*dv)
	for h := 0; h < nv; h++ {
		kh, grp, idx := h/r, h/r, h%r
		b, av := ba[grp*2*r+idx], ba[grp*2*r+r+idx]
		sp := av + dt[h]
		if sp <= 20 {
			sp = float32(math.Log1p(math.Exp(float64(sp))))
		}
		decay := float32(math.Exp(float64(ssmA[h] * sp)))
		beta := sig(b)
		S := m.f32s(a.State+uint64(4*h*dk*dv), dk*dv)
		q, k, v := cv[kh*dk:(kh+1)*dk], cv[kd+kh*dk:kd+(kh+1)*dk], cv[2*kd+h*dv:2*kd+(h+1)*dv]
		mem := make([]float32, dv)
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				S[i*dv+j] *= decay
				mem[j] += S[i*dv+j] * k[i]
			}
		}
		for j := range mem {
			mem[j] = (v[j] - mem[j]) * beta
		}
		out := make([]float32, dv)
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				S[i*dv+j] += k[i] * mem[j]
				out[j] += S[i*dv+j] * q[i]
			}
		}
		for i, x := range S {
			m.setF32(a.State, h*dk*dv+i, x)
		}
		if m.cancel != nil { // ‖Σᵢ|Sᵢⱼqᵢ|‖ / ‖o‖: how much o = Sᵀq cancels (diagnostics)
			var num, den float64
			for j := 0; j < dv; j++ {
				var a float64
				for i := 0; i < dk; i++ {
					a += math.Abs(float64(S[i*dv+j] * q[i]))
				}
				num += a * a
				den += float64(out[j]) * float64(out[j])
			}
			*m.cancel = append(*m.cancel, math.Sqrt(num/den))
		}
		if raw {
			for j, x := range out {
				m.setF32(a.O, tk*nv*dv+h*dv+j, x)
			}
			continue
		}
		m.gatedNorm(a, tk*nv*dv+h*dv, out, z[h*dv:(h+1)*dv], nw, sig)
	}
}

// expertFetch is expert_fetch (kernels/templates/expert_fetch.tmpl): each predicted id
// whose three table entries lie in its own host block is copied — the r-th such id into
// landing slot land[r] when r < n_land and land[r] ≠ 0, else into its stage buffer — and the
// working tables are the source tables with those entries moved to the copy. With fetchWrong
// every predicted id is first replaced by id+1 (mod E) in the ids buffer itself (a bijection,
// so the ids stay distinct, and the engine reads back the predictions that were copied).
func (m *emu) expertFetch(grid rt.Dim3, a abi.ExpertFetchArgs) {
	E, K := int(a.NExpert), int(a.KUsed)
	if grid != (rt.Dim3{X: uint32(a.Nb), Y: uint32(K + 1), Z: 1}) || int(a.Nb)*abi.ExpertFetchThreads < 3*E {
		m.fail("expert_fetch launched with grid %v for %d experts, nb %d", grid, E, a.Nb)
	}
	if a.Total%16 != 0 || a.Stage%16 != 0 || a.Host%16 != 0 {
		m.fail("expert_fetch: unaligned stage %#x, host %#x or block of %d bytes", a.Stage, a.Host, a.Total)
	}
	src := func(j int) uint64 { return binary.LittleEndian.Uint64(m.at(a.Src+uint64(8*j), 8)) }
	dst := make([]uint64, 3*E)
	for j := range dst {
		dst[j] = src(j)
	}
	r := 0 // staged ids so far
	for k := 0; k < K; k++ {
		id := int(int32(binary.LittleEndian.Uint32(m.at(a.Ids+uint64(4*k), 4))))
		if id < 0 || id >= E {
			continue
		}
		if m.fetchWrong {
			id = (id + 1) % E
			binary.LittleEndian.PutUint32(m.at(a.Ids+uint64(4*k), 4), uint32(id))
		}
		base := a.Host + uint64(id)*a.Total
		staged := true
		for t := 0; t < 3; t++ {
			staged = staged && src(t*E+id)-base < a.Total
		}
		if !staged {
			continue
		}
		to := a.Stage + uint64(k)*a.Total
		if r < int(a.NLand) {
			if l := binary.LittleEndian.Uint64(m.at(a.Land+uint64(8*r), 8)); l != 0 {
				if l%16 != 0 {
					m.fail("expert_fetch: unaligned landing slot %#x", l)
				}
				to = l
				m.landed++
			}
		}
		r++
		copy(m.at(to, int(a.Total)), m.at(base, int(a.Total)))
		m.fetched++
		for t := 0; t < 3; t++ {
			dst[t*E+id] = to + (src(t*E+id) - base)
		}
	}
	for j, v := range dst {
		binary.LittleEndian.PutUint64(m.at(a.Dst+uint64(8*j), 8), v)
	}
}
