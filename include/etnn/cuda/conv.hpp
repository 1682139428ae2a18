#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// 2-D convolution with a fused activation on the device: im2col over the whole batch and one
// GEMM, where the CPU runs one GEMM per sample (cpu/conv.hpp has the same math).
//   x: (B, C, H, W)  W: (OUT, D) with D = C K K  b: (OUT)  y: (B, OUT, OH, OW)  P = OH OW
//   cols (D, B P): column (b, p) holds sample b's window at output pixel p  (the layer's scratch)
// Forward:   Z' (OUT, B P) = W cols                            one cuBLASLt GEMM
//            y[b, o, p] = f(Z'[o, b P + p] + b[o])            one kernel: bias, f, back to NCHW
// Backward:  dZ'[o, b P + p] = dy[b, o, p] f'(z, y)           one kernel: f' and to (OUT, B P)
//            db[o] += sum of row o of dZ'                     one block per channel, fixed order
//            dW += dZ' cols^T                                 cuBLASLt, beta = 1
//            dcols = W^T dZ',  dx = col2im(dcols)             skipped for the first layer; col2im
//                                                             gathers per input pixel in the CPU's order
// Z' and dZ' live in a device buffer of the backend's, grown to the largest batch (sized by the
// training pass's warm-up, nn::TrainingPass::reserve, so a recorded step never reallocates it).
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "../expr/functors.hpp"
#include "../tensor/buffer.hpp"
#include "blas.hpp"
#include "memory.hpp"
#include "per_thread.hpp"
#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

template <class G>
inline constexpr int conv_depth = G::channels * G::kernel * G::kernel;

// cols[k, b P + p] for k = (c, ki, kj): x[b, c, in_row(oh, ki), in_col(ow, kj)] or 0 in padding.
template <class G, class T>
__global__ void im2col_kernel(const T* x, T* cols, int batch) {
  const std::size_t columns = static_cast<std::size_t>(batch) * G::out_pixels;
  const std::size_t n = columns * conv_depth<G>;
  for (const std::size_t i : grid_stride(n)) {
    const int k = static_cast<int>(i / columns);
    const std::size_t column = i % columns;
    const std::size_t b = column / G::out_pixels;
    const int p = static_cast<int>(column % G::out_pixels);
    const int c = k / (G::kernel * G::kernel), ki = (k / G::kernel) % G::kernel, kj = k % G::kernel;
    const int ih = G::in_row(p / G::out_width, ki), iw = G::in_col(p % G::out_width, kj);
    cols[i] = G::inside(ih, iw) ? x[(b * G::channels + c) * G::in_pixels + ih * G::width + iw] : T(0);
  }
}

// Where NCHW element i = (b, o, p) of a (B, Out, P) tensor sits in the channel-major (Out, B P)
// layout of the GEMM, and its channel o.
struct ChannelMajor {
  std::size_t index;
  int channel;
};
template <class G, int Out>
__device__ inline ChannelMajor channel_major(std::size_t i, int batch) {
  const std::size_t b = i / (static_cast<std::size_t>(Out) * G::out_pixels);
  const int o = static_cast<int>(i / G::out_pixels % Out);
  const std::size_t columns = static_cast<std::size_t>(batch) * G::out_pixels;
  return {o * columns + b * G::out_pixels + i % G::out_pixels, o};
}

// y[b, o, p] = f(z'[o, b P + p] + bias[o]), keeping f'(pre-activation) in kept (NCHW) if asked.
template <class G, int Out, class Act, class T>
__global__ void conv_bias_activation_kernel(const T* z, const T* bias, T* y, T* kept, int batch, Act act) {
  const std::size_t n = static_cast<std::size_t>(batch) * Out * G::out_pixels;
  for (const std::size_t i : grid_stride(n)) {
    const auto at = channel_major<G, Out>(i, batch);
    const T pre = z[at.index] + bias[at.channel];
    y[i] = kept != nullptr ? fn::activate(act, pre, kept + i) : act(pre);
  }
}

// dz'[o, b P + p] = dy[b, o, p] f'(z, y).
template <class G, int Out, class Act, class T>
__global__ void conv_activation_gradient_kernel(const T* dy, const T* y, const T* kept, T* dz, int batch, Act act) {
  const std::size_t n = static_cast<std::size_t>(batch) * Out * G::out_pixels;
  for (const std::size_t i : grid_stride(n)) {
    T g = dy[i];
    if constexpr (!std::is_same_v<Act, fn::Identity>) g = fn::chain_kept(act, g, y, kept, i);
    dz[channel_major<G, Out>(i, batch).index] = g;
  }
}

// bias_grad[o] += sum of row o of rows (cols values each): one block per row, a fixed order.
template <class T>
__global__ void add_row_sums_kernel(const T* rows, std::size_t cols, T* bias_grad) {
  double sum = 0.0;
  const T* row = rows + blockIdx.x * cols;
  for (std::size_t j = threadIdx.x; j < cols; j += blockDim.x) sum += static_cast<double>(row[j]);
  const double total = block_sum(sum);
  if (threadIdx.x == 0) bias_grad[blockIdx.x] += static_cast<T>(total);
}

// dx[b, c, ih, iw] = sum over (ki, kj) in order of dcols[(c, ki, kj), b P + p] for the output pixel
// p whose window puts (ki, kj) on (ih, iw): the CPU's col2im, gathered.
template <class G, class T>
__global__ void col2im_kernel(const T* dcols, T* dx, int batch) {
  const std::size_t n = static_cast<std::size_t>(batch) * G::channels * G::in_pixels;
  const std::size_t columns = static_cast<std::size_t>(batch) * G::out_pixels;
  for (const std::size_t i : grid_stride(n)) {
    const std::size_t b = i / (static_cast<std::size_t>(G::channels) * G::in_pixels);
    const int c = static_cast<int>(i / G::in_pixels % G::channels);
    const int pixel = static_cast<int>(i % G::in_pixels), ih = pixel / G::width, iw = pixel % G::width;
    T sum = 0;
    for (int ki = 0; ki < G::kernel; ++ki) {
      const int rows = ih + G::pad - ki;  // = oh S
      if (rows < 0 || rows % G::stride != 0 || rows / G::stride >= G::out_height) continue;
      for (int kj = 0; kj < G::kernel; ++kj) {
        const int columns_in = iw + G::pad - kj;  // = ow S
        if (columns_in < 0 || columns_in % G::stride != 0 || columns_in / G::stride >= G::out_width) continue;
        const int k = (c * G::kernel + ki) * G::kernel + kj;
        const int p = rows / G::stride * G::out_width + columns_in / G::stride;
        sum += dcols[static_cast<std::size_t>(k) * columns + b * G::out_pixels + p];
      }
    }
    dx[i] = sum;
  }
}

// Z' or dZ' (OUT, B P), one per host thread (cuda/per_thread.hpp), grown as needed.
struct ConvStaging;
template <class T>
T* conv_staging(std::size_t values) {
  return per_thread<GrowingScratch<T>, ConvStaging>().at(values);
}

}  // namespace cuda::detail

template <class G, int Out, class Act, class T>
void conv2d_forward(Cuda, const T* weight, const T* bias, const T* x, T* y, T* kept, T* columns, int batch,
                    Act act) {
  using namespace cuda::detail;
  constexpr int depth = conv_depth<G>;
  const int width = batch * G::out_pixels;  // B P
  const std::size_t cols = static_cast<std::size_t>(depth) * width, outputs = static_cast<std::size_t>(Out) * width;
  if (batch == 0) return;
  T* z = conv_staging<T>(outputs);
  cuda::launch("etnn::conv2d_forward im2col", im2col_kernel<G, T>, {cuda::grid_blocks(cols), 256}, x, columns, batch);
  // Z'^T (B P x OUT) = cols^T (B P x D) W^T (D x OUT), column-major.
  cuda::Blas::instance().matmul<T>(false, false, width, Out, depth, columns, width, weight, depth, z, width, T(0));
  cuda::launch("etnn::conv2d_forward bias_activation", conv_bias_activation_kernel<G, Out, Act, T>,
               {cuda::grid_blocks(outputs), 256}, z, bias, y, kept, batch, act);
}

template <class G, int Out, class Act, class T>
void conv2d_backward(Cuda, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* kept,
                     T* dy, T* dx, T* columns, int batch, Act act) {
  using namespace cuda::detail;
  constexpr int depth = conv_depth<G>;
  const int width = batch * G::out_pixels;
  const std::size_t cols = static_cast<std::size_t>(depth) * width, outputs = static_cast<std::size_t>(Out) * width;
  if (batch == 0) return;
  T* dz = conv_staging<T>(outputs);
  cuda::launch("etnn::conv2d_backward activation_gradient", conv_activation_gradient_kernel<G, Out, Act, T>,
               {cuda::grid_blocks(outputs), 256}, dy, y, kept, dz, batch, act);
  cuda::launch("etnn::conv2d_backward bias_gradient", add_row_sums_kernel<T>, {Out, reduction_threads}, dz,
               static_cast<std::size_t>(width), bias_grad);
  cuda::launch("etnn::conv2d_backward im2col", im2col_kernel<G, T>, {cuda::grid_blocks(cols), 256}, x, columns, batch);
  auto& blas = cuda::Blas::instance();
  // dW^T (D x OUT) += cols (D x B P) dZ'^T (B P x OUT), column-major.
  blas.matmul<T>(true, false, depth, Out, width, columns, width, dz, width, weight_grad, depth, T(1));
  if (dx == nullptr) return;
  // dcols^T (B P x D) = dZ'^T (B P x OUT) W (OUT x D), column-major; over the columns.
  blas.matmul<T>(false, true, width, depth, Out, dz, width, weight, depth, columns, width, T(0));
  const std::size_t inputs = static_cast<std::size_t>(batch) * G::channels * G::in_pixels;
  cuda::launch("etnn::conv2d_backward col2im", col2im_kernel<G, T>, {cuda::grid_blocks(inputs), 256}, columns, dx,
               batch);
}

}  // namespace etnn
