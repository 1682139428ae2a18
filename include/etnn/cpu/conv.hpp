#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// 2-D convolution with a fused activation on the CPU: im2col and one GEMM per sample.
//   x: (B, C, H, W)  W: (OUT, C, K, K) read as (OUT, D) with D = C K K  b: (OUT)  y: (B, OUT, OH, OW)
//   cols_b = im2col(x_b)                      (D, P) with P = OH OW, one row per (c, ki, kj)
// Forward:   Z_b = W cols_b + b,  Y_b = f(Z_b)        Y_b is (OUT, P): NCHW needs no transpose
// Backward:  dZ_b = dY_b (.) f'(Z_b, Y_b)             over dY in place
//            db += sum_{b,p} dZ_b,  dW += sum_b dZ_b cols_b^T
//            dX_b = col2im(W^T dZ_b)                  skipped for the first layer
// Samples run in parallel; the weight gradient is split by output channel instead (at GEMM panel
// boundaries), each summing the samples in order, so results do not depend on the number of
// threads. A thread converts one image at a time into columns of its own (D P values, reused), so
// they stay in its cache: a batch's columns would stream through memory twice per pass (LeNet-5's
// first layer: 5 MB at batch 64). Backward converts again rather than keeping them.
#include <algorithm>
#include <cstddef>
#include <utility>

#include "../core/device.hpp"
#include "epilogue.hpp"
#include "executor.hpp"
#include "gemm.hpp"
#include "parallel.hpp"
#include "thread_scratch.hpp"
#include "../expr/window.hpp"

namespace etnn {

namespace cpu {

// The output columns ow whose window column kj reads inside the image, [first, last): padding
// covers the others. Input column in_col(ow, kj) = ow S - pad + kj.
template <class G>
constexpr std::pair<int, int> inside_columns(int kj) {
  int first = 0, last = G::out_width;
  while (first < last && G::in_col(first, kj) < 0) ++first;
  while (last > first && G::in_col(last - 1, kj) >= G::width) --last;
  return {first, last};
}

// Calls f(k, i, first, last) for every run of one image's columns (D, P) that one window position
// (c, ki, kj) takes from one output row oh, in memory order: the run is cols[k .. k + OW), its
// entries first .. last - 1 read x[i], x[i + S], ... and the others (and all of it when i < 0,
// a padding row) are zeros. Runs, not entries, keep the bounds tests out of the inner loops.
template <class G, class F>
void for_each_column_run(F&& f) {
  std::size_t k = 0;
  for (int c = 0; c < G::channels; ++c)
    for (int ki = 0; ki < G::kernel; ++ki)
      for (int kj = 0; kj < G::kernel; ++kj) {
        const auto [first, last] = inside_columns<G>(kj);
        for (int oh = 0; oh < G::out_height; ++oh, k += G::out_width) {
          const int ih = G::in_row(oh, ki);
          const bool row_inside = ih >= 0 && ih < G::height && first < last;
          f(k, row_inside ? static_cast<std::ptrdiff_t>(c * G::in_pixels + ih * G::width + G::in_col(first, kj)) : -1,
            first, last);
        }
      }
}

// cols (D, P) from one image x (C, H, W); zeros where the window covers padding.
template <class G, class T>
void im2col(const T* x, T* cols) {
  for_each_column_run<G>([&](std::size_t k, std::ptrdiff_t i, int first, int last) {
    T* run = cols + k;
    if (i < 0) {
      std::fill_n(run, G::out_width, T(0));
      return;
    }
    std::fill_n(run, first, T(0));
    for (int ow = first; ow < last; ++ow) run[ow] = x[i + (ow - first) * G::stride];
    std::fill(run + last, run + G::out_width, T(0));
  });
}

// dx (C, H, W) = the sum of cols (D, P) back onto the pixels each column entry came from, added
// in column order.
template <class G, class T>
void col2im(const T* cols, T* dx) {
  std::fill_n(dx, static_cast<std::size_t>(G::channels) * G::in_pixels, T(0));
  for_each_column_run<G>([&](std::size_t k, std::ptrdiff_t i, int first, int last) {
    if (i < 0) return;
    const T* run = cols + k;
    for (int ow = first; ow < last; ++ow) dx[i + (ow - first) * G::stride] += run[ow];
  });
}

}  // namespace cpu

// The GPU's batch columns are not used here (the layer asks for none on the CPU).
template <class G, int Out, class Act, class T>
void conv2d_forward(Cpu, const T* weight, const T* bias, const T* x, T* y, T* z_saved, T* /*batch columns*/,
                    int batch, Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, cols_size = depth * pixels, out_size = Out * pixels;
  cpu::parallel_chunks(static_cast<std::size_t>(batch), 1, out_size * depth, [&](std::size_t begin, std::size_t end) {
    T* cols = cpu::thread_scratch<T>(cols_size);
    for (std::size_t b = begin; b < end; ++b) {
      T* yb = y + b * out_size;
      cpu::im2col<G>(x + b * G::channels * G::in_pixels, cols);
      // Y_b = f(W cols_b + b), the bias per output channel (row)
      cpu::gemm_serial<cpu::Layout::row_major, cpu::Layout::row_major>(
          cpu::Accumulate::no, Out, int{pixels}, depth, weight, depth, cols, int{pixels}, yb, int{pixels},
          cpu::BiasActivation<cpu::BiasAlong::rows, Act, T>{yb, z_saved != nullptr ? z_saved + b * out_size : nullptr,
                                                            bias, std::ptrdiff_t{pixels}, act});
    }
  });
}

template <class G, int Out, class Act, class T>
void conv2d_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* z_saved,
                     T* dy, T* dx, T* /*batch columns*/, int batch, Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, cols_size = depth * pixels, out_size = Out * pixels;
  const auto samples = static_cast<std::size_t>(batch);
  // Per output channel range (whole GEMM panels, see gemm.hpp), samples in order: dZ_b over dY_b
  // for these channels, db, and dW += dZ_b cols_b^T (cols_b^T is cols_b read column-major).
  cpu::parallel_panels(std::size_t{Out}, cpu::gemm_row_panel<T>, 1, samples * pixels * depth,
                       [&](std::size_t begin, std::size_t end) {
    const int first = static_cast<int>(begin), count = static_cast<int>(end - begin);
    T* cols = cpu::thread_scratch<T>(cols_size);
    for (std::size_t b = 0; b < samples; ++b) {
      const std::size_t channels_at = b * out_size + begin * pixels;
      T* dz = dy + channels_at;
      cpu::activation_gradient(dz, y + channels_at, z_saved != nullptr ? z_saved + channels_at : nullptr,
                               static_cast<std::size_t>(count) * pixels, act);
      for (int o = 0; o < count; ++o) {
        T sum = 0;
        for (std::size_t p = 0; p < pixels; ++p) sum += dz[static_cast<std::size_t>(o) * pixels + p];
        bias_grad[first + o] += sum;
      }
      cpu::im2col<G>(x + b * G::channels * G::in_pixels, cols);
      cpu::gemm_serial<cpu::Layout::row_major, cpu::Layout::col_major>(
          cpu::Accumulate::yes, count, depth, int{pixels}, dz, int{pixels}, cols, int{pixels}, weight_grad + begin * depth, depth);
    }
  });
  if (dx == nullptr) return;
  // dcols_b = W^T dZ_b (W^T is W read column-major), then dX_b = col2im(dcols_b).
  cpu::parallel_chunks(samples, 1, out_size * depth, [&](std::size_t begin, std::size_t end) {
    T* dcols = cpu::thread_scratch<T>(cols_size);
    for (std::size_t b = begin; b < end; ++b) {
      cpu::gemm_serial<cpu::Layout::col_major, cpu::Layout::row_major>(
          cpu::Accumulate::no, depth, int{pixels}, Out, weight, depth, dy + b * out_size, int{pixels}, dcols, int{pixels});
      cpu::col2im<G>(dcols, dx + b * G::channels * G::in_pixels);
    }
  });
}

}  // namespace etnn
