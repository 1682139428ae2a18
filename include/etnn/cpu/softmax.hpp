#pragma once
// Softmax and log-softmax over each row of (B, N), on the CPU, shifted by the row maximum so that
// any finite input is safe.
//   softmax:      y = exp(x - m) / sum exp(x - m)        dx = y (.) (dy - <dy, y>)
//   log_softmax:  y = x - m - log sum exp(x - m)         dx = dy - exp(y) sum dy
// Backward may write dx over dy (in place). Rows run in parallel.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "parallel.hpp"

namespace etnn {

namespace cpu {
struct Softmax {};
struct LogSoftmax {};

template <int N, class F>
void for_each_row(int batch, F&& f) {
  parallel_chunks(static_cast<std::size_t>(batch), 1, 4 * N, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) f(r * N);
  });
}
}  // namespace cpu

template <int N, class Kind, class T>
void softmax_forward(Cpu, Kind, const T* x, T* y, int batch) {
  cpu::for_each_row<N>(batch, [&](std::size_t row) {
    const T* xr = x + row;
    T* yr = y + row;
    const T m = *std::max_element(xr, xr + N);
    T sum = 0;
    for (int j = 0; j < N; ++j) sum += std::exp(xr[j] - m);
    if constexpr (std::is_same_v<Kind, cpu::Softmax>) {
      const T inv = T(1) / sum;
      for (int j = 0; j < N; ++j) yr[j] = std::exp(xr[j] - m) * inv;
    } else {
      const T log_sum = std::log(sum);  // subtracted after m: m + log_sum would round at large |m|
      for (int j = 0; j < N; ++j) yr[j] = (xr[j] - m) - log_sum;
    }
  });
}

template <int N, class Kind, class T>
void softmax_backward(Cpu, Kind, const T* y, const T* dy, T* dx, int batch) {
  cpu::for_each_row<N>(batch, [&](std::size_t row) {
    const T* yr = y + row;
    const T* dyr = dy + row;
    T* dxr = dx + row;
    T sum = 0;
    if constexpr (std::is_same_v<Kind, cpu::Softmax>) {
      for (int j = 0; j < N; ++j) sum += dyr[j] * yr[j];
      for (int j = 0; j < N; ++j) dxr[j] = yr[j] * (dyr[j] - sum);
    } else {
      for (int j = 0; j < N; ++j) sum += dyr[j];
      for (int j = 0; j < N; ++j) dxr[j] = dyr[j] - std::exp(yr[j]) * sum;
    }
  });
}

}  // namespace etnn
