#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::softmax and nn::log_softmax over a flat input: PyTorch's nn.Softmax(dim=1) and
// nn.LogSoftmax(dim=1), each row shifted by its maximum m so that any finite input is safe.
//   x, y: (B, N)
//   softmax:      y = exp(x - m) / sum exp(x - m)        dx = y (.) (dy - <dy, y>)
//   log_softmax:  y = x - m - log sum exp(x - m)         dx = dy - exp(y) sum dy
// The row math is one ETNN_HD functor for both devices: host threads split the rows, the device
// runs a thread per row. Backward may write dx over dy (in place).
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../core/config.hpp"
#include "checks.hpp"
#include "../backend/executor.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {
struct Probabilities {};     // softmax
struct LogProbabilities {};  // log_softmax

// y's row r from x's.
template <int N, class Kind, class T>
struct SoftmaxRows {
  const T* x;
  T* y;
  ETNN_HD void operator()(std::size_t r) const {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    T m = xr[0];
    for (int j = 1; j < N; ++j) m = xr[j] > m ? xr[j] : m;
    T sum = 0;
    for (int j = 0; j < N; ++j) sum += std::exp(xr[j] - m);
    if constexpr (std::is_same_v<Kind, Probabilities>) {
      const T inv = T(1) / sum;
      for (int j = 0; j < N; ++j) yr[j] = std::exp(xr[j] - m) * inv;
    } else {
      const T log_sum = std::log(sum);  // subtracted after m: m + log_sum would round at large |m|
      for (int j = 0; j < N; ++j) yr[j] = (xr[j] - m) - log_sum;
    }
  }
};

// dx's row r from y's and dy's; dx may be dy.
template <int N, class Kind, class T>
struct SoftmaxGradientRows {
  const T* y;
  const T* dy;
  T* dx;
  ETNN_HD void operator()(std::size_t r) const {
    const T* yr = y + r * N;
    const T* dyr = dy + r * N;
    T* dxr = dx + r * N;
    T sum = 0;
    if constexpr (std::is_same_v<Kind, Probabilities>) {
      for (int j = 0; j < N; ++j) sum += dyr[j] * yr[j];
      for (int j = 0; j < N; ++j) dxr[j] = yr[j] * (dyr[j] - sum);
    } else {
      for (int j = 0; j < N; ++j) sum += dyr[j];
      for (int j = 0; j < N; ++j) dxr[j] = dyr[j] - std::exp(yr[j]) * sum;
    }
  }
};
}  // namespace detail

template <ShapeType In, class Kind, int Index>
struct SoftmaxLayer : InPlaceLayer<In, Index> {
  static_assert(check::softmax_input<In>());
  static constexpr int width = static_cast<int>(In::size);
  static constexpr bool cuda_kernels = true;  // the row functors on the device

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    for_each_index(device, static_cast<std::size_t>(batch), 4 * width, detail::SoftmaxRows<width, Kind, T>{x, y});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T*, const T*, const T* y, const T*, T* dy, T* dx,
                       int batch) {
    for_each_index(device, static_cast<std::size_t>(batch), 4 * width,
                 detail::SoftmaxGradientRows<width, Kind, T>{y, dy, dx});
  }
};

}  // namespace etnn::nn
