// Driver for TestQuantBlocksHost. Usage: host <type index> <k> <rows> < weights ‖ one Q8_1 row
// Prints the dequant kernel's f32 output (rows·k values), then for every row and 32-element
// group: main off base offb — the integer dot parts and the exact scales of quant_blocks.
#include "dequant.cu"
#include <stdio.h>
#include <stdlib.h>
#include <vector>

template <class QT>
static void groups(const u8* w, const u8* act, int rows, int k) {
  static typename QT::lds tab;
  g_tx = 0, g_bdim = 1;
  QT::fill(&tab);
  const int ng = k / 32;
  const i64 rowb = (i64)(k / QT::QK) * QT::BYTES;
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < ng; ++g) {
      strata_g32 wg;
      QT::load(w + r * rowb + (i64)(g / (QT::QK / 32)) * QT::BYTES, g % (QT::QK / 32), wg, &tab);
      u32 a[8];
      f32 da;
      strata_q81_load(act + g * 36, a, &da);
      i32 mn, of;
      strata_g32_dot<QT>(wg, a, &mn, &of);
      printf("%d %d %a %a\n", mn, of, (double)wg.base, (double)wg.offb);
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const int t = atoi(argv[1]), k = atoi(argv[2]), rows = atoi(argv[3]);
  static const int bytes[] = {64, 64, 34, 18, 144, 210, 74, 98, 110, 56}, qk[] = {32, 32, 32, 64, 256, 256, 256, 256, 256, 256};
  if (t < 0 || t > 9) return 2;
  std::vector<u8> in((size_t)rows * (k / qk[t]) * bytes[t] + (size_t)k / 32 * 36 + 64);
  if (fread(in.data(), 1, in.size() - 64, stdin) != in.size() - 64) return 3;
  const u8* act = in.data() + (size_t)rows * (k / qk[t]) * bytes[t];
  std::vector<float> y((size_t)rows * k);
  strata_dequant_args p{};
  p.w = in.data(), p.y = (u8*)y.data(), p.rows = rows, p.k = k, p.y_stride = k;
  typedef void (*fn)(strata_dequant_args);
  static const fn f[] = {strata_dequant_f16_f32, strata_dequant_bf16_f32, strata_dequant_q80_f32, strata_dequant_q20_f32,
                         strata_dequant_q4k_f32, strata_dequant_q6k_f32, strata_dequant_iq2xs_f32, strata_dequant_iq3xxs_f32,
                         strata_dequant_iq3s_f32, strata_dequant_iq1m_f32};
  // One block of 256 threads, run thread by thread; the first pass fills the (static) LDS
  // tables completely, the second decodes with them.
  g_bdim = 256, g_gdim = 1, g_bx = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (u32 tx = 0; tx < 256; ++tx) g_tx = tx, f[t](p);
  }
  for (size_t i = 0; i < y.size(); ++i) printf("%a\n", (double)y[i]);
  switch (t) {
  case 2: groups<strata_qt_q80>(in.data(), act, rows, k); break;
  case 3: groups<strata_qt_q20>(in.data(), act, rows, k); break;
  case 4: groups<strata_qt_q4k>(in.data(), act, rows, k); break;
  case 5: groups<strata_qt_q6k>(in.data(), act, rows, k); break;
  case 6: groups<strata_qt_iq2xs>(in.data(), act, rows, k); break;
  case 7: groups<strata_qt_iq3xxs>(in.data(), act, rows, k); break;
  case 8: groups<strata_qt_iq3s>(in.data(), act, rows, k); break;
  case 9: groups<strata_qt_iq1m>(in.data(), act, rows, k); break;
  }
  return 0;
}
