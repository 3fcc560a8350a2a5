// Streaming ceiling kernels for TestBenchDecode (STRATA_BENCH_CEIL; parity/bench_test.go
// benchCeiling). Bench only: not a kernel family, not in kernels/abi, NVIDIA only. Built by
// bench/results/2026-11-30-mv8-s10/run.sh with the sm_90 flags of kernels/out/objects.txt:
//
//   clang-19 $flags -I kernels/out/sm_90 parity/testdata/ceiling.cu -o ceiling.ptx
//
// Each kernel reads exactly the n bytes at w and the m bytes at x once (what one mmvq launch
// must read at least: a type's weight bytes and its activation bytes) and writes one word a
// block, the xor of everything its threads read (so no load is dead), to out[block]. Nothing
// else: no decode, no arithmetic beyond the xor. Its time is the best a kernel that only
// moves those bytes reaches under the same timing as mmvq, so the ceiling of any mmvq of the
// type under issue 5's method.
//
// strata_ceil_w<W>[nc|h]_u<U>: grid-stride streaming, thread t of T reads W-byte words
// t, t + T, …; U of them in flight a thread (all issued before the first is used), any grid.
//   nc: ld.global.nc.L1::no_allocate (the read-only path, no L1 allocation); h: the L2
//   fetch-size hint .L2::256B. A byte tail (n or m not a multiple of W) by single bytes.
// strata_ceil_rows: mmvq's access order without its work — warp v of the grid reads rows 2v
//   and 2v + 1 (rb bytes each) in passes of pb bytes (16-byte loads, lane ℓ the ℓ-th 16
//   bytes of each 512 of the pass, every load of the pass issued first), grid ceil(rows/16)
//   blocks of 256; x grid-strided once. rb and pb multiples of 16, pb ≤ 4096.
// strata_ceil_win: the same loads in a moving window — block b takes row pairs b, b + G, …
//   (G the grid), its waves the passes w, w + 8, … of both rows of the pair, then a block
//   barrier (the hand-off a split-row mmvq would make) before the next pair: at step s the
//   grid reads rows [2Gs, 2G(s + 1)), one contiguous window of memory.
#include "strata_prelude.h"

// The argument block of every kernel here (72 bytes; the Go side packs it in this order).
struct strata_ceil_args {
  const u8* w;    // weights: n bytes, 16-byte aligned
  const u8* x;    // activations: m bytes, 16-byte aligned
  u32* out;       // one word a block
  u64 n, m;       // bytes of w and of x
  i64 rows, rb;   // strata_ceil_rows: rows of rb bytes (n = rows·rb)
  i64 pb;         // strata_ceil_rows: bytes of a row a pass
  i64 pad;
};
static_assert(sizeof(strata_ceil_args) == 72, "parity/bench_test.go ceilArgs");

template <int W, int K>  // K: 0 plain, 1 nc + L1::no_allocate, 2 L2::256B
STRATA_DEVICE void strata_ceil_ld(const u8* p, u32* v) {
  if constexpr (W == 4) {
    v[0] = strata_load_u32(p);
  } else if constexpr (W == 8) {
    typedef u32 u32x2 __attribute__((__vector_size__(8)));
    u32x2 t;
    __builtin_memcpy(&t, __builtin_assume_aligned(p, 8), 8);
    v[0] = t[0], v[1] = t[1];
  } else if constexpr (K == 0) {
    typedef u32 u32x4 __attribute__((__vector_size__(16)));
    u32x4 t;
    __builtin_memcpy(&t, __builtin_assume_aligned(p, 16), 16);
    v[0] = t[0], v[1] = t[1], v[2] = t[2], v[3] = t[3];
  } else {
    u64 g;
    asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
    if constexpr (K == 1)
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(g));
    else
      asm("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(g));
  }
}

// Bytes [0, n) of p, grid-strided by thread t of nt, into acc.
template <int W, int U, int K>
STRATA_DEVICE u32 strata_ceil_span(const u8* p, u64 n, u64 t, u64 nt, u32 acc) {
  const u64 nv = n / W;
  for (u64 i0 = t; i0 < nv; i0 += U * nt) {
    u32 v[U][W / 4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const u64 i = i0 + u * nt;
      if (i < nv) strata_ceil_ld<W, K>(p + i * W, v[u]);
      else {
#pragma unroll
        for (int k = 0; k < W / 4; ++k) v[u][k] = 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < W / 4; ++k) acc ^= v[u][k];
    }
  }
  for (u64 b = nv * W + t; b < n; b += nt) acc ^= p[b];
  return acc;
}

// The block's xor of every thread's acc to out[block].
STRATA_DEVICE void strata_ceil_out(u32* out, u32 acc) {
  __shared__ u32 part[32];
  for (int m = 16; m > 0; m >>= 1) acc ^= (u32)strata_shfl_xor_i32((i32)acc, (u32)m);
  if (strata_lane() == 0) part[strata_thread_x() >> 5] = acc;
  strata_barrier();
  if (strata_thread_x() == 0) {
    u32 r = 0;
    for (u32 i = 0; i < strata_block_dim_x() >> 5; ++i) r ^= part[i];
    out[strata_block_x()] = r;
  }
}

template <int W, int U, int K>
STRATA_DEVICE void strata_ceil_stream(const strata_ceil_args& a) {
  const u64 t = (u64)strata_block_x() * strata_block_dim_x() + strata_thread_x();
  const u64 nt = (u64)strata_grid_dim_x() * strata_block_dim_x();
  u32 acc = strata_ceil_span<W, U, K>(a.w, a.n, t, nt, 0u);
  acc = strata_ceil_span<W, U, K>(a.x, a.m, t, nt, acc);
  strata_ceil_out(a.out, acc);
}

#define STRATA_CEIL(name, W, U, K) \
  STRATA_KERNEL void name(const strata_ceil_args a) { strata_ceil_stream<W, U, K>(a); }
STRATA_CEIL(strata_ceil_w4_u1, 4, 1, 0)
STRATA_CEIL(strata_ceil_w4_u2, 4, 2, 0)
STRATA_CEIL(strata_ceil_w4_u4, 4, 4, 0)
STRATA_CEIL(strata_ceil_w4_u8, 4, 8, 0)
STRATA_CEIL(strata_ceil_w8_u1, 8, 1, 0)
STRATA_CEIL(strata_ceil_w8_u2, 8, 2, 0)
STRATA_CEIL(strata_ceil_w8_u4, 8, 4, 0)
STRATA_CEIL(strata_ceil_w8_u8, 8, 8, 0)
STRATA_CEIL(strata_ceil_w16_u1, 16, 1, 0)
STRATA_CEIL(strata_ceil_w16_u2, 16, 2, 0)
STRATA_CEIL(strata_ceil_w16_u4, 16, 4, 0)
STRATA_CEIL(strata_ceil_w16_u8, 16, 8, 0)
STRATA_CEIL(strata_ceil_w16nc_u1, 16, 1, 1)
STRATA_CEIL(strata_ceil_w16nc_u2, 16, 2, 1)
STRATA_CEIL(strata_ceil_w16nc_u4, 16, 4, 1)
STRATA_CEIL(strata_ceil_w16nc_u8, 16, 8, 1)
STRATA_CEIL(strata_ceil_w16h_u1, 16, 1, 2)
STRATA_CEIL(strata_ceil_w16h_u2, 16, 2, 2)
STRATA_CEIL(strata_ceil_w16h_u4, 16, 4, 2)
STRATA_CEIL(strata_ceil_w16h_u8, 16, 8, 2)

// One pass (bytes [o, o + pb) of rows r0 and r0 + 1 when nr = 2): up to 8 16-byte loads a
// row and lane, all issued before the first is used.
STRATA_DEVICE u32 strata_ceil_pass(const strata_ceil_args& a, i64 r0, int nr, i64 o, int lane, u32 acc) {
  const i64 len = a.rb - o < a.pb ? a.rb - o : a.pb;
  u32 v[2][8][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const i64 off = 512 * i + 16 * lane;
      if (r < nr && off < len) strata_ceil_ld<16, 0>(a.w + (r0 + r) * a.rb + o + off, v[r][i]);
      else {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[r][i][k] = 0u;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) acc ^= v[r][i][k];
    }
  }
  return acc;
}

// mmvq's order (see the header): 2 rows a warp, passes of pb bytes.
STRATA_KERNEL void strata_ceil_rows(const strata_ceil_args a) {
  const int lane = (int)strata_lane();
  const i64 r0 = 2 * ((i64)strata_block_x() * 8 + (strata_thread_x() >> 5));
  u32 acc = 0;
  if (r0 < a.rows) {
    const int nr = a.rows - r0 >= 2 ? 2 : 1;
    for (i64 o = 0; o < a.rb; o += a.pb) acc = strata_ceil_pass(a, r0, nr, o, lane, acc);
  }
  const u64 t = (u64)strata_block_x() * strata_block_dim_x() + strata_thread_x();
  acc = strata_ceil_span<16, 1, 0>(a.x, a.m, t, (u64)strata_grid_dim_x() * strata_block_dim_x(), acc);
  strata_ceil_out(a.out, acc);
}

// The window order (see the header): row pairs grid-strided over blocks, a pair's passes
// over the block's waves, a barrier a pair.
STRATA_KERNEL void strata_ceil_win(const strata_ceil_args a) {
  const int lane = (int)strata_lane(), warp = (int)(strata_thread_x() >> 5), nw = (int)(strata_block_dim_x() >> 5);
  const i64 np = (a.rb + a.pb - 1) / a.pb;
  u32 acc = 0;
  for (i64 r0 = 2 * (i64)strata_block_x(); r0 < a.rows; r0 += 2 * (i64)strata_grid_dim_x()) {
    const int nr = a.rows - r0 >= 2 ? 2 : 1;
    for (i64 q = warp; q < np; q += nw) acc = strata_ceil_pass(a, r0, nr, q * a.pb, lane, acc);
    strata_barrier();
  }
  const u64 t = (u64)strata_block_x() * strata_block_dim_x() + strata_thread_x();
  acc = strata_ceil_span<16, 1, 0>(a.x, a.m, t, (u64)strata_grid_dim_x() * strata_block_dim_x(), acc);
  strata_ceil_out(a.out, acc);
}
