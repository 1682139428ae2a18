#pragma once
// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2):
//   norm  = sqrt(sum_i g_i^2)                       g: the mean gradient over ranks, all parameters
//   scale = min(max_norm / (norm + 1e-6), 1)        multiplies every g_i (NaN when norm is NaN, as torch)
// The optimizer folds `scale` into the gradient scale of its fused update, so clipping costs one
// read of the gradients (the norm) and no extra write.
#include <algorithm>
#include <array>
#include <cstddef>

#include "../core/device.hpp"
#include "../cpu/parallel.hpp"

namespace etnn::optim::detail {

// sum_i x_i^2 for i < n, accumulated in double in one pass. Chunk c of the threads' chunks sums its
// range, and the chunk sums are added in order: the same value for the same thread count.
template <class T>
double sum_of_squares(Cpu, const T* x, std::size_t n) {
  constexpr std::size_t max_chunks = 64;
  const std::size_t chunks =
      std::min(max_chunks, cpu::chunk_count(n, 4096, static_cast<std::size_t>(num_threads())));
  std::array<double, max_chunks> partial{};
  cpu::parallel_chunks(chunks, 1, n / chunks, [&](std::size_t first, std::size_t last) {
    for (std::size_t c = first; c < last; ++c) {
      const cpu::ChunkBounds range = cpu::chunk_bounds(n, chunks, c);
      std::array<double, 4> lanes{};  // independent sums: the adds pipeline
      std::size_t i = range.begin;
      for (; i + 4 <= range.end; i += 4)
        for (std::size_t k = 0; k < 4; ++k) lanes[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
      for (; i < range.end; ++i) lanes[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      partial[c] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    }
  });
  double total = 0.0;
  for (std::size_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

// clip_grad_norm_'s factor for a gradient of global norm `norm`.
inline double clip_scale(double max_norm, double norm) { return std::min(max_norm / (norm + 1e-6), 1.0); }

}  // namespace etnn::optim::detail
