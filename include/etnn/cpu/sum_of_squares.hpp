#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The sum of squares of a buffer on the host, in double: the global gradient norm
// (optim/grad_norm.hpp) reads it; cuda/reduce.hpp has the device's.
#include <algorithm>
#include <array>
#include <cstddef>

#include "parallel.hpp"

namespace etnn::cpu::detail {

// sum_i x_i^2 for i < n, accumulated in double in one pass. Chunk c of the threads' chunks sums its
// range, and the chunk sums are added in order: the same value for the same thread count.
template <class T>
double sum_of_squares(const T* x, std::size_t n) {
  constexpr std::size_t max_chunks = 64;
  const std::size_t chunks =
      std::min(max_chunks, chunk_count(n, 4096, static_cast<std::size_t>(num_threads())));
  std::array<double, max_chunks> partial{};
  parallel_chunks(chunks, 1, n / chunks, [&](std::size_t first, std::size_t last) {
    for (std::size_t c = first; c < last; ++c) {
      const ChunkBounds range = chunk_bounds(n, chunks, c);
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

}  // namespace etnn::cpu::detail
