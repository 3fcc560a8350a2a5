// signforms.c: exhaustive host check that the STRATA_QB_SGN forms of
// kernels/templates/quant_blocks.tmpl give the same sign masks as the portable forms (which
// TestQuantBlocksHost checks against package quant). (Commit 9bfff9a's version also checked
// the STRATA_QB_XDOT identities, a form measured and not kept.)
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
  // strata_sign_mask4_hi (IQ3_S, s = sg >> 8l): every low byte under 4096 high 24-bit patterns
  // (zero and 4095 random ones: the form masks s & 0xf0 first, so the high bits must not leak).
  for (u32 h = 0; h < 4096; ++h) {
    const u32 hi24 = h == 0 ? 0u : (rnd() & 0xffffff00u);
    for (u32 b = 0; b < 256; ++b, ++n) {
      const u32 s = hi24 | b;
      bad += signrep((s & 0xf0u) * 0x01020408u) != mask4(s >> 4);
    }
  }
  printf("signforms: %ld cases, %ld mismatches\n", n, bad);
  return bad != 0;
}
