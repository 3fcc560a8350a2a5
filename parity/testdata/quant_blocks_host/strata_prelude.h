// Host stand-in for the generated prelude, used by parity's TestQuantBlocksHost: it compiles
// a generated dequant source (which carries the whole of quant_blocks.tmpl) as plain C++ for
// the build machine, so the per-type decode and integer dots are checked against package
// quant without a GPU. Thread ids are globals the driver sets; dot4 is written out per byte;
// fp16 conversions use _Float16 (round to nearest even, as the GPU's).
#pragma once
#include <string.h>
#include <stdint.h>
#define __global__
#define __device__
#define __shared__ static
#define STRATA_KERNEL extern "C"
#define STRATA_DEVICE static inline
#define STRATA_LAUNCH_BOUNDS(n)
typedef signed char i8; typedef unsigned char u8; typedef short i16; typedef unsigned short u16;
typedef int i32; typedef unsigned int u32; typedef long long i64; typedef unsigned long long u64; typedef float f32;
static u32 g_tx, g_bx, g_bz, g_bdim = 1, g_gdim = 1;
STRATA_DEVICE u32 strata_load_u32(const void* p) { u32 v; memcpy(&v, p, 4); return v; }
STRATA_DEVICE u32 strata_thread_x() { return g_tx; }
STRATA_DEVICE u32 strata_block_x() { return g_bx; }
STRATA_DEVICE u32 strata_block_z() { return g_bz; }
STRATA_DEVICE u32 strata_block_dim_x() { return g_bdim; }
STRATA_DEVICE u32 strata_grid_dim_x() { return g_gdim; }
STRATA_DEVICE u32 strata_lane() { return g_tx & 31; }
STRATA_DEVICE void strata_barrier() {}
STRATA_DEVICE i32 strata_dot4_ss(i32 a, i32 b, i32 c) { for (int i = 0; i < 4; ++i) c += (i32)(i8)(a >> 8*i) * (i32)(i8)(b >> 8*i); return c; }
STRATA_DEVICE u16 strata_f32_to_f16(f32 x) { _Float16 h = (_Float16)x; u16 v; memcpy(&v, &h, 2); return v; }
STRATA_DEVICE f32 strata_f16_to_f32(u16 h) { _Float16 v; memcpy(&v, &h, 2); return (f32)v; }
STRATA_DEVICE f32 strata_bf16_to_f32(u16 b) { u32 u = (u32)b << 16; f32 f; memcpy(&f, &u, 4); return f; }
