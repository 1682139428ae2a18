#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Fully connected layer with a fused activation, on the device.
//
// Forward:   Z = X W^T + b,  Y = f(Z)          X: (B, IN)  W: (OUT, IN)  b: (OUT)  Y, Z: (B, OUT)
//            In cuBLASLt's column-major terms Y^T (OUT x B) = W (stored IN x OUT, transposed) X^T
//            (stored IN x B). For fp32 that one call also adds b (its BIAS epilogue); one
//            elementwise kernel follows it unless f is the identity, applying f through the CPU's
//            functor (ReLU included: cuBLASLt's RELU epilogue turns NaN into 0) and keeping f'(Z)
//            when f' needs Z (fn::activate).
// Backward:  dZ = dY (.) f'(Z, Y) written over dY, db += sum_b dZ     one kernel + a tiny one
//            dW += dZ^T X:  dW^T (IN x OUT) += X^T (IN x B) dZ (B x OUT)     cuBLASLt, beta = 1
//            dX  = dZ W:    dX^T (IN x B)   = W^T (IN x OUT) dZ^T (OUT x B)  skipped for the first layer
// In a mixed-precision model (etnn::bf16, etnn::fp16) the three products read 16-bit copies of
// their operands and accumulate in fp32 (cuda/blas.hpp); the rest stays fp32.
// The bias gradient is summed per column in fixed row chunks and the chunks in order, so it is the
// same on every run.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "../core/precision.hpp"
#include "../expr/functors.hpp"
#include "../tensor/buffer.hpp"
#include "blas.hpp"
#include "half.hpp"
#include "memory.hpp"
#include "per_thread.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

// y = f(y + b) over (rows, cols), keeping f'(y + b) in kept when not null (fn::activate); b may be
// null (already added by the GEMM's epilogue).
template <class Act, class T>
__global__ void bias_activation_kernel(T* y, T* kept, const T* bias, std::size_t rows, int cols, Act act) {
  const std::size_t n = rows * static_cast<std::size_t>(cols);
  for (const std::size_t i : grid_stride(n)) {
    T z = y[i];
    if (bias != nullptr) z += bias[i % static_cast<std::size_t>(cols)];
    y[i] = kept != nullptr ? fn::activate(act, z, kept + i) : act(z);
  }
}

inline constexpr int column_tile = 32;  // columns per block: one warp across a row
inline constexpr int row_lanes = 8;     // rows a block works on at once

// dZ = dY (.) f'(Z, Y) over dY; partial[chunk * cols + j] = sum of dZ(:, j) over the chunk's rows.
// Grid: (column tiles, chunks); block: (column_tile, row_lanes).
template <class Act, class T>
__global__ void activation_gradient_kernel(T* dy, const T* y, const T* kept, int rows, int cols, int rows_per_chunk,
                                           T* partial, Act act) {
  __shared__ T lane_sum[row_lanes][column_tile];
  const int j = blockIdx.x * column_tile + threadIdx.x;
  const int begin = blockIdx.y * rows_per_chunk;
  const int end = min(rows, begin + rows_per_chunk);
  T sum = 0;
  if (j < cols) {
    for (int r = begin + static_cast<int>(threadIdx.y); r < end; r += row_lanes) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + j;
      T g = dy[i];
      if constexpr (!std::is_same_v<Act, fn::Identity>) {
        g = fn::chain_kept(act, g, y, kept, i);
        dy[i] = g;
      }
      sum += g;
    }
  }
  lane_sum[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    T total = 0;
    for (int l = 0; l < row_lanes; ++l) total += lane_sum[l][threadIdx.x];
    partial[static_cast<std::size_t>(blockIdx.y) * cols + j] = total;
  }
}

// bias_grad[j] += sum over chunks of partial[chunk * cols + j], chunks in order.
template <class T>
__global__ void add_chunk_sums_kernel(T* bias_grad, const T* partial, int chunks, int cols) {
  for (const std::size_t j : grid_stride(static_cast<std::size_t>(cols))) {
    T total = 0;
    for (int c = 0; c < chunks; ++c) total += partial[static_cast<std::size_t>(c) * cols + j];
    bias_grad[j] += total;
  }
}

// How the bias gradient's column sums split the batch: `count` chunks of `rows` rows (the last
// may be shorter), each at least 256 rows (32 per row lane) when the batch allows, at most 512.
struct RowChunks {
  int count;
  int rows;
};
inline RowChunks row_chunks(int batch) {
  constexpr int min_rows = row_lanes * 32;
  const int count = std::clamp((batch + min_rows - 1) / min_rows, 1, 512);
  return {count, (batch + count - 1) / count};
}

// Device scratch for per-chunk column sums, one per host thread (cuda/per_thread.hpp), grown as
// needed (sized by the training pass's warm-up, nn::TrainingPass::reserve, so a recorded step never
// grows it).
struct ColumnPartials;
template <class T>
T* column_partials(std::size_t values) {
  return per_thread<GrowingScratch<T>, ColumnPartials>().at(values);
}

// dst = src rounded to the 16-bit format Half (bf16 or fp16; to nearest, ties to even), n values.
template <class Half>
__global__ void to_half_kernel(const float* src, Half* dst, std::size_t n) {
  for (const std::size_t i : grid_stride(n))
    dst[i] = HalfFormat<Half>::round(src[i]);
}

// A 16-bit copy of n values in device scratch `slot` (0 or 1: a product's two operands), one pair
// per host thread (cuda/per_thread.hpp), grown as needed (sized by the training pass's warm-up,
// nn::TrainingPass::reserve, so a recorded step never grows it). A thread's work on etnn's stream
// runs in order: a product has read its copies before the thread's next one overwrites them.
template <class Half>
struct HalfCopies {
  GrowingScratch<Half> slots[2];
};
template <class Half>
const Half* half_copy(int slot, const float* src, std::size_t n) {
  Half* copy = per_thread<HalfCopies<Half>>().slots[slot].at(n);
  launch("etnn::dense to_half", to_half_kernel<Half>, {grid_blocks(n), 256}, src, copy, n);
  return copy;
}

// C = op(A) op(B) + beta C [+ bias] (Blas::matmul), from 16-bit copies of A (a_values
// values) and B (b_values) in a mixed-precision model, else from A and B themselves.
template <class T>
void product(Products products, bool transpose_a, bool transpose_b, int m, int n, int k, const T* a,
             std::size_t a_values, int lda, const T* b, std::size_t b_values, int ldb, T* c, int ldc, T beta,
             Epilogue epilogue = Epilogue::none, const T* bias = nullptr) {
  auto& blas = Blas::instance();
  const auto from_copies = [&]<class Half>(Half*) {
    blas.matmul(transpose_a, transpose_b, m, n, k, half_copy<Half>(0, a, a_values), lda,
                half_copy<Half>(1, b, b_values), ldb, c, ldc, beta, epilogue, bias);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (products == Products::bf16) return from_copies(static_cast<__nv_bfloat16*>(nullptr));
    if (products == Products::fp16) return from_copies(static_cast<__half*>(nullptr));
  }
  blas.matmul<T>(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc, beta, epilogue, bias);
}

}  // namespace cuda::detail

// products: the format the GEMMs read their operands in (16-bit copies: mixed precision, fp32 only).
template <int In, int Out, class Act, class T>
void dense_forward(Cuda, const T* weight, const T* bias, const T* x, T* y, T* kept, int batch, Act act,
                   Products products = Products::own) {
  // An fp32 product adds the bias in its epilogue. Every activation but the identity runs after it
  // in one kernel through the CPU's functor (fn::activate): cuBLASLt's ReLU epilogue is max(x, 0),
  // which turns NaN into 0, where etnn's ReLU keeps NaN so that the non-finite guard sees it.
  constexpr bool epilogue_bias = std::is_same_v<T, float>;
  constexpr bool epilogue_activation = epilogue_bias && std::is_same_v<Act, fn::Identity>;
  const cuda::Epilogue epilogue = epilogue_bias ? cuda::Epilogue::bias : cuda::Epilogue::none;
  const auto rows = static_cast<std::size_t>(batch);
  cuda::detail::product(products, true, false, Out, batch, In, weight, std::size_t{Out} * In, In, x, rows * In, In,
                        y, Out, T(0), epilogue, epilogue_bias ? bias : nullptr);
  if constexpr (!epilogue_activation) {
    const std::size_t n = static_cast<std::size_t>(batch) * Out;
    cuda::launch("etnn::dense_forward bias_activation", cuda::detail::bias_activation_kernel<Act, T>,
                 {cuda::grid_blocks(n), 256}, y, kept, epilogue_bias ? static_cast<const T*>(nullptr) : bias,
                 static_cast<std::size_t>(batch), Out, act);
  }
}

template <int In, int Out, class Act, class T>
void dense_backward(Cuda, const T* weight, T* weight_grad, T* bias_grad, const T* x, const T* y, const T* kept,
                    T* dy, T* dx, int batch, Act act, Products products = Products::own) {
  using namespace cuda::detail;
  const RowChunks chunks = row_chunks(batch);
  T* partial = column_partials<T>(static_cast<std::size_t>(chunks.count) * Out);
  const dim3 grid((Out + column_tile - 1) / column_tile, static_cast<unsigned>(chunks.count));
  cuda::launch("etnn::dense_backward activation_gradient", activation_gradient_kernel<Act, T>,
               {grid, dim3(column_tile, row_lanes)}, dy, y, kept, batch, Out, chunks.rows, partial, act);
  cuda::launch("etnn::dense_backward add_chunk_sums", add_chunk_sums_kernel<T>, {(Out + 127) / 128, 128}, bias_grad,
               partial, chunks.count, Out);
  const auto rows = static_cast<std::size_t>(batch);
  product(products, false, true, In, Out, batch, x, rows * In, In, dy, rows * Out, Out, weight_grad, In, T(1));
  if (dx != nullptr)
    product(products, false, false, In, batch, Out, weight, std::size_t{Out} * In, In, dy, rows * Out, Out, dx, In,
            T(0));
}

}  // namespace etnn
