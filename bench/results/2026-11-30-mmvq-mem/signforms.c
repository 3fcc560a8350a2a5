// signforms.c: exhaustive host check that the STRATA_QB_SGN and STRATA_QB_XD forms of
// kernels/templates/quant_blocks.tmpl give the same masks, values and integer dots as the
// portable forms (which TestQuantBlocksHost checks against package quant).
//   cc -O2 -o /tmp/signforms signforms.c && /tmp/signforms
// prmt(a, 0, 0xBA98) is emulated: result byte k = 0xff where bit 7 of byte k of a is set.
#include <stdint.h>
#include <stdio.h>
typedef uint32_t u32;
static u32 signrep(u32 a) {
  u32 r = 0;
  for (int k = 0; k < 4; ++k) r |= ((a >> (8 * k + 7)) & 1u) ? 0xffu << (8 * k) : 0u;
  return r;
}
static u32 mask4(u32 s) { return ((s & 15u) * 0x00204081u & 0x01010101u) * 0xffu; }  // portable
static u32 neg(u32 g, u32 m) { return (g ^ m) + (m & 0x01010101u); }                // portable
static int dot4(u32 a, u32 b, int s) {
  for (int k = 0; k < 4; ++k) s += (int8_t)(a >> (8 * k)) * (int8_t)(b >> (8 * k));
  return s;
}
static u32 rng = 12345u;
static u32 rnd(void) { return rng = rng * 1664525u + 1013904223u, rng ^ (rng >> 16); }
int main(void) {
  long bad = 0, n = 0;
  // strata_ksigns (IQ2_XS, IQ3_XXS): every 7-bit index; the parity is sign bit 7.
  for (u32 i = 0; i < 128; ++i, ++n) {
    const u32 s = i | ((u32)__builtin_parity(i) << 7);
    const u32 lo = signrep(i * 0x10204080u), hi = signrep(i * 0x01020408u + ((u32)__builtin_popcount(i) << 31));
    bad += lo != mask4(s) || hi != mask4(s >> 4);
  }
  // strata_sign_mask4_hi (IQ3_S, s = sg >> 8l): every low byte under every high 24-bit pattern
  // of a sample of 2^12 (the form masks s & 0xf0 first; the loop shows the high bits do not leak).
  for (u32 h = 0; h < 4096; ++h) {
    const u32 hi24 = h == 0 ? 0u : (rnd() & 0xffffff00u);
    for (u32 b = 0; b < 256; ++b, ++n) {
      const u32 s = hi24 | b;
      bad += signrep((s & 0xf0u) * 0x01020408u) != mask4(s >> 4);
    }
  }
  // STRATA_QB_XD signs: per byte, (i8)(g ^ m) − (i8)m = (i8)neg(g, m) for every grid byte g
  // (the grids' bytes are 1..127) and m in {0, 0xff}; and per word the dots
  // dot4(g ^ m, a) − dot4(m, a) = dot4(neg(g, m), a) for random words and all 16 masks.
  for (u32 g = 1; g < 128; ++g) {
    for (u32 m = 0; m < 2; ++m, ++n) {
      const u32 mb = m ? 0xffu : 0u;
      bad += (int)(int8_t)(g ^ mb) - (int)(int8_t)mb != (int)(int8_t)neg(g, mb);
    }
  }
  for (int t = 0; t < 1 << 20; ++t) {
    u32 g = 0;  // grid bytes 1..127 (the portable negation needs no byte 0: no carries)
    for (int k = 0; k < 4; ++k) g |= (1u + rnd() % 127u) << (8 * k);
    const u32 a = rnd(), m = mask4(rnd());
    bad += dot4(g ^ m, a, 0) - dot4(m, a, 0) != dot4(neg(g, m), a, 0), ++n;
  }
  // IQ1_M under STRATA_QB_XD: q = G + 1 (bytes 0..2), 8·Σ q·a + c·Σa = Σ (8q + c)·a for
  // random words (the dot is linear; checked, not assumed).
  for (int t = 0; t < 1 << 20; ++t, ++n) {
    const u32 e = rnd(), q = e & 0x0f0f0f0fu, q2 = (e >> 4) & 0x0f0f0f0fu, a = rnd(), b = rnd();
    const int c = (rnd() & 1) ? -9 : -7;
    const int sa = dot4(0x01010101u, a, dot4(0x01010101u, b, 0));
    bad += 8 * dot4(q2, b, dot4(q, a, 0)) + c * sa != dot4(q2 << 3, b, dot4(q << 3, a, 0)) + c * sa;
  }
  printf("signforms: %ld cases, %ld mismatches\n", n, bad);
  return bad != 0;
}
