#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Packing a row-major B (B(k, j) at b[k ldb + j]) into the packed GEMM's panels, for every kernel
// set (cpu/avx512_kernels.hpp, cpu/avx2_kernels.hpp), which inline it into their own instruction set.
#include <algorithm>
#include <cstddef>
#include <cstring>

namespace etnn::cpu::packed {

// Depth [k0, k0 + kc) and columns [c0, c0 + cols) of a row-major B into panels of Nr columns:
// panel q holds B(k0 + kk, c0 + Nr q + j) at q kc Nr + kk Nr + j, columns past the end as zeros
// up to the end of their vector of Lanes (the register tiles read no vector past the last column).
// Rows are taken a group of 8 at a time, and each group's panels in column order: the reads are 8
// streams along B's rows, the writes one stream down a panel. Walking a whole panel's depth at a
// time steps down ldb for every row, and at ldb a multiple of 4 KiB (wide's 2048 floats) all those
// rows' lines fall in one L1 set and evict one another before the next panel's columns reuse them
// (a fifth of the dX product, 256 x 2048 x 2048, went to packing B that way).
template <int Nr, int Lanes>
[[gnu::always_inline]] inline void pack_row_major_b(const float* b, std::ptrdiff_t ldb, int k0, int kc, int c0,
                                                    int cols, float* out) {
  constexpr int group = 8;
  for (int g = 0; g < kc; g += group) {
    const int depth = std::min(group, kc - g);
    const float* rows = b + static_cast<std::ptrdiff_t>(k0 + g) * ldb + c0;
    for (int q = 0; q * Nr < cols; ++q) {
      const int width = std::min(Nr, cols - q * Nr);
      const int padded = (width + Lanes - 1) / Lanes * Lanes;
      float* panel = out + static_cast<std::ptrdiff_t>(q) * kc * Nr + static_cast<std::ptrdiff_t>(g) * Nr;
      for (int d = 0; d < depth; ++d) {
        const float* from = rows + d * ldb + q * Nr;
        float* to = panel + d * Nr;
        if (width == Nr) {
          std::memcpy(to, from, sizeof(float) * Nr);
        } else {
          std::copy_n(from, width, to);
          std::fill(to + width, to + padded, 0.0f);
        }
      }
    }
  }
}

}  // namespace etnn::cpu::packed
