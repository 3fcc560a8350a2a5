package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestBenchModelOps measures the model-op kernels (STRATA_BENCH=1; a measurement, not a
// unit test: it asserts nothing about time; correctness is TestParity's). On one stream:
//
//   - the device-to-device copy bandwidth (1 GiB, bytes read + written), the ceiling;
//   - attention_decode split + reduce at 4K, 32K and 128K positions, f16 and int8 KV,
//     Qwen3-Next's shape (16 q heads, 2 kv heads, hd 256, gate) and Qwen3-30B-A3B's (32, 4,
//     128): GB/s of KV read (each byte of the cache once) against the copy bandwidth;
//   - attention_prefill (f16 and int8 KV, the kernel and the old one; NVIDIA: f16mma, and
//     f16mma256 at hd 256) at t = n = 512 and 4096,
//     and 512 tokens after 4096 (30B's shape: 512 after 3584);
//   - gated_delta_net at Qwen3-Next-80B's shape (nk 16, nv 32, dk = dv = 128): the conv and
//     the recurrent step for decode (t = 1) and prefill (t = 4096, 32768), and the chunked form
//     (chunk + scan) at the same lengths, per token;
//   - rmsnorm with the residual add and the Q8_1 quantization fused (rmsnorm/addq81, y not
//     written) against the two launches it replaces (rmsnorm/add then quantize_q8_1/f32);
//   - rmsnorm_row, every mode, at the decode engine's arguments (one row, in place: xo = x,
//     y written): one launch between two events, and a sequence of 32 launches per event
//     pair (the figure per launch, without the events' own cost); the rows stay in L2, as
//     in the engine, where the kernel before wrote x; median of 60 after 5 warm-up ones.
//   - the greedy token (argmax) over 151936 and 32000 logits: sample/argmax (one block)
//     against argmaxp + argmaxf, one pair and sequences of 32 as for rmsnorm_row.
//
// STRATA_BENCH_OPS=attention,attention_small,prefill,deltanet,rmsnorm,rmsnorm_row,argmax picks
// sections (default all); attention_small: attention_decode split (and split + reduce) at the
// engine's split lengths, the policy before 2026-11-30 and now, f16, one launch and 32-launch
// sequences as for rmsnorm_row.
//
// Each figure is the median over 30 launches (sequences) after 5 warm-up ones, an event
// between consecutive ones; a 1 GiB copy queued first keeps the GPU busy while the host
// queues them. Inputs are valid values (no NaN); they are not checked here.
// STRATA_BENCH_OUT=DIR also writes DIR/modelops.txt.
func TestBenchModelOps(t *testing.T) {
	if os.Getenv("STRATA_BENCH") != "1" {
		t.Skip("set STRATA_BENCH=1 to measure (GPU machine)")
	}
	dir, have := codeObjects(t)
	dev, target := openDevice(t, have)
	mods := map[string]*gpu.Module{}
	fn := func(family, symbol string) *gpu.Func {
		m, ok := mods[family]
		if !ok {
			co, ok := abi.Find(target, family)
			if !ok {
				t.Fatalf("no %s code object for %s", family, target)
			}
			image, err := os.ReadFile(filepath.Join(dir, co.Path))
			benchMust(t, err)
			m, err = dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: image})
			benchMust(t, err)
			mods[family] = m
			t.Cleanup(func() { _ = m.Unload() })
		}
		f, err := m.Func(symbol)
		benchMust(t, err)
		return f
	}
	s, err := dev.NewStream()
	benchMust(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 10))
	var bufs []*gpu.Buffer
	defer func() {
		for _, b := range bufs {
			_ = b.Free()
		}
	}()
	// alloc returns a device buffer of n bytes filled with pattern (tiled).
	alloc := func(n int, pattern []byte) gpu.DevPtr {
		b, err := dev.Alloc(uintptr(n))
		benchMust(t, err)
		bufs = append(bufs, b)
		for off := 0; off < n; off += len(pattern) {
			benchMust(t, dev.Upload(b.Ptr.Add(uintptr(off)), pattern[:min(len(pattern), n-off)]))
		}
		return b.Ptr
	}
	f32Pattern := func(sd float64) []byte {
		v := make([]float32, 4<<20)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * sd)
		}
		return f32Bytes(v)
	}
	f16Pattern := make([]byte, 16<<20)
	for i := 0; i < len(f16Pattern); i += 2 {
		binary.LittleEndian.PutUint16(f16Pattern[i:], quant.F32ToF16(float32(rng.NormFloat64())))
	}
	i8Pattern := make([]byte, 16<<20)
	for i := range i8Pattern {
		i8Pattern[i] = byte(rng.Uint32())
	}
	scalePattern := make([]byte, 1<<20)
	for i := 0; i < len(scalePattern); i += 2 {
		binary.LittleEndian.PutUint16(scalePattern[i:], quant.F32ToF16(float32(0.01+0.02*rng.Float64())))
	}
	gaussian := f32Pattern(1)

	const poolBytes = 1 << 30
	pool := alloc(poolBytes, i8Pattern)
	pool2 := alloc(poolBytes, i8Pattern[:1<<20])
	// timeIt runs f (one launch sequence) 5 + 30 times and returns the median seconds.
	timeIt := func(f func() error) float64 {
		const warm, n = 5, 30
		benchMust(t, s.Copy(pool2, pool, poolBytes))
		for i := 0; i < warm; i++ {
			benchMust(t, f())
		}
		return median(eventTimes(t, dev, s, n, 300*time.Second, func(int) error { return f() }))
	}
	// timeN: the median over 60 event pairs (after 5 warm-up calls) of k calls of f, per call.
	const seq = 32
	timeN := func(f func() error, k int) float64 {
		const warm, n = 5, 60
		benchMust(t, s.Copy(pool2, pool, poolBytes))
		for i := 0; i < warm; i++ {
			benchMust(t, f())
		}
		return median(eventTimes(t, dev, s, n, 300*time.Second, func(int) error {
			for j := 0; j < k; j++ {
				if err := f(); err != nil {
					return err
				}
			}
			return nil
		})) / float64(k)
	}
	var blog benchLog
	logf := blog.printf
	ops := os.Getenv("STRATA_BENCH_OPS")
	want := func(sec string) bool { return ops == "" || slices.Contains(strings.Split(ops, ","), sec) }
	d2d := 2 * float64(poolBytes) / timeIt(func() error { return s.Copy(pool2, pool, poolBytes) }) / 1e9
	logf("model ops on %s (%s)", dev.Info().Name, target)
	logf("d2d copy 1 GiB: %.1f GB/s (bytes read + written)", d2d)

	if want("attention") {
		// attention_decode.
		logf("\n%-10s %-30s %10s %9s %7s", "attention", "shape", "median µs", "KV GB/s", "of d2d")
		for _, sh := range []struct{ nh, nkv, hd, gate int }{{16, 2, 256, 1}, {32, 4, 128, 0}} {
			for _, n := range []int{4096, 32768, 131072} {
				for _, kv := range []string{"f16", "q8", "f16old", "q8old"} {
					vals := n * sh.nkv * sh.hd
					var k, v, ks, vs gpu.DevPtr
					kvBytes := 2 * 2 * vals
					if kv == "f16" {
						k, v = alloc(2*vals, f16Pattern), alloc(2*vals, f16Pattern)
					} else {
						k, v = alloc(vals, i8Pattern), alloc(vals, i8Pattern)
						ks, vs = alloc(2*vals/32, scalePattern), alloc(2*vals/32, scalePattern)
						kvBytes = 2 * (vals + 2*vals/32)
					}
					sl := attentionSplitLen(n)
					ns := (n + sl - 1) / sl
					a := abi.AttentionDecodeArgs{Q: uint64(alloc(4*sh.nh*sh.hd, gaussian)), K: uint64(k), V: uint64(v), Ks: uint64(ks), Vs: uint64(vs),
						Part: uint64(alloc(4*sh.nh*ns*(sh.hd+2), gaussian)), Out: uint64(alloc(4*sh.nh*sh.hd, gaussian)),
						N: int32(n), Nh: int32(sh.nh), Nkv: int32(sh.nkv), Hd: int32(sh.hd), SplitLen: int32(sl), Nsplit: int32(ns),
						Scale: float32(1 / math.Sqrt(float64(sh.hd)))}
					if sh.gate == 1 {
						a.Gate = uint64(alloc(4*sh.nh*sh.hd, gaussian))
					}
					split := fn("attention_decode", "strata_attention_decode_split_"+kv)
					reduce := fn("attention_decode", "strata_attention_decode_reduce_"+kv)
					ab := a.Bytes()
					blk := gpu.Dim3{X: abi.AttentionDecodeThreads, Y: 1, Z: 1}
					sec := timeIt(func() error {
						if err := split.Launch(s, gpu.Dim3{X: uint32(sh.nkv * attentionHeadChunks(sh.nh/sh.nkv)), Y: uint32(ns), Z: 1}, blk, 0, ab); err != nil {
							return err
						}
						return reduce.Launch(s, gpu.Dim3{X: uint32(sh.nh), Y: 1, Z: 1}, blk, 0, ab)
					})
					gbs := float64(kvBytes) / sec / 1e9
					logf("%-10s %-30s %10.2f %9.1f %6.0f%%", kv, fmt.Sprintf("n=%d,nh=%d,nkv=%d,hd=%d", n, sh.nh, sh.nkv, sh.hd), sec*1e6, gbs, 100*gbs/d2d)
				}
			}
		}

	}
	// attention_decode split (+ reduce) at the decode engine's split lengths, f16 KV, grid x =
	// nkv (G ≤ 8): "old" is model/gpu's policy before 2026-11-30-attn-decode (⌈√(n/6)⌉
	// rounded up to 8, at least 8), "new" that directory's (⌈√(n/64)⌉, ⌈√(n/32)⌉ at hd 256,
	// at least 1), which model/gpu splitLen now takes for n ≤ 256 at hd ≤ 128 only; both at
	// least n/256.
	if want("attention_small") {
		logf("\n%-10s %-36s %10s %14s %14s %12s", "attn small", "shape", "split 1 µs", fmt.Sprintf("split µs of %d", seq),
			fmt.Sprintf("+reduce of %d", seq), "+reduce 1 µs")
		for _, sh := range []struct{ nh, nkv, hd, gate int }{{32, 4, 128, 0}, {16, 2, 256, 1}} {
			for _, n := range []int{14, 100, 263, 1000, 4096} {
				for _, pol := range []string{"old", "new"} {
					sl := (int(math.Ceil(math.Sqrt(float64(n)/6))) + 7) / 8 * 8
					sl = max(sl, 8)
					if pol == "new" {
						sl = int(math.Ceil(math.Sqrt(float64(n) / float64(64*128/max(sh.hd, 128)))))
					}
					sl = min(max(sl, 1, (n+255)/256), 1024)
					ns := (n + sl - 1) / sl
					vals := n * sh.nkv * sh.hd
					a := abi.AttentionDecodeArgs{Q: uint64(alloc(4*sh.nh*sh.hd, gaussian)), K: uint64(alloc(2*vals, f16Pattern)), V: uint64(alloc(2*vals, f16Pattern)),
						Part: uint64(alloc(4*sh.nh*ns*(sh.hd+2), gaussian)), Out: uint64(alloc(4*sh.nh*sh.hd, gaussian)),
						N: int32(n), Nh: int32(sh.nh), Nkv: int32(sh.nkv), Hd: int32(sh.hd), SplitLen: int32(sl), Nsplit: int32(ns),
						Scale: float32(1 / math.Sqrt(float64(sh.hd)))}
					if sh.gate == 1 {
						a.Gate = uint64(alloc(4*sh.nh*sh.hd, gaussian))
					}
					split, reduce := fn("attention_decode", "strata_attention_decode_split_f16"), fn("attention_decode", "strata_attention_decode_reduce_f16")
					ab := a.Bytes()
					blk := gpu.Dim3{X: abi.AttentionDecodeThreads, Y: 1, Z: 1}
					sp := func() error {
						return split.Launch(s, gpu.Dim3{X: uint32(sh.nkv * attentionHeadChunks(sh.nh/sh.nkv)), Y: uint32(ns), Z: 1}, blk, 0, ab)
					}
					both := func() error {
						if err := sp(); err != nil {
							return err
						}
						return reduce.Launch(s, gpu.Dim3{X: uint32(sh.nh), Y: 1, Z: 1}, blk, 0, ab)
					}
					t1, tn, tb, tb1 := timeN(sp, 1), timeN(sp, seq), timeN(both, seq), timeN(both, 1)
					logf("%-10s %-36s %10.2f %14.2f %14.2f %12.2f", "f16 "+pol, fmt.Sprintf("n=%d,nh=%d,nkv=%d,hd=%d,split=%d(%d)", n, sh.nh, sh.nkv, sh.hd, sl, ns),
						t1*1e6, tn*1e6, tb*1e6, tb1*1e6)
				}
			}
		}
	}

	if want("prefill") {
		// attention_prefill: causal, from an empty cache (t = n) and continuing after 4096.
		logf("\n%-10s %-30s %10s %9s", "prefill", "shape", "median µs", "GFLOP/s")
		for _, sh := range []struct{ t, n, nh, nkv, hd int }{{512, 512, 16, 2, 256}, {4096, 4096, 16, 2, 256}, {512, 4608, 16, 2, 256}, {512, 512, 32, 4, 128}, {512, 4096, 32, 4, 128}, {4096, 4096, 32, 4, 128}} {
			kvs := []string{"f16", "q8", "f16old", "q8old"}
			if strings.HasPrefix(target, "sm_") {
				kvs = append(kvs, "f16mma") // NVIDIA only
				if sh.hd == 256 {
					kvs = append(kvs, "f16mma256") // the head-size kernel
				}
			}
			for _, kv := range kvs {
				vals := sh.n * sh.nkv * sh.hd
				a := abi.AttentionPrefillArgs{Q: uint64(alloc(4*sh.t*sh.nh*sh.hd, gaussian)), Out: uint64(alloc(4*sh.t*sh.nh*sh.hd, gaussian)),
					T: int32(sh.t), N: int32(sh.n), Nh: int32(sh.nh), Nkv: int32(sh.nkv), Hd: int32(sh.hd), Scale: float32(1 / math.Sqrt(float64(sh.hd)))}
				if kv == "f16" || kv == "f16old" || strings.HasPrefix(kv, "f16mma") {
					a.K, a.V = uint64(alloc(2*vals, f16Pattern)), uint64(alloc(2*vals, f16Pattern))
				} else {
					a.K, a.V = uint64(alloc(vals, i8Pattern)), uint64(alloc(vals, i8Pattern))
					a.Ks, a.Vs = uint64(alloc(2*vals/32, scalePattern)), uint64(alloc(2*vals/32, scalePattern))
				}
				pf := fn("attention_prefill", "strata_attention_prefill_"+kv)
				ab := a.Bytes()
				sec := timeIt(func() error {
					return pf.Launch(s, attentionPrefillGrid("strata_attention_prefill_"+kv, sh.t, sh.nh, sh.nkv), gpu.Dim3{X: abi.AttentionPrefillThreads, Y: 1, Z: 1}, 0, ab)
				})
				flops := 4 * float64(sh.hd*sh.nh*sh.t) * (float64(sh.n) - float64(sh.t)/2)
				logf("%-10s %-30s %10.2f %9.1f", kv, fmt.Sprintf("t=%d,n=%d,nh=%d,nkv=%d,hd=%d", sh.t, sh.n, sh.nh, sh.nkv, sh.hd), sec*1e6, flops/sec/1e9)
			}
		}

	}
	if want("deltanet") {
		// gated_delta_net at Qwen3-Next-80B's shape.
		const nk, nv, dk, dv = 16, 32, 128, 128
		C := 2*nk*dk + nv*dv
		logf("\n%-10s %-30s %10s %12s", "delta-net", "shape", "median µs", "µs/token")
		conv := fn("gated_delta_net", abi.SymGatedDeltaNetConv)
		rec := fn("gated_delta_net", abi.SymGatedDeltaNetRecurrent)
		chunk := fn("gated_delta_net", abi.SymGatedDeltaNetChunk)
		scan := fn("gated_delta_net", abi.SymGatedDeltaNetScan)
		ssmA := make([]float32, nv)
		for i := range ssmA {
			ssmA[i] = -float32(math.Exp(-2 + 3*rng.Float64()))
		}
		for _, T := range []int{1, 4096, 32768} {
			blk := gpu.Dim3{X: abi.GatedDeltaNetThreads, Y: 1, Z: 1}
			a := abi.GatedDeltaNetArgs{X: uint64(alloc(4*T*C, gaussian)), ConvW: uint64(alloc(4*4*C, f32Pattern(0.5))),
				ConvIn: uint64(alloc(4*3*C, gaussian)), ConvOut: uint64(alloc(4*3*C, gaussian)), Xc: uint64(alloc(4*T*C, gaussian)),
				Z: uint64(alloc(4*T*nv*dv, gaussian)), Ba: uint64(alloc(4*T*2*nv, gaussian)), SsmA: uint64(alloc(4*nv, f32Bytes(ssmA))),
				DtBias: uint64(alloc(4*nv, gaussian)), State: uint64(alloc(4*nv*dk*dv, f32Pattern(0.3))), NormW: uint64(alloc(4*dv, gaussian)),
				O: uint64(alloc(4*T*nv*dv, gaussian)), T: int32(T), C: int32(C), Nk: nk, Nv: nv, Dk: dk, Dv: dv, Eps: 1e-6}
			ab := a.Bytes()
			sc := timeIt(func() error {
				return conv.Launch(s, gpu.Dim3{X: uint32((C + abi.GatedDeltaNetThreads - 1) / abi.GatedDeltaNetThreads), Y: uint32(min(T, 65535)), Z: 1}, blk, 0, ab)
			})
			sr := timeIt(func() error { return rec.Launch(s, gpu.Dim3{X: nv, Y: 1, Z: 1}, blk, 0, ab) })
			logf("%-10s %-30s %10.2f %12.3f", "conv", fmt.Sprintf("t=%d,c=%d", T, C), sc*1e6, sc*1e6/float64(T))
			logf("%-10s %-30s %10.2f %12.3f", "recurrent", fmt.Sprintf("t=%d,nk=%d,nv=%d,d=%d", T, nk, nv, dk), sr*1e6, sr*1e6/float64(T))
			nc := (T + 15) / 16
			a.Ws = uint64(alloc(4*nv*nc*gdnChunkFloats, gaussian))
			abw := a.Bytes()
			sch := timeIt(func() error {
				if err := chunk.Launch(s, gpu.Dim3{X: uint32(nc), Y: nv, Z: 1}, blk, 0, abw); err != nil {
					return err
				}
				return scan.Launch(s, gpu.Dim3{X: nv, Y: 1, Z: 1}, blk, 0, abw)
			})
			logf("%-10s %-30s %10.2f %12.3f", "chunked", fmt.Sprintf("t=%d,nk=%d,nv=%d,d=%d", T, nk, nv, dk), sch*1e6, sch*1e6/float64(T))
		}

	}
	if want("rmsnorm") {
		// rmsnorm + Q8_1: fused against separate.
		logf("\n%-10s %-30s %10s %10s %8s", "rmsnorm", "shape", "fused µs", "separate", "ratio")
		add := fn("rmsnorm", abi.SymRmsnormAdd)
		fused := fn("rmsnorm", abi.SymRmsnormAddq81)
		quantize := fn("quantize_q8_1", abi.SymQuantizeQ81F32)
		for _, sh := range []struct{ rows, n int }{{1, 2048}, {1, 4096}, {512, 2048}, {512, 4096}} {
			x, r := alloc(4*sh.rows*sh.n, gaussian), alloc(4*sh.rows*sh.n, gaussian)
			w, xo, y := alloc(4*sh.n, gaussian), alloc(4*sh.rows*sh.n, gaussian), alloc(4*sh.rows*sh.n, gaussian)
			q := alloc(sh.rows*sh.n/32*36, i8Pattern)
			base := abi.RmsnormArgs{X: uint64(x), R: uint64(r), W: uint64(w), Xo: uint64(xo), N: int32(sh.n), Rows: int32(sh.rows),
				Heads: 1, TokStride: int32(sh.n), HeadStride: int32(sh.n), Eps: 1e-6}
			fa, sa := base, base
			fa.Q = uint64(q) // y = 0: only the quantized form
			sa.Y = uint64(y)
			qa := abi.QuantizeQ81Args{X: uint64(y), Y: uint64(q), Ncols: int32(sh.n), NcolsPadded: int32(sh.n), Nrows: int32(sh.rows), XStride: int32(sh.n)}
			fb, sb, qb := fa.Bytes(), sa.Bytes(), qa.Bytes()
			grid := gpu.Dim3{X: uint32((sh.rows + 7) / 8), Y: 1, Z: 1}
			blk := gpu.Dim3{X: abi.RmsnormThreads, Y: 1, Z: 1}
			tf := timeIt(func() error { return fused.Launch(s, grid, blk, 0, fb) })
			ts := timeIt(func() error {
				if err := add.Launch(s, grid, blk, 0, sb); err != nil {
					return err
				}
				return quantize.Launch(s, gpu.Dim3{X: uint32((sh.n + 255) / 256), Y: uint32(sh.rows), Z: 1}, gpu.Dim3{X: abi.QuantizeQ81Threads, Y: 1, Z: 1}, 0, qb)
			})
			logf("%-10s %-30s %10.2f %10.2f %7.2fx", "add+q8_1", fmt.Sprintf("rows=%d,n=%d", sh.rows, sh.n), tf*1e6, ts*1e6, ts/tf)
		}
	}
	// rmsnorm_row at the decode engine's arguments (forward.go: one row, xo = x, y written).
	if want("rmsnorm_row") {
		logf("\n%-10s %-30s %10s %14s", "row norm", "shape", "1 launch µs", fmt.Sprintf("µs/launch of %d", seq))
		for _, c := range []struct {
			mode    string
			rows, n int
		}{{"addq81", 1, 2048}, {"addq81wave", 1, 2048}, {"add", 1, 2048}, {"q81", 1, 2048}, {"q81wave", 1, 2048}, {"f32", 1, 2048},
			{"addq81", 1, 4096}, {"addq81wave", 1, 4096}, {"addq81", 1, 128}, {"addq81", 512, 2048}, {"addq81wave", 512, 2048}} {
			k := fn("rmsnorm_row", "strata_rmsnorm_row_"+c.mode)
			x, r := alloc(4*c.rows*c.n, gaussian), alloc(4*c.rows*c.n, f32Pattern(1e-3))
			a := abi.RmsnormRowArgs{X: uint64(x), W: uint64(alloc(4*c.n, gaussian)), Y: uint64(alloc(4*c.rows*c.n, gaussian)), N: int32(c.n),
				Rows: int32(c.rows), Heads: 1, TokStride: int32(c.n), HeadStride: int32(c.n), Eps: 1e-6}
			if strings.HasPrefix(c.mode, "add") {
				a.R, a.Xo = uint64(r), uint64(x) // in place; r small, so x stays finite over the runs
			}
			if strings.Contains(c.mode, "q81") {
				a.Q = uint64(alloc(c.rows*c.n/32*36, i8Pattern))
			}
			ab := a.Bytes()
			launch := func() error {
				return k.Launch(s, gpu.Dim3{X: uint32(c.rows), Y: 1, Z: 1}, gpu.Dim3{X: abi.RmsnormRowThreads, Y: 1, Z: 1}, 0, ab)
			}
			t1, tn := timeN(launch, 1), timeN(launch, seq)
			logf("%-10s %-30s %10.2f %14.2f", c.mode, fmt.Sprintf("rows=%d,n=%d", c.rows, c.n), t1*1e6, tn*1e6)
		}
	}
	// The greedy token over a vocabulary (model/gpu ForwardArgmax): sample/argmax (one block)
	// against argmaxp (one block per 4096 logits) then argmaxf.
	if want("argmax") {
		logf("\n%-10s %-30s %10s %14s", "argmax", "shape", "1 launch µs", fmt.Sprintf("µs/launch of %d", seq))
		for _, n := range []int{151936, 32000} {
			parts := argmaxParts(n, false) // the engine's: one block per 4096 logits
			a := abi.SampleArgs{Logits: uint64(alloc(4*n, gaussian)), Out: uint64(alloc(4, i8Pattern)), Part: uint64(alloc(8*parts, i8Pattern)),
				N: int32(n), Stride: int32(n), Parts: int32(parts)}
			ab := a.Bytes()
			one, kp, kf := fn("sample", abi.SymSampleArgmax), fn("sample", abi.SymSampleArgmaxp), fn("sample", abi.SymSampleArgmaxf)
			blk := gpu.Dim3{X: abi.SampleThreads, Y: 1, Z: 1}
			for _, c := range []struct {
				name   string
				launch func() error
			}{
				{"argmax", func() error { return one.Launch(s, gpu.Dim3{X: 1, Y: 1, Z: 1}, blk, 0, ab) }},
				{"argmaxp+f", func() error {
					if err := kp.Launch(s, gpu.Dim3{X: uint32(parts), Y: 1, Z: 1}, blk, 0, ab); err != nil {
						return err
					}
					return kf.Launch(s, gpu.Dim3{X: 1, Y: 1, Z: 1}, blk, 0, ab)
				}},
			} {
				t1, tn := timeN(c.launch, 1), timeN(c.launch, seq)
				logf("%-10s %-30s %10.2f %14.2f", c.name, fmt.Sprintf("n=%d,parts=%d", n, parts), t1*1e6, tn*1e6)
			}
		}
	}
	blog.write(t, "modelops.txt")
}
