#pragma once
// 2-D max and average pooling on the CPU, one (b, c) plane at a time in parallel.
//   x: (B, C, H, W)  y: (B, C, OH, OW)   geometry G (cpu/window.hpp), padding is virtual
// Max:      y = max over the window (padding never wins, as PyTorch pads with -inf)
//           dx = dy routed to the window's first maximal input; backward finds it again by
//           comparing x with y in the forward's scan order, so nothing is saved
// Average:  y = sum over the window / K^2 (PyTorch's count_include_pad = true)
//           dx = dy / K^2 added to every input of the window
#include <algorithm>
#include <cstddef>
#include <limits>

#include "../core/device.hpp"
#include "parallel.hpp"
#include "window.hpp"

namespace etnn {

namespace cpu {

struct MaxPooling {};
struct AveragePooling {};

// Calls f(out_index, in_index) for every input pixel inside each output's window, windows in
// output order and pixels in row-major order within one.
template <class G, class F>
void for_each_window(F&& f) {
  for (int oh = 0; oh < G::out_height; ++oh) {
    for (int ow = 0; ow < G::out_width; ++ow) {
      const int out = oh * G::out_width + ow;
      for (int ki = 0; ki < G::kernel; ++ki) {
        const int ih = G::in_row(oh, ki);
        for (int kj = 0; kj < G::kernel; ++kj) {
          const int iw = G::in_col(ow, kj);
          if (G::inside(ih, iw)) f(out, ih * G::width + iw);
        }
      }
    }
  }
}

template <class G, class F>
void for_each_plane(int batch, F&& f) {
  const auto planes = static_cast<std::size_t>(batch) * G::channels;
  parallel_chunks(planes, 1, G::out_pixels * G::kernel * G::kernel, [&](std::size_t begin, std::size_t end) {
    for (std::size_t plane = begin; plane < end; ++plane) f(plane * G::in_pixels, plane * G::out_pixels);
  });
}

}  // namespace cpu

template <class G, class T>
void pool2d_forward(Cpu, cpu::MaxPooling, const T* x, T* y, int batch) {
  cpu::for_each_plane<G>(batch, [&](std::size_t in, std::size_t out) {
    T* yp = y + out;
    std::fill_n(yp, G::out_pixels, -std::numeric_limits<T>::infinity());
    // !(v <= m) also takes a NaN, which then stays: NaN propagates as in PyTorch.
    cpu::for_each_window<G>([&](int o, int i) {
      if (!(x[in + i] <= yp[o])) yp[o] = x[in + i];
    });
  });
}

template <class G, class T>
void pool2d_backward(Cpu, cpu::MaxPooling, const T* x, const T* y, const T* dy, T* dx, int batch) {
  cpu::for_each_plane<G>(batch, [&](std::size_t in, std::size_t out) {
    std::fill_n(dx + in, G::in_pixels, T(0));
    int routed = -1;  // the last output whose gradient went to an input
    cpu::for_each_window<G>([&](int o, int i) {
      if (o != routed && x[in + i] == y[out + o]) {
        dx[in + i] += dy[out + o];
        routed = o;
      }
    });
  });
}

template <class G, class T>
void pool2d_forward(Cpu, cpu::AveragePooling, const T* x, T* y, int batch) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  cpu::for_each_plane<G>(batch, [&](std::size_t in, std::size_t out) {
    T* yp = y + out;
    std::fill_n(yp, G::out_pixels, T(0));
    cpu::for_each_window<G>([&](int o, int i) { yp[o] += x[in + i]; });
    for (int o = 0; o < G::out_pixels; ++o) yp[o] *= scale;
  });
}

template <class G, class T>
void pool2d_backward(Cpu, cpu::AveragePooling, const T*, const T*, const T* dy, T* dx, int batch) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  cpu::for_each_plane<G>(batch, [&](std::size_t in, std::size_t out) {
    std::fill_n(dx + in, G::in_pixels, T(0));
    cpu::for_each_window<G>([&](int o, int i) { dx[in + i] += scale * dy[out + o]; });
  });
}

}  // namespace etnn
