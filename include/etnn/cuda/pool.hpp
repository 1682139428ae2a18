#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// 2-D max and average pooling on the device, with the CPU's semantics (cpu/pool.hpp): padding
// never wins a max, a window's gradient goes to the first input in scan order equal to its
// output, averages count padding. Forward computes each output in one thread, backward each
// input (grid-stride loops over them), gathering from the windows covering it in output order,
// as the CPU adds them: no atomics, the same sums in the same order.
#include <cstddef>
#include <limits>
#include <type_traits>

#include "../core/device.hpp"
#include "../expr/window.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

// The output rows (or columns) whose window covers input row ih: [first, last], possibly empty.
template <class G>
__host__ __device__ inline void covering(int in, int outs, int& first, int& last) {
  // in = o S - P + k for some k in [0, K)  <=>  (in + P - K + 1) / S <= o <= (in + P) / S
  const int low = in + G::pad - G::kernel + 1;
  first = low <= 0 ? 0 : (low + G::stride - 1) / G::stride;
  last = (in + G::pad) / G::stride;
  if (last > outs - 1) last = outs - 1;
}

// The max of window (oh, ow) of one plane, scanned as the CPU scans it.
template <class G, class T>
__device__ inline T window_max(const T* plane, int oh, int ow) {
  T max = -std::numeric_limits<T>::infinity();
  for (int ki = 0; ki < G::kernel; ++ki)
    for (int kj = 0; kj < G::kernel; ++kj) {
      const int ih = G::in_row(oh, ki), iw = G::in_col(ow, kj);
      if (!G::inside(ih, iw)) continue;
      const T v = plane[ih * G::width + iw];
      if (!(v <= max)) max = v;  // also takes a NaN
    }
  return max;
}

// The first input of window (oh, ow) in scan order equal to the window's output (its plane
// index), or -1: where the CPU routes the window's gradient.
template <class G, class T>
__device__ inline int first_equal(const T* plane, int oh, int ow, T value) {
  for (int ki = 0; ki < G::kernel; ++ki)
    for (int kj = 0; kj < G::kernel; ++kj) {
      const int ih = G::in_row(oh, ki), iw = G::in_col(ow, kj);
      if (G::inside(ih, iw) && plane[ih * G::width + iw] == value) return ih * G::width + iw;
    }
  return -1;
}

template <class G, class T>
__global__ void max_pool_forward_kernel(const T* x, T* y, std::size_t outputs) {
  for (const std::size_t i : grid_stride(outputs)) {
    const std::size_t plane = i / G::out_pixels;
    const int o = static_cast<int>(i % G::out_pixels);
    y[i] = window_max<G>(x + plane * G::in_pixels, o / G::out_width, o % G::out_width);
  }
}

// dx at input (plane, ih, iw) = sum of dy over the windows covering it, in output order: every
// window when averaging (times 1/K^2), only those whose first maximum it is for max pooling.
template <class G, bool Max, class T>
__global__ void pool_backward_kernel(const T* x, const T* y, const T* dy, T* dx, std::size_t inputs) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  for (const std::size_t i : grid_stride(inputs)) {
    const std::size_t plane = i / G::in_pixels;
    const int pixel = static_cast<int>(i % G::in_pixels), ih = pixel / G::width, iw = pixel % G::width;
    int oh_first, oh_last, ow_first, ow_last;
    covering<G>(ih, G::out_height, oh_first, oh_last);
    covering<G>(iw, G::out_width, ow_first, ow_last);
    T sum = 0;
    for (int oh = oh_first; oh <= oh_last; ++oh)
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const std::size_t o = plane * G::out_pixels + static_cast<std::size_t>(oh * G::out_width + ow);
        if constexpr (Max) {
          if (first_equal<G>(x + plane * G::in_pixels, oh, ow, y[o]) == pixel) sum += dy[o];
        } else {
          sum += scale * dy[o];
        }
      }
    dx[i] = sum;
  }
}

template <class G, class T>
__global__ void average_pool_forward_kernel(const T* x, T* y, std::size_t outputs) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  for (const std::size_t i : grid_stride(outputs)) {
    const std::size_t plane = i / G::out_pixels;
    const int o = static_cast<int>(i % G::out_pixels), oh = o / G::out_width, ow = o % G::out_width;
    T sum = 0;
    for (int ki = 0; ki < G::kernel; ++ki)
      for (int kj = 0; kj < G::kernel; ++kj) {
        const int ih = G::in_row(oh, ki), iw = G::in_col(ow, kj);
        if (G::inside(ih, iw)) sum += x[plane * G::in_pixels + ih * G::width + iw];
      }
    y[i] = sum * scale;
  }
}

template <class G>
std::size_t pool_outputs(int batch) {
  return static_cast<std::size_t>(batch) * G::channels * G::out_pixels;
}
template <class G>
std::size_t pool_inputs(int batch) {
  return static_cast<std::size_t>(batch) * G::channels * G::in_pixels;
}

}  // namespace cuda::detail

template <class G, class T>
void pool2d_forward(Cuda, expr::MaxPooling, const T* x, T* y, int batch) {
  const std::size_t n = cuda::detail::pool_outputs<G>(batch);
  if (n == 0) return;
  cuda::launch("etnn::pool2d_forward max", cuda::detail::max_pool_forward_kernel<G, T>, {cuda::grid_blocks(n), 256}, x,
               y, n);
}

template <class G, class T>
void pool2d_forward(Cuda, expr::AveragePooling, const T* x, T* y, int batch) {
  const std::size_t n = cuda::detail::pool_outputs<G>(batch);
  if (n == 0) return;
  cuda::launch("etnn::pool2d_forward average", cuda::detail::average_pool_forward_kernel<G, T>,
               {cuda::grid_blocks(n), 256}, x, y, n);
}

template <class G, class Kind, class T>
void pool2d_backward(Cuda, Kind, const T* x, const T* y, const T* dy, T* dx, int batch) {
  const std::size_t n = cuda::detail::pool_inputs<G>(batch);
  if (n == 0) return;
  constexpr bool max = std::is_same_v<Kind, expr::MaxPooling>;
  cuda::launch("etnn::pool2d_backward", cuda::detail::pool_backward_kernel<G, max, T>, {cuda::grid_blocks(n), 256}, x,
               y, dy, dx, n);
}

}  // namespace etnn
