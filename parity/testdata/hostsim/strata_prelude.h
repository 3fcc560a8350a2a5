// Host simulation prelude for the parity host tests (parity/hostsim_test.go): the primitive
// API of kernels/templates/prelude*.tmpl implemented in plain C++ on CPU threads, so that a
// generated NVIDIA source (kernels/out/sm_XX/<family>.cu) runs on the build machine. One
// block at a time; each of its threads is a std::thread; barriers are std::barrier; wave
// shuffles and the int8 matrix fragments (NVIDIA mma.sync m16n8k16/k32 layouts, PTX §9.7.14)
// exchange registers through per-warp arrays between two warp barriers. Not a GPU model:
// it checks the kernels' logic (indexing, staging, folds, phases), not their timing.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>

#define STRATA_TARGET "hostsim"
#define STRATA_WAVE 32
#define STRATA_LDS_BYTES 49152  // the NVIDIA targets' static shared memory per block
// HOSTSIM_OTHER_PATHS: leave STRATA_NVIDIA undefined, so that template code written for
// the other vendors' side of an #ifdef STRATA_NVIDIA (e.g. mmq's two K=16 products for the
// 16-split types) runs on the same fragment API.
#ifndef HOSTSIM_OTHER_PATHS
#define STRATA_NVIDIA 1
#endif
#define STRATA_HAS_INT8_MATRIX 1
#define __global__
#define __device__
#define __shared__
#define STRATA_KERNEL extern "C"
#define STRATA_DEVICE static inline
#define STRATA_LAUNCH_BOUNDS(n)
// Programmatic dependent launch (prelude_nvidia.tmpl): one launch at a time here, nothing
// to wait for or prefetch.
#define STRATA_GRID_DEP() do { } while (0)

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
static inline void strata_prefetch_l2_share(const void*, long long) {}

namespace hostsim {
constexpr int kMaxThreads = 1024;
struct Warp {
  u32 a[32][4];
  u32 b[32][2][2];
  u32 v[32];
  std::barrier<>* bar;
};
inline thread_local u32 tid, bx, by, bz;
inline u32 bdx, gdx, gdy, gdz;
inline std::barrier<>* block_bar;
inline Warp warps[kMaxThreads / 32];
inline void warp_sync() { warps[tid >> 5].bar->arrive_and_wait(); }
inline u32 exchange(u32 v, u32 src) {
  Warp& w = warps[tid >> 5];
  w.v[tid & 31] = v;
  warp_sync();
  const u32 r = w.v[src & 31];
  warp_sync();
  return r;
}
}  // namespace hostsim

STRATA_DEVICE u32 strata_load_u32(const void* p) {
  u32 v;
  std::memcpy(&v, p, 4);
  return v;
}
STRATA_DEVICE u32 strata_thread_x() { return hostsim::tid; }
STRATA_DEVICE u32 strata_thread_y() { return 0; }
STRATA_DEVICE u32 strata_block_x() { return hostsim::bx; }
STRATA_DEVICE u32 strata_block_y() { return hostsim::by; }
STRATA_DEVICE u32 strata_block_z() { return hostsim::bz; }
STRATA_DEVICE u32 strata_block_dim_x() { return hostsim::bdx; }
STRATA_DEVICE u32 strata_grid_dim_x() { return hostsim::gdx; }
STRATA_DEVICE u32 strata_grid_dim_y() { return hostsim::gdy; }
STRATA_DEVICE u32 strata_lane() { return hostsim::tid & 31u; }
STRATA_DEVICE void strata_barrier() { hostsim::block_bar->arrive_and_wait(); }
STRATA_DEVICE i32 strata_shfl_i32(i32 v, u32 src) { return (i32)hostsim::exchange((u32)v, src); }
STRATA_DEVICE i32 strata_shfl_xor_i32(i32 v, u32 mask) { return strata_shfl_i32(v, strata_lane() ^ mask); }
STRATA_DEVICE f32 strata_shfl_f32(f32 v, u32 src) { return __builtin_bit_cast(f32, hostsim::exchange(__builtin_bit_cast(u32, v), src)); }
STRATA_DEVICE f32 strata_shfl_xor_f32(f32 v, u32 mask) { return strata_shfl_f32(v, strata_lane() ^ mask); }
STRATA_DEVICE f32 strata_exp2f(f32 x) { return std::exp2f(x); }
STRATA_DEVICE f32 strata_log2f(f32 x) { return std::log2f(x); }
STRATA_DEVICE i32 strata_dot4_ss(i32 a, i32 b, i32 c) {
  u32 s = (u32)c;
  for (int i = 0; i < 4; ++i) s += (u32)((i32)(i8)(a >> (8 * i)) * (i32)(i8)(b >> (8 * i)));
  return (i32)s;
}
STRATA_DEVICE i32 strata_dot4_us(u32 a, i32 b, i32 c) {
  u32 s = (u32)c;
  for (int i = 0; i < 4; ++i) s += (u32)((i32)((a >> (8 * i)) & 0xffu) * (i32)(i8)(b >> (8 * i)));
  return (i32)s;
}

// ---- int8 fragments with NVIDIA's layouts (as prelude_nvidia.tmpl). g = lane/4, t = lane%4.
struct strata_mma_a16 { u32 r[2]; };
struct strata_mma_b16 { u32 r[2]; };
struct strata_mma_a32 { u32 r[4]; };
struct strata_mma_b32 { u32 r[2][2]; };
struct strata_mma_c { i32 v[8]; };
STRATA_DEVICE void strata_mma_c_coord(int r, int* row, int* col) {
  const int g = (int)(strata_lane() >> 2), t = (int)(strata_lane() & 3u), h = r >> 2, x = r & 3;
  *row = g + 8 * (x >> 1);
  *col = 8 * h + 2 * t + (x & 1);
}
STRATA_DEVICE strata_mma_a16 strata_mma_load_a16(const i8* p, int stride) {
  const u32 g = strata_lane() >> 2, t = strata_lane() & 3u;
  return strata_mma_a16{{strata_load_u32(p + (i64)g * stride + 4 * t), strata_load_u32(p + (i64)(g + 8) * stride + 4 * t)}};
}
STRATA_DEVICE strata_mma_b16 strata_mma_load_b16(const i8* p, int stride) {
  const u32 g = strata_lane() >> 2, t = strata_lane() & 3u;
  return strata_mma_b16{{strata_load_u32(p + (i64)g * stride + 4 * t), strata_load_u32(p + (i64)(g + 8) * stride + 4 * t)}};
}
STRATA_DEVICE strata_mma_a32 strata_mma_load_a32(const i8* p, int stride) {
  const u32 g = strata_lane() >> 2, t = strata_lane() & 3u;
  return strata_mma_a32{{strata_load_u32(p + (i64)g * stride + 4 * t), strata_load_u32(p + (i64)(g + 8) * stride + 4 * t),
                         strata_load_u32(p + (i64)g * stride + 16 + 4 * t), strata_load_u32(p + (i64)(g + 8) * stride + 16 + 4 * t)}};
}
STRATA_DEVICE strata_mma_b32 strata_mma_load_b32(const i8* p, int stride) {
  const u32 g = strata_lane() >> 2, t = strata_lane() & 3u;
  strata_mma_b32 b;
  for (int h = 0; h < 2; ++h) {
    b.r[h][0] = strata_load_u32(p + (i64)(8 * h + g) * stride + 4 * t);
    b.r[h][1] = strata_load_u32(p + (i64)(8 * h + g) * stride + 16 + 4 * t);
  }
  return b;
}
namespace hostsim {
// A[row][k] and B[k][col] of the warp's fragments for K = 16 (ks = 1) or 32 (ks = 2), from
// the registers every lane deposited: PTX's m16n8k16 / m16n8k32 tables.
inline int8_t frag_a(const Warp& w, int row, int k, int ks) {
  const int lane = 4 * (row & 7) + ((k & 15) >> 2), reg = (row >> 3) + (ks == 2 ? 2 * (k >> 4) : 0);
  return (int8_t)(w.a[lane][reg] >> (8 * (k & 3)));
}
inline int8_t frag_b(const Warp& w, int k, int col, int ks) {
  const int h = col >> 3, lane = 4 * (col & 7) + ((k & 15) >> 2), reg = ks == 2 ? (k >> 4) : 0;
  return (int8_t)(w.b[lane][h][reg] >> (8 * (k & 3)));
}
inline strata_mma_c mma(strata_mma_c c, int ks) {
  Warp& w = warps[tid >> 5];
  warp_sync();
  for (int e = 0; e < 8; ++e) {
    int row, col;
    strata_mma_c_coord(e, &row, &col);
    u32 s = (u32)c.v[e];
    for (int k = 0; k < 16 * ks; ++k) s += (u32)((i32)frag_a(w, row, k, ks) * (i32)frag_b(w, k, col, ks));
    c.v[e] = (i32)s;
  }
  warp_sync();
  return c;
}
}  // namespace hostsim
STRATA_DEVICE strata_mma_c strata_mma16(strata_mma_c c, strata_mma_a16 a, strata_mma_b16 b) {
  hostsim::Warp& w = hostsim::warps[hostsim::tid >> 5];
  const u32 l = strata_lane();
  w.a[l][0] = a.r[0], w.a[l][1] = a.r[1];
  w.b[l][0][0] = b.r[0], w.b[l][1][0] = b.r[1];
  return hostsim::mma(c, 1);
}
STRATA_DEVICE strata_mma_c strata_mma32(strata_mma_c c, strata_mma_a32 a, strata_mma_b32 b) {
  hostsim::Warp& w = hostsim::warps[hostsim::tid >> 5];
  const u32 l = strata_lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a.r[i];
  for (int h = 0; h < 2; ++h) w.b[l][h][0] = b.r[h][0], w.b[l][h][1] = b.r[h][1];
  return hostsim::mma(c, 2);
}

// ---- Shared, vendor-neutral helpers (as prelude.tmpl).
STRATA_DEVICE f32 strata_wave_sum_f32(f32 v) {
  for (int m = 16; m > 0; m >>= 1) v += strata_shfl_xor_f32(v, m);
  return v;
}
STRATA_DEVICE f32 strata_wave_max_f32(f32 v) {
  for (int m = 16; m > 0; m >>= 1) v = __builtin_fmaxf(v, strata_shfl_xor_f32(v, m));
  return v;
}
STRATA_DEVICE i32 strata_wave_sum_i32(i32 v) {
  for (int m = 16; m > 0; m >>= 1) v += strata_shfl_xor_i32(v, m);
  return v;
}
STRATA_DEVICE f32 strata_expf(f32 x) { return strata_exp2f(x * 1.44269504088896341f); }
STRATA_DEVICE f32 strata_logf(f32 x) { return strata_log2f(x) * 0.693147180559945309f; }
STRATA_DEVICE u16 strata_f32_to_f16(f32 x) { return __builtin_bit_cast(u16, (_Float16)x); }
STRATA_DEVICE f32 strata_f16_to_f32(u16 h) { return (f32)__builtin_bit_cast(_Float16, h); }
STRATA_DEVICE u16 strata_f32_to_bf16(f32 x) {
  u32 u = __builtin_bit_cast(u32, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
STRATA_DEVICE f32 strata_bf16_to_f32(u16 b) { return __builtin_bit_cast(f32, (u32)b << 16); }
STRATA_DEVICE strata_mma_c strata_mma_c_zero() {
  strata_mma_c c;
  for (int r = 0; r < 8; ++r) c.v[r] = 0;
  return c;
}
