#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// 2-D max and average pooling on the CPU, one (b, c) plane at a time in parallel.
//   x: (B, C, H, W)  y: (B, C, OH, OW)   geometry G (expr/window.hpp), padding is virtual
// Max:      y = max over the window (padding never wins, as PyTorch pads with -inf)
//           dx = dy routed to the window's first maximal input; backward finds it again by
//           comparing x with y in the forward's scan order, so nothing is saved
// Average:  y = sum over the window / K^2 (PyTorch's count_include_pad = true)
//           dx = dy / K^2 added to every input of the window
#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>

#include "../core/device.hpp"
#include "parallel.hpp"
#include "../expr/window.hpp"

namespace etnn {

namespace cpu {

// Calls f(out, inputs, count) for every output pixel of output rows [first_row, last_row) in
// order, with inputs[0 .. count) the input pixels inside its window, row-major (padding left out).
// The window is clamped to the image once per output (never without padding, so that the count
// is known at compile time) rather than testing each pixel, and its indices are gathered first,
// so that f's loop over them keeps its state in registers (measured: 4x faster than visiting each
// pixel through a callback).
template <class G, class F>
void for_each_window(F&& f, int first_row = 0, int last_row = G::out_height) {
  constexpr bool clamp = G::pad > 0;  // without padding every window lies inside the image
  std::array<int, G::kernel * G::kernel> inputs;
  for (int oh = first_row; oh < last_row; ++oh) {
    const int top = G::in_row(oh, 0);
    const int row_begin = clamp ? std::max(top, 0) : top;
    const int row_end = clamp ? std::min(top + G::kernel, G::height) : top + G::kernel;
    for (int ow = 0; ow < G::out_width; ++ow) {
      const int left = G::in_col(ow, 0);
      const int col_begin = clamp ? std::max(left, 0) : left;
      const int col_end = clamp ? std::min(left + G::kernel, G::width) : left + G::kernel;
      int count = 0;
      for (int row = row_begin; row < row_end; ++row)
        for (int col = col_begin; col < col_end; ++col) inputs[count++] = row * G::width + col;
      f(oh * G::out_width + ow, inputs.data(), count);
    }
  }
}

// Calls f(x, y) with the input and output planes of every (b, c), planes in parallel.
template <class G, class X, class Y, class F>
void for_each_plane(X* x, Y* y, int batch, F&& f) {
  const auto planes = static_cast<std::size_t>(batch) * G::channels;
  parallel_chunks(planes, 1, G::out_pixels * G::kernel * G::kernel, [&](std::size_t begin, std::size_t end) {
    for (std::size_t plane = begin; plane < end; ++plane) f(x + plane * G::in_pixels, y + plane * G::out_pixels);
  });
}

}  // namespace cpu

template <class G, class T>
void pool2d_forward(Cpu, expr::MaxPooling, const T* x, T* y, int batch) {
  cpu::for_each_plane<G>(x, y, batch, [](const T* xp, T* yp) {
    cpu::for_each_window<G>([&](int o, const int* inputs, int count) {
      // !(v <= m) also takes a NaN, which then stays: NaN propagates as in PyTorch.
      T m = -std::numeric_limits<T>::infinity();
      for (int n = 0; n < count; ++n) m = !(xp[inputs[n]] <= m) ? xp[inputs[n]] : m;
      yp[o] = m;
    });
  });
}

// Each output's gradient goes to the first input of its window equal to its maximum (none for a
// NaN maximum, which equals no input). That comparison is unpredictable, so the inputs are chosen
// for a block of output rows first, by masks, and routed after, in output order.
template <class G, class T>
void pool2d_backward(Cpu, expr::MaxPooling, const T* x, const T* y, const T* dy, T* dx, int batch) {
  constexpr int block_rows = std::max(1, 1024 / G::out_width);
  cpu::for_each_plane<G>(dx, y, batch, [&](T* dxp, const T* yp) {
    const T* xp = x + (dxp - dx);
    const T* dyp = dy + (yp - y);
    std::array<int, block_rows * G::out_width> routed_to;  // input of each output in the block, or -1
    std::fill_n(dxp, G::in_pixels, T(0));
    for (int row = 0; row < G::out_height; row += block_rows) {
      const int block_begin = row * G::out_width, last_row = std::min(G::out_height, row + block_rows);
      cpu::for_each_window<G>([&](int o, const int* inputs, int count) {
        int pick = -1;
        for (int n = count; n-- > 0;) {  // from the back: the first equal input is chosen last
          const int take = -static_cast<int>(xp[inputs[n]] == yp[o]);  // all ones or zero: no branch
          pick = (inputs[n] & take) | (pick & ~take);
        }
        routed_to[o - block_begin] = pick;
      }, row, last_row);
      for (int o = block_begin; o < last_row * G::out_width; ++o)
        if (routed_to[o - block_begin] >= 0) dxp[routed_to[o - block_begin]] += dyp[o];
    }
  });
}

template <class G, class T>
void pool2d_forward(Cpu, expr::AveragePooling, const T* x, T* y, int batch) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  cpu::for_each_plane<G>(x, y, batch, [](const T* xp, T* yp) {
    cpu::for_each_window<G>([&](int o, const int* inputs, int count) {
      T sum = 0;
      for (int n = 0; n < count; ++n) sum += xp[inputs[n]];
      yp[o] = sum * scale;
    });
  });
}

template <class G, class T>
void pool2d_backward(Cpu, expr::AveragePooling, const T*, const T*, const T* dy, T* dx, int batch) {
  constexpr T scale = T(1) / T(G::kernel * G::kernel);
  cpu::for_each_plane<G>(dx, dy, batch, [](T* dxp, const T* dyp) {
    std::fill_n(dxp, G::in_pixels, T(0));
    cpu::for_each_window<G>([&](int o, const int* inputs, int count) {
      for (int n = 0; n < count; ++n) dxp[inputs[n]] += scale * dyp[o];
    });
  });
}

}  // namespace etnn
