#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// 2-D convolution with a fused activation on the CPU: im2col and one GEMM per sample.
//   x: (B, C, H, W)  W: (OUT, C, K, K) read as (OUT, D) with D = C K K  b: (OUT)  y: (B, OUT, OH, OW)
//   cols_b = im2col(x_b)                      (D, P) with P = OH OW, one row per (c, ki, kj)
// Forward:   Z_b = W cols_b + b,  Y_b = f(Z_b)        Y_b is (OUT, P): NCHW needs no transpose
// Backward:  dZ_b = dY_b (.) f'(Z_b, Y_b)             over dY in place
//            db += sum_{b,p} dZ_b,  dW += sum_b dZ_b cols_b^T
//            dX_b = col2im(W^T dZ_b)                  skipped for the first layer
// Samples run in parallel. The weight and bias gradients are summed in groups of consecutive
// samples (conv_gradient_groups: their number depends on the batch and the layer's size, never on
// the threads), each group into partial sums of its own in the pass's scratch, on whichever thread
// takes it, and the partials are then added in group order: results do not depend on the number
// of threads, and every image is converted and packed once. (A split by output channel converted
// every image on every thread, and kept LeNet-5's first layer, 6 channels, on one.) A thread
// converts one image at a time into columns of its own (D P values, reused), so they stay in its
// cache: a batch's columns would stream through memory twice per pass (LeNet-5's first layer:
// 5 MB at batch 64). Backward converts again rather than keeping them.
#include <algorithm>
#include <cstddef>
#include <utility>

#include "../core/device.hpp"
#include "../core/lane_sum.hpp"
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

// Groups of consecutive samples whose weight and bias gradients are summed apart (see the top of
// this file): up to 16, fewer where their partial sums (`params` values each) would pass 2^20
// values; 1 for a layer past that, whose samples then add into the gradient one after the other,
// each product on every thread. Group g of n covers samples [B g / n, B (g + 1) / n).
inline constexpr int max_gradient_groups = 16;
inline constexpr std::size_t gradient_partials_budget = std::size_t{1} << 20;
template <std::size_t params>
constexpr int conv_gradient_groups(int batch) {
  constexpr int by_size = static_cast<int>(std::clamp<std::size_t>(gradient_partials_budget / params, 1, max_gradient_groups));
  return std::max(1, std::min(batch, by_size));
}

}  // namespace cpu

// Scratch the CPU's backward needs for a batch: the partial sums of the weight and bias gradients.
template <class G, int Out>
constexpr std::size_t conv2d_scratch_values(Cpu, int batch) {
  constexpr std::size_t params = (std::size_t{G::channels} * G::kernel * G::kernel + 1) * Out;
  const int groups = cpu::conv_gradient_groups<params>(batch);
  return groups > 1 ? static_cast<std::size_t>(groups) * params : 0;
}

// The GPU's batch columns are not used by the forward pass here.
template <class G, int Out, class Act, class T>
void conv2d_forward(Cpu, const T* weight, const T* bias, const T* x, T* y, T* kept, T* /*batch columns*/,
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
          cpu::BiasActivation<cpu::BiasAlong::rows, Act, T>{yb, kept != nullptr ? kept + b * out_size : nullptr,
                                                            bias, std::ptrdiff_t{pixels}, act});
    }
  });
}

namespace cpu {

// Sample b's share of the weight and bias gradients: dZ_b = dY_b (.) f'(Z_b, Y_b) in place, then
// db (+)= its row sums and dW (+)= dZ_b cols_b^T (cols_b^T is cols_b read column-major). `first`:
// dW and db are overwritten. The product runs on `threads` threads.
template <class G, int Out, class Act, class T>
void add_sample_gradient(std::size_t b, int threads, bool first, T* weight_grad, T* bias_grad, const T* x, const T* y,
                         const T* kept, T* dy, Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, out_size = Out * pixels;
  T* dz = dy + b * out_size;
  activation_gradient(dz, y + b * out_size, kept != nullptr ? kept + b * out_size : nullptr, out_size, act);
  for (int o = 0; o < Out; ++o) {
    const T* row = dz + static_cast<std::size_t>(o) * pixels;
    const T sum = etnn::detail::lane_sum<int{pixels}, T>([row](int p) { return row[p]; });
    bias_grad[o] = first ? sum : bias_grad[o] + sum;
  }
  T* cols = thread_scratch<T>(depth * pixels);
  im2col<G>(x + b * G::channels * G::in_pixels, cols);
  const Accumulate accumulate = first ? Accumulate::no : Accumulate::yes;
  if (threads > 1) {
    gemm<Layout::row_major, Layout::col_major>(accumulate, Out, depth, int{pixels}, dz, int{pixels}, cols, int{pixels},
                                               weight_grad, depth);
  } else {
    gemm_serial<Layout::row_major, Layout::col_major>(accumulate, Out, depth, int{pixels}, dz, int{pixels}, cols,
                                                      int{pixels}, weight_grad, depth);
  }
}

}  // namespace cpu

// partials: conv2d_scratch_values(Cpu{}, batch) values.
template <class G, int Out, class Act, class T>
void conv2d_backward(Cpu, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* kept,
                     T* dy, T* dx, T* partials, int batch, Act act) {
  constexpr int depth = G::channels * G::kernel * G::kernel;
  constexpr std::size_t pixels = G::out_pixels, cols_size = depth * pixels, out_size = Out * pixels;
  constexpr std::size_t weights = std::size_t{Out} * depth, params = weights + Out;
  const auto samples = static_cast<std::size_t>(batch);
  const int groups = cpu::conv_gradient_groups<params>(batch);
  if (groups == 1) {  // one sample after another, each product on every thread
    for (std::size_t b = 0; b < samples; ++b)
      cpu::add_sample_gradient<G, Out>(b, cpu::available_threads(), false, weight_grad, bias_grad, x, y, kept, dy, act);
  } else {
    const auto group_count = static_cast<std::size_t>(groups);
    cpu::parallel_chunks(group_count, 1, (samples / group_count) * pixels * (Out * depth + depth),
                         [&](std::size_t begin, std::size_t end) {
      for (std::size_t g = begin; g < end; ++g) {
        T* group_weights = partials + g * params;
        const cpu::ChunkBounds group = cpu::chunk_bounds(samples, group_count, g);
        for (std::size_t b = group.begin; b < group.end; ++b)
          cpu::add_sample_gradient<G, Out>(b, 1, b == group.begin, group_weights, group_weights + weights, x, y,
                                           kept, dy, act);
      }
    });
    // dW += sum over groups in group order of their partials (and db likewise).
    cpu::parallel_chunks(params, 1024, group_count, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        T sum = partials[i];
        for (std::size_t g = 1; g < group_count; ++g) sum += partials[g * params + i];
        T& total = i < weights ? weight_grad[i] : bias_grad[i - weights];
        total += sum;
      }
    });
  }
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
