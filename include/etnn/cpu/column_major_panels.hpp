#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Packing a column-major A (A(i, k) at a[k lda + i]: a dense layer's dZ^T in dW = dZ^T X) into
// the packed GEMM's panels, for every kernel set (cpu/avx512_kernels.hpp, cpu/avx2_kernels.hpp),
// which inline it into their own instruction set.
#include <algorithm>
#include <cstddef>
#include <cstring>

namespace etnn::cpu::packed {

// Rows [r0, r0 + rows) and depth [k0, k0 + kc) of a column-major A into panels of Mr rows:
// panel p holds A(r0 + Mr p + i, k0 + kk) at p Mr kc + kk Mr + i, rows past the end as zeros.
// Depths are taken a group of 8 at a time, and each group's panels in row order: the reads are 8
// runs along A's columns, which the group's panels share from L1, the writes 8 Mr values down one
// panel. Walking one panel's whole depth at a time steps down lda for every value, and at lda a
// multiple of 512 floats (gpt's 512-wide dZ) those lines fall in a few L1 sets and are evicted
// before the next panel reads them again. The copies are plain moves (a 16- and an 8-byte one
// for Mr = 6), not masked ones, which AMD's cores run many times slower.
template <int Mr>
[[gnu::always_inline]] inline void pack_column_major_a(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0,
                                                       int kc, float* out) {
  constexpr int group = 8;
  const int panels = (rows + Mr - 1) / Mr;
  for (int g = 0; g < kc; g += group) {
    const int depth = std::min(group, kc - g);
    const float* columns = a + static_cast<std::ptrdiff_t>(k0 + g) * lda + r0;
    for (int p = 0; p < panels; ++p) {
      const int valid = std::min(Mr, rows - p * Mr);
      float* panel = out + static_cast<std::ptrdiff_t>(p) * Mr * kc + static_cast<std::ptrdiff_t>(g) * Mr;
      for (int d = 0; d < depth; ++d) {
        const float* from = columns + d * lda + p * Mr;
        float* to = panel + d * Mr;
        if (valid == Mr) {
          std::memcpy(to, from, sizeof(float) * Mr);
        } else {
          std::copy_n(from, valid, to);
          std::fill(to + valid, to + Mr, 0.0f);
        }
      }
    }
  }
}

}  // namespace etnn::cpu::packed
