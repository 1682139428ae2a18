#pragma once
// The scan behind the Trainer's non-finite guard: where a gradient buffer holds a NaN or an
// infinity, in one read of it. x - x is +0 for a finite x and NaN for a NaN or an infinity, so a
// sum of x - x is 0 exactly when every x is finite; summed in independent lanes it vectorises
// (about 20 GB/s on one core), where an elementwise isfinite does not.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "../cpu/parallel.hpp"

namespace etnn::optim::detail {

// Whether x[0 .. n) are all finite: sum_i (x_i - x_i) == 0, in lanes.
template <class T>
bool all_finite(const T* x, std::size_t n) {
  constexpr std::size_t lanes = 32 / sizeof(T);
  T sum[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t k = 0; k < lanes; ++k) sum[k] += x[i + k] - x[i + k];
  T total = 0;
  for (; i < n; ++i) total += x[i] - x[i];
  for (std::size_t k = 0; k < lanes; ++k) total += sum[k];
  return total == T(0);
}

// The largest i in range with x[i] NaN or infinite (there is one).
template <class T>
std::size_t last_non_finite_in(const T* x, cpu::ChunkBounds range) {
  std::size_t i = range.end;
  while (i-- > range.begin)
    if (!std::isfinite(x[i])) return i;
  return range.end;
}

// The largest i < n with x[i] NaN or infinite; n when every value is finite. Chunk c of the
// threads' chunks tests its range in one pass and, only when the test fails, looks back for the
// index; the result does not depend on the thread count.
template <class T>
std::size_t last_non_finite(Cpu, const T* x, std::size_t n) {
  constexpr std::size_t max_chunks = 64;
  const std::size_t chunks =
      std::min(max_chunks, cpu::chunk_count(n, 4096, static_cast<std::size_t>(num_threads())));
  std::array<std::size_t, max_chunks> found{};
  cpu::parallel_chunks(chunks, 1, n / chunks, [&](std::size_t first, std::size_t last) {
    for (std::size_t c = first; c < last; ++c) {
      const cpu::ChunkBounds range = cpu::chunk_bounds(n, chunks, c);
      found[c] = all_finite(x + range.begin, range.end - range.begin) ? n : last_non_finite_in(x, range);
    }
  });
  for (std::size_t c = chunks; c-- > 0;)
    if (found[c] != n) return found[c];
  return n;
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(Cpu, const T* x, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i)
    if (!std::isfinite(x[i])) return i;
  return end;
}

}  // namespace etnn::optim::detail
