#pragma once
// 2-D convolution with a fused activation on the CPU: im2col and one GEMM per sample.
//   x: (B, C, H, W)  W: (OUT, C, K, K) read as (OUT, D) with D = C K K  b: (OUT)  y: (B, OUT, OH, OW)
//   cols_b = im2col(x_b)                      (D, P) with P = OH OW, one row per (c, ki, kj)
// Forward:   Z_b = W cols_b + b,  Y_b = f(Z_b)        Y_b is (OUT, P): NCHW needs no transpose
// Backward:  dZ_b = dY_b (.) f'(Z_b, Y_b)             over dY in place
//            db += sum_{b,p} dZ_b,  dW += sum_b dZ_b cols_b^T
//            dX_b = col2im(W^T dZ_b)                  skipped for the first layer
// Samples run in parallel; the weight gradient is split by output channel instead (at GEMM panel
// boundaries), each summing the samples in order, so results do not depend on the number of
// threads. `columns` is scratch of B D P values.
#include <algorithm>
#include <cstddef>

#include "../core/device.hpp"
#include "epilogue.hpp"
#include "executor.hpp"
#include "gemm.hpp"
#include "parallel.hpp"
#include "window.hpp"

namespace etnn {

namespace cpu {

// Calls f(k, i) for every entry k of one image's columns (D, P) in memory order, row (c, ki, kj)
// by row, column (oh, ow) within a row, with i the input element it reads (c H W + ih W + iw), or
// -1 where the window covers padding.
template <class G, class F>
void for_each_column_entry(F&& f) {
  std::size_t k = 0;
  for (int c = 0; c < G::channels; ++c)
    for (int ki = 0; ki < G::kernel; ++ki)
      for (int kj = 0; kj < G::kernel; ++kj)
        for (int oh = 0; oh < G::out_height; ++oh)
          for (int ow = 0; ow < G::out_width; ++ow, ++k) {
            const int ih = G::in_row(oh, ki), iw = G::in_col(ow, kj);
            f(k, G::inside(ih, iw) ? static_cast<std::ptrdiff_t>(c * G::in_pixels + ih * G::width + iw) : -1);
          }
}

// cols (D, P) from one image x (C, H, W); zeros where the window covers padding.
template <class G, class T>
void im2col(const T* x, T* cols) {
  for_each_column_entry<G>([&](std::size_t k, std::ptrdiff_t i) { cols[k] = i < 0 ? T(0) : x[i]; });
}

// dx (C, H, W) = the sum of cols (D, P) back onto the pixels each column entry came from.
template <class G, class T>
void col2im(const T* cols, T* dx) {
  std::fill_n(dx, static_cast<std::size_t>(G::channels) * G::in_pixels, T(0));
  for_each_column_entry<G>([&](std::size_t k, std::ptrdiff_t i) {
    if (i >= 0) dx[i] += cols[k];
  });
}

}  // namespace cpu

template <class G, int Out, class Act, class T>
void conv2d_forward(Cpu, const T* weight, const T* bias, const T* x, T* y, T* z_saved, T* columns, int batch,
                    Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, cols_size = depth * pixels, out_size = Out * pixels;
  cpu::parallel_chunks(static_cast<std::size_t>(batch), 1, out_size * depth, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      T* cols = columns + b * cols_size;
      T* yb = y + b * out_size;
      cpu::im2col<G>(x + b * G::channels * G::in_pixels, cols);
      for (int o = 0; o < Out; ++o) std::fill_n(yb + o * pixels, pixels, bias[o]);
      cpu::gemm_accumulate_serial<cpu::Layout::row_major, cpu::Layout::row_major>(Out, int{pixels}, depth, weight,
                                                                                  depth, cols, int{pixels}, yb,
                                                                                  int{pixels});
      cpu::activation_epilogue(yb, z_saved != nullptr ? z_saved + b * out_size : nullptr, out_size, act);
    }
  });
}

template <class G, int Out, class Act, class T>
void conv2d_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* z_saved,
                     T* dy, T* dx, T* columns, int batch, Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, cols_size = depth * pixels, out_size = Out * pixels;
  const auto samples = static_cast<std::size_t>(batch);
  // cols_b and dZ_b, per sample.
  cpu::parallel_chunks(samples, 1, cols_size, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      cpu::im2col<G>(x + b * G::channels * G::in_pixels, columns + b * cols_size);
      cpu::activation_gradient(dy + b * out_size, y + b * out_size,
                               z_saved != nullptr ? z_saved + b * out_size : nullptr, out_size, act);
    }
  });
  // db and dW += dZ_b cols_b^T per output channel range (whole GEMM panels, see gemm.hpp);
  // cols_b^T is cols_b read column-major.
  cpu::parallel_panels(std::size_t{Out}, cpu::gemm_row_panel<T>, 1, samples * pixels * depth,
                       [&](std::size_t begin, std::size_t end) {
    const int first = static_cast<int>(begin), count = static_cast<int>(end - begin);
    for (std::size_t b = 0; b < samples; ++b) {
      const T* dz = dy + b * out_size + begin * pixels;
      for (int o = 0; o < count; ++o) {
        T sum = 0;
        for (std::size_t p = 0; p < pixels; ++p) sum += dz[static_cast<std::size_t>(o) * pixels + p];
        bias_grad[first + o] += sum;
      }
      cpu::gemm_accumulate_serial<cpu::Layout::row_major, cpu::Layout::col_major>(
          count, depth, int{pixels}, dz, int{pixels}, columns + b * cols_size, int{pixels},
          weight_grad + begin * depth, depth);
    }
  });
  if (dx == nullptr) return;
  // dcols_b = W^T dZ_b (W^T is W read column-major) over cols_b, then dX_b = col2im(dcols_b).
  cpu::parallel_chunks(samples, 1, out_size * depth, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      T* dcols = columns + b * cols_size;
      std::fill_n(dcols, cols_size, T(0));
      cpu::gemm_accumulate_serial<cpu::Layout::col_major, cpu::Layout::row_major>(
          depth, int{pixels}, Out, weight, depth, dy + b * out_size, int{pixels}, dcols, int{pixels});
      cpu::col2im<G>(dcols, dx + b * G::channels * G::in_pixels);
    }
  });
}

}  // namespace etnn
