#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The CPU scan behind the non-finite guard: where a buffer holds a NaN or an infinity, in one read
// of it. A float is NaN or infinite exactly when its exponent bits are all ones, the largest value
// they can take; so the buffer is finite exactly when the maximum of its masked exponents is below
// that. An integer maximum may be taken in any order, so it vectorises (a floating-point sum would
// be kept in order by the compiler, and isfinite branches).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../core/config.hpp"
#include "parallel.hpp"

namespace etnn::cpu::detail {

// Whether x[0 .. n) are all finite: max_i (bits(x_i) & exponent) < exponent.
template <class T>
bool all_finite(const T* x, std::size_t n) {
  static_assert(std::numeric_limits<T>::is_iec559 && (sizeof(T) == 4 || sizeof(T) == 8));
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr Bits exponent = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  Bits largest = 0;
  ETNN_SIMD_REDUCTION(max, largest)
  for (std::size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, x + i, sizeof bits);
    largest = std::max(largest, bits & exponent);
  }
  return largest < exponent;
}

// The largest i in range with x[i] NaN or infinite (there is one).
template <class T>
std::size_t last_non_finite_in(const T* x, ChunkBounds range) {
  std::size_t i = range.end;
  while (i-- > range.begin)
    if (!std::isfinite(x[i])) return i;
  return range.end;
}

// The largest i < n with x[i] NaN or infinite; n when every value is finite. Chunk c of the
// threads' chunks tests its range in one pass and, only when the test fails, looks back for the
// index; the result does not depend on the thread count.
template <class T>
std::size_t last_non_finite(const T* x, std::size_t n) {
  constexpr std::size_t max_chunks = 64;
  const std::size_t chunks = std::min(max_chunks, chunk_count(n, 4096, static_cast<std::size_t>(num_threads())));
  std::array<std::size_t, max_chunks> found{};
  parallel_chunks(chunks, 1, n / chunks, [&](std::size_t first, std::size_t last) {
    for (std::size_t c = first; c < last; ++c) {
      const ChunkBounds range = chunk_bounds(n, chunks, c);
      found[c] = all_finite(x + range.begin, range.end - range.begin) ? n : last_non_finite_in(x, range);
    }
  });
  for (std::size_t c = chunks; c-- > 0;)
    if (found[c] != n) return found[c];
  return n;
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(const T* x, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i)
    if (!std::isfinite(x[i])) return i;
  return end;
}

}  // namespace etnn::cpu::detail
