#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The packed GEMM's panels that plain copies fill, for every kernel set (cpu/avx512_kernels.hpp,
// cpu/avx2_kernels.hpp), which inline them into their own instruction set: a row-major B
// (B(k, j) at b[k ldb + j]) and a column-major A (A(i, k) at a[k lda + i]: a dense layer's dZ^T in
// dW = dZ^T X): both are runs of a panel's width along rows of memory. The copies are plain
// moves, not masked ones, which AMD's cores run many times slower.
#include <algorithm>
#include <cstddef>
#include <cstring>

namespace etnn::cpu::packed {

// Panels of Width values taken from runs along the rows of memory (row k at src + k ld): panel q
// holds src(k0 + kk, Width q + j) at q kc Width + kk Width + j for Width q + j < extent, and zeros
// after the last value up to a multiple of Padding. Rows are taken a group of 8 at a time, and
// each group's panels in order: the reads are 8 streams along the rows, the writes one stream
// down a panel. Walking one panel's whole depth at a time steps down ld for every value, and at
// ld a multiple of 2 KiB (wide's 2048-float W, gpt's 512-wide dZ) those rows' lines fall in a few
// L1 sets and evict one another before the next panel reads them again (a fifth of wide's dX
// product, 256 x 2048 x 2048, went to packing B that way).
template <int Width, int Padding>
[[gnu::always_inline]] inline void pack_row_runs(const float* src, std::ptrdiff_t ld, int k0, int kc, int extent,
                                                 float* out) {
  constexpr int group = 8;
  for (int g = 0; g < kc; g += group) {
    const int depth = std::min(group, kc - g);
    const float* rows = src + static_cast<std::ptrdiff_t>(k0 + g) * ld;
    for (int q = 0; q * Width < extent; ++q) {
      const int valid = std::min(Width, extent - q * Width);
      const int padded = (valid + Padding - 1) / Padding * Padding;
      float* panel = out + static_cast<std::ptrdiff_t>(q) * kc * Width + static_cast<std::ptrdiff_t>(g) * Width;
      for (int d = 0; d < depth; ++d) {
        const float* from = rows + d * ld + q * Width;
        float* to = panel + d * Width;
        if (valid == Width) {  // a constant size: a few moves
          std::memcpy(to, from, sizeof(float) * Width);
        } else {
          std::copy_n(from, valid, to);
          std::fill(to + valid, to + padded, 0.0f);
        }
      }
    }
  }
}

// Depth [k0, k0 + kc) and columns [c0, c0 + cols) of a row-major B into panels of Nr columns:
// panel q holds B(k0 + kk, c0 + Nr q + j) at q kc Nr + kk Nr + j, columns past the end as zeros
// up to the end of their vector of Lanes (the register tiles read no vector past the last column).
template <int Nr, int Lanes>
[[gnu::always_inline]] inline void pack_row_major_b(const float* b, std::ptrdiff_t ldb, int k0, int kc, int c0,
                                                    int cols, float* out) {
  pack_row_runs<Nr, Lanes>(b + c0, ldb, k0, kc, cols, out);
}

// Rows [r0, r0 + rows) and depth [k0, k0 + kc) of a column-major A into panels of Mr rows:
// panel p holds A(r0 + Mr p + i, k0 + kk) at p Mr kc + kk Mr + i, rows past the end as zeros.
template <int Mr>
[[gnu::always_inline]] inline void pack_column_major_a(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0,
                                                       int kc, float* out) {
  pack_row_runs<Mr, Mr>(a + r0, lda, k0, kc, rows, out);
}

}  // namespace etnn::cpu::packed
