#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// lane_sum<N, Acc>(f) = sum_{j < N} f(j), summed in `sum_lanes` interleaved partial sums
// (partial l takes j = l, l + 8, l + 16, ... of the whole groups of 8; the last N mod 8 terms go
// to partials 0 .. N mod 8 - 1), which are then added in lane order. The order is fixed by N
// alone, so the result is the same on every thread count, and the loop over a group is one
// vector operation: a row's reduction is not one long chain of dependent adds, and the compiler
// vectorises it without reassociating (which it may not do under strict IEEE semantics).
#include "config.hpp"

namespace etnn::detail {

inline constexpr int sum_lanes = 8;

template <int N, class Acc, class F>
ETNN_INLINE ETNN_HD Acc lane_sum(const F& f) {
  constexpr int body = N / sum_lanes * sum_lanes;
  Acc part[sum_lanes] = {};
  for (int j = 0; j < body; j += sum_lanes) {
    ETNN_SIMD
    for (int l = 0; l < sum_lanes; ++l) part[l] += f(j + l);
  }
  for (int j = body; j < N; ++j) part[j - body] += f(j);
  Acc sum = part[0];
  for (int l = 1; l < sum_lanes; ++l) sum += part[l];
  return sum;
}

}  // namespace etnn::detail
