#pragma once
// Fully fused narrow MLP on 16-bit tensor cores, bf16 or fp16 (the tiny-cuda-nn idea).
//
//   y = W_{L-1} f(... f(W_0 x + b_0) ...) + b_{L-1}     widths {w_0 = in, w_1, ..., w_L = out}
//   f = ReLU on every hidden layer, identity on the output layer; every width in {16, 32, 64, 128}.
//
// Notation (0-based, layer l maps width w_l to w_{l+1}):
//   A_0 = x                           (batch, w_0)
//   Z_l = A_l W_l^T + b_l             A_l: (batch, w_l)  W_l: (w_{l+1}, w_l)  Z_l: (batch, w_{l+1})
//   A_{l+1} = relu(Z_l)  for l < L-1,  y = Z_{L-1}
// Backward, with dZ_{L-1} = dy:
//   dW_l += dZ_l^T A_l                (w_{l+1}, batch) x (batch, w_l)
//   db_l += sum over rows of dZ_l
//   dZ_{l-1} = (dZ_l W_l) (.) [A_l > 0]      for l >= 1 (dL/dx is not computed)
//
// Kernels (256 threads = 8 warps per block; a block carries a tile of 128 batch rows and each
// warp owns 16 consecutive rows of it, so activations between layers stay warp-private):
//   forward:  fused_mlp_forward_kernel, one launch, one block per 128-row tile, all layers. The
//             tile's activations stay in shared memory as Half (overwritten layer by layer); each
//             layer's weights are converted fp32 -> Half into shared memory; bias and ReLU are
//             applied in fp32 before rounding. Hidden activations A_1..A_{L-1} go to `saved`.
//   backward: 1. fused_mlp_chain_kernel (only when L >= 2): one block per tile, dZ_{L-1} = dy down
//                to dZ_0 through all layers, tile-local; dZ_0..dZ_{L-2} go to `saved` (Half).
//             2. fused_mlp_weight_grad_kernel: grid (chunks, L); block (c, l) computes
//                dW_l and db_l over the rows of chunk c (a run of whole tiles) into its own slot of
//                a per-chunk partial buffer laid out like the parameters.
//             3. fused_mlp_reduce_kernel: grads[p] += sum over chunks of partial[c][p], chunks in
//                order. Every sum has a fixed order, so the result is the same on every run.
// Precision: Half operands (x, weights, activations, dZ), fp32 accumulation, fp32 bias/ReLU; Half
// is __nv_bfloat16 (etnn::bf16 models) or __half (etnn::fp16, whose gradients the Trainer scales).
//
// `saved` (saved_bytes(batch) bytes, 256-byte aligned, e.g. from cudaMalloc) holds the hidden
// activations written by forward and, after them, the scratch backward writes (dZ, partials):
// backward leaves the activations untouched, so it may be called again with the same `saved`.
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "../core/error.hpp"
#include "half.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

template <int... W>
inline constexpr bool fused_mlp_widths_ok = ((W == 16 || W == 32 || W == 64 || W == 128) && ...);

namespace detail::fused_mlp {

namespace wmma = nvcuda::wmma;

// HalfFormat and half_bytes, the conversions of each 16-bit format, come from the enclosing
// etnn::cuda::detail (cuda/half.hpp); the layouts below count on 2 bytes.

inline constexpr int frag = 16;                   // WMMA fragment edge: 16x16x16 tiles
inline constexpr int warps = 8;                   // per block
inline constexpr int threads = warps * 32;        // per block
inline constexpr int tile_rows = warps * frag;    // batch rows per block: 16 per warp
inline constexpr int smem_pad = 8;                // 16-bit elements (16 bytes) added to each shared row:
                                                  // keeps ldm a multiple of 8 and staggers banks
inline constexpr int max_chunks = 128;            // row chunks of the weight-gradient split
inline constexpr std::size_t region_align = 256;  // bytes; alignment of every region of `saved`

// Every WMMA pointer below is base + (16 i) * ld + 16 j elements with ld a multiple of 8, so it is
// 32-byte aligned whenever its base is; every shared base is a multiple of 256 bytes from the
// (128-byte aligned) start of dynamic shared memory.

template <int... W>
__host__ __device__ constexpr int width_at(int i) {
  constexpr int list[] = {W...};
  return list[i];
}

// Parameters of layers 0..l-1: sum of w_{m+1} * w_m (weight) + w_{m+1} (bias).
template <int... W>
__host__ __device__ constexpr std::size_t params_before(int l) {
  std::size_t n = 0;
  for (int m = 0; m < l; ++m)
    n += static_cast<std::size_t>(width_at<W...>(m + 1)) * static_cast<std::size_t>(width_at<W...>(m) + 1);
  return n;
}

template <int... W>
__host__ __device__ constexpr int max_width_of() {
  int widest = 0;
  for (int i = 0; i < static_cast<int>(sizeof...(W)); ++i)
    widest = width_at<W...>(i) > widest ? width_at<W...>(i) : widest;
  return widest;
}

// Largest shared copy of one layer's weights: w_{l+1} rows of (w_l + smem_pad) 16-bit values.
template <int... W>
__host__ __device__ constexpr std::size_t max_weight_elems() {
  std::size_t most = 0;
  for (int l = 0; l + 1 < static_cast<int>(sizeof...(W)); ++l) {
    const std::size_t n = static_cast<std::size_t>(width_at<W...>(l + 1)) * (width_at<W...>(l) + smem_pad);
    most = n > most ? n : most;
  }
  return most;
}

// Largest shared footprint of the weight-gradient kernel: a dZ_l tile (128, w_{l+1}) and an A_l
// tile (128, w_l), both 16-bit with padded rows, plus one float per thread for the bias sums.
template <int... W>
__host__ __device__ constexpr std::size_t max_weight_grad_smem() {
  std::size_t most = 0;
  for (int l = 0; l + 1 < static_cast<int>(sizeof...(W)); ++l) {
    const std::size_t n =
        static_cast<std::size_t>(tile_rows) * (width_at<W...>(l + 1) + smem_pad + width_at<W...>(l) + smem_pad);
    most = n > most ? n : most;
  }
  return most * half_bytes + threads * sizeof(float);
}

// Device pointers into `saved` (unused slots are null).
template <class Half, int Layers>
struct SavedBuffers {
  Half* activation[Layers + 1];  // activation[h] = A_h (batch, w_h) for 1 <= h < Layers
  Half* dz[Layers];              // dz[l] = dZ_l (batch, w_{l+1}) for 0 <= l < Layers - 1 (dZ_{Layers-1} is dy)
  float* partial;                // (chunks, num_params): chunk c's parameter gradients, params' layout
  int chunks;                    // row chunks of the weight-gradient split
  int chunk_rows;                // rows per chunk, a multiple of tile_rows
};

inline int ceil_div(int a, int b) { return a / b + (a % b != 0 ? 1 : 0); }

inline std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

struct ChunkPlan {
  int chunks;
  int chunk_rows;
};

// At most max_chunks chunks of whole tiles covering rows [0, batch); every chunk holds at least one
// row: (chunks - 1) * chunk_rows < batch <= chunks * chunk_rows.
inline ChunkPlan plan_chunks(int batch) {
  const int tiles = ceil_div(batch, tile_rows);
  const int tiles_per_chunk = ceil_div(tiles, max_chunks);
  return {ceil_div(tiles, tiles_per_chunk), tiles_per_chunk * tile_rows};
}

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB).
template <class Kernel>
void allow_dynamic_smem(Kernel* kernel, std::size_t bytes) {
  ETNN_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// ---- small device helpers -------------------------------------------------------------------

// Copies rows [row0, row0 + tile_rows) of a (rows, Width) row-major fp32 matrix into shared memory
// as Half with row pitch dst_ld; rows at or past row_end become zeros. The whole block takes part.
template <int Width, class Half>
__device__ void load_tile_rows(Half* dst, int dst_ld, const float* src, int row0, int row_end) {
  for (int e = static_cast<int>(threadIdx.x); e < tile_rows * Width; e += threads) {
    const int r = e / Width;
    const int c = e % Width;
    const int row = row0 + r;
    const float value = row < row_end ? src[static_cast<std::size_t>(row) * Width + c] : 0.0f;
    dst[r * dst_ld + c] = HalfFormat<Half>::round(value);
  }
}

// Same for a Half source inside `saved` (16-byte aligned rows): 8 elements per 16-byte access.
template <int Width, class Half>
__device__ void load_tile_rows(Half* dst, int dst_ld, const Half* src, int row0, int row_end) {
  constexpr int vectors_per_row = Width / 8;
  for (int e = static_cast<int>(threadIdx.x); e < tile_rows * vectors_per_row; e += threads) {
    const int r = e / vectors_per_row;
    const int c = (e % vectors_per_row) * 8;
    const int row = row0 + r;
    uint4 bits = make_uint4(0u, 0u, 0u, 0u);  // zeros in either format
    if (row < row_end) bits = *reinterpret_cast<const uint4*>(src + static_cast<std::size_t>(row) * Width + c);
    *reinterpret_cast<uint4*>(dst + r * dst_ld + c) = bits;
  }
}

// W (Out, In) row-major fp32 in global memory -> shared Half with row pitch In + smem_pad.
template <int Out, int In, class Half>
__device__ void load_weights(Half* dst, const float* w) {
  for (int e = static_cast<int>(threadIdx.x); e < Out * In; e += threads)
    dst[(e / In) * (In + smem_pad) + e % In] = HalfFormat<Half>::round(w[e]);
}

template <class Half>
__device__ inline uint4 pack8(const float (&v)[8]) {
  typename HalfFormat<Half>::pair pairs[4];
  for (int i = 0; i < 4; ++i) pairs[i] = HalfFormat<Half>::round2(v[2 * i], v[2 * i + 1]);  // .x = lower address
  static_assert(sizeof(pairs) == sizeof(uint4));
  uint4 bits;
  memcpy(&bits, pairs, sizeof(bits));
  return bits;
}

template <class Half>
__device__ inline void unpack8(uint4 bits, float (&v)[8]) {
  typename HalfFormat<Half>::pair pairs[4];
  memcpy(pairs, &bits, sizeof(bits));
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __low2float(pairs[i]);
    v[2 * i + 1] = __high2float(pairs[i]);
  }
}

// Epilogue mapping of a 16x16 fp32 fragment stored row-major (ldm 16) in a warp's scratch: lane
// handles row lane / 2, columns (lane % 2) * 8 .. + 7.
__device__ inline int lane_row(int lane) { return lane >> 1; }
__device__ inline int lane_col(int lane) { return (lane & 1) * 8; }

__device__ inline void read_lane_values(const float* warp_scratch, int lane, float (&v)[8]) {
  const float4* p = reinterpret_cast<const float4*>(warp_scratch + lane_row(lane) * frag + lane_col(lane));
  const float4 lo = p[0];
  const float4 hi = p[1];
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
  v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}

using AccumulatorFrag = wmma::fragment<wmma::accumulator, frag, frag, frag, float>;
template <class Half>
using RowMajorAFrag = wmma::fragment<wmma::matrix_a, frag, frag, frag, Half, wmma::row_major>;
template <class Half>
using ColMajorAFrag = wmma::fragment<wmma::matrix_a, frag, frag, frag, Half, wmma::col_major>;
template <class Half>
using RowMajorBFrag = wmma::fragment<wmma::matrix_b, frag, frag, frag, Half, wmma::row_major>;
template <class Half>
using ColMajorBFrag = wmma::fragment<wmma::matrix_b, frag, frag, frag, Half, wmma::col_major>;

// ---- the network ----------------------------------------------------------------------------

template <class Half, int... W>
struct Net {
  static constexpr int layers = static_cast<int>(sizeof...(W)) - 1;
  static constexpr std::size_t num_params = params_before<W...>(layers);
  using Buffers = SavedBuffers<Half, layers>;
  using RowMajorA = RowMajorAFrag<Half>;
  using ColMajorA = ColMajorAFrag<Half>;
  using RowMajorB = RowMajorBFrag<Half>;
  using ColMajorB = ColMajorBFrag<Half>;

  template <int l>
  struct Layer {
    static constexpr int in = width_at<W...>(l);
    static constexpr int out = width_at<W...>(l + 1);
    static constexpr bool hidden = l + 1 < layers;  // ReLU, and its output is saved
    static constexpr std::size_t weight_offset = params_before<W...>(l);
    static constexpr std::size_t bias_offset = weight_offset + static_cast<std::size_t>(out) * in;
    static constexpr int weight_ld = in + smem_pad;  // shared row pitch of W_l (out, in)
  };

  // Shared layout of the forward and chain kernels: a (128, max width) Half activation/gradient
  // tile, one layer's weights, and a 16x16 fp32 scratch per warp.
  static constexpr int tile_ld = max_width_of<W...>() + smem_pad;
  static constexpr std::size_t tile_elems = static_cast<std::size_t>(tile_rows) * tile_ld;
  static constexpr std::size_t weight_elems = max_weight_elems<W...>();
  static constexpr std::size_t tile_smem_bytes =
      (tile_elems + weight_elems) * half_bytes + static_cast<std::size_t>(warps) * frag * frag * sizeof(float);
  static_assert(tile_elems * half_bytes % 256 == 0 && weight_elems * half_bytes % 256 == 0,
                "shared regions must keep 256-byte alignment");

  static constexpr std::size_t weight_grad_smem_bytes = max_weight_grad_smem<W...>();

  // ---- forward ----

  // One layer for the warp's 16 rows `strip` (row pitch tile_ld):
  //   Z = A W^T + b     A: (16, in) Half shared   W: (out, in) Half shared   Z: (16, out) fp32
  // Hidden layer: A_next = relu(Z) as Half written over the strip (columns 0..out-1) and to
  // saved_activation (batch, out) for rows < batch. Output layer: y (batch, out) = Z in fp32.
  template <int l>
  __device__ static void forward_layer(Half* tile, Half* weights, float* scratch, const float* params,
                                       Half* saved_activation, float* y, int row0, int batch) {
    using L = Layer<l>;
    __syncthreads();  // every warp is done with the previous weights; the input tile is complete
    load_weights<L::out, L::in>(weights, params + L::weight_offset);
    __syncthreads();  // the weights are visible to every warp

    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    Half* strip = tile + warp * frag * tile_ld;

    // acc[n] = Z[:, 16n .. 16n+15] = sum_k A[:, 16k..] (16x16) * W^T[16k.., 16n..] (16x16).
    // W^T (in, out) is W (out, in) row-major read as column-major: element (k, n) = W[n][k].
    AccumulatorFrag acc[L::out / frag];
#pragma unroll
    for (int n = 0; n < L::out / frag; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int k = 0; k < L::in / frag; ++k) {
      RowMajorA a;
      wmma::load_matrix_sync(a, strip + k * frag, tile_ld);
#pragma unroll
      for (int n = 0; n < L::out / frag; ++n) {
        ColMajorB w_t;
        wmma::load_matrix_sync(w_t, weights + n * frag * L::weight_ld + k * frag, L::weight_ld);
        wmma::mma_sync(acc[n], a, w_t, acc[n]);
      }
    }
    __syncwarp();  // every lane has read the strip: it may now be overwritten by this layer's output

    float* warp_scratch = scratch + warp * frag * frag;
    const int r = lane_row(lane);
    const int row = row0 + warp * frag + r;
#pragma unroll
    for (int n = 0; n < L::out / frag; ++n) {
      wmma::store_matrix_sync(warp_scratch, acc[n], frag, wmma::mem_row_major);
      __syncwarp();  // the fragment is in scratch
      const int col = n * frag + lane_col(lane);
      float v[8];
      read_lane_values(warp_scratch, lane, v);
      for (int t = 0; t < 8; ++t) v[t] += params[L::bias_offset + col + t];
      if constexpr (L::hidden) {
        for (int t = 0; t < 8; ++t) v[t] = v[t] > 0.0f ? v[t] : 0.0f;
        const uint4 bits = pack8<Half>(v);
        *reinterpret_cast<uint4*>(strip + r * tile_ld + col) = bits;
        if (row < batch)
          *reinterpret_cast<uint4*>(saved_activation + static_cast<std::size_t>(row) * L::out + col) = bits;
      } else {
        if (row < batch)
          for (int t = 0; t < 8; ++t) y[static_cast<std::size_t>(row) * L::out + col + t] = v[t];
      }
      __syncwarp();  // every lane has read scratch before the next fragment is stored there
    }
  }

  template <int l>
  __device__ static void forward_layers(Half* tile, Half* weights, float* scratch, const float* params,
                                        const Buffers& saved, float* y, int row0, int batch) {
    forward_layer<l>(tile, weights, scratch, params, saved.activation[l + 1], y, row0, batch);
    if constexpr (l + 1 < layers) forward_layers<l + 1>(tile, weights, scratch, params, saved, y, row0, batch);
  }

  __device__ static void forward_tile(unsigned char* smem, const float* params, const float* x, float* y,
                                      const Buffers& saved, int batch) {
    Half* tile = reinterpret_cast<Half*>(smem);
    Half* weights = tile + tile_elems;
    float* scratch = reinterpret_cast<float*>(weights + weight_elems);
    const int row0 = static_cast<int>(blockIdx.x) * tile_rows;
    load_tile_rows<Layer<0>::in>(tile, tile_ld, x, row0, batch);  // A_0 = x, zero rows past the batch
    forward_layers<0>(tile, weights, scratch, params, saved, y, row0, batch);
  }

  // ---- backward 1: the dZ chain ----

  // For the warp's 16 rows `strip` holding dZ_l (16, out):
  //   dA_l = dZ_l W_l      dZ_l: (16, out) Half shared   W_l: (out, in) Half shared row-major
  //   dZ_{l-1} = dA_l (.) [A_l > 0]     A_l from saved_activation (batch, in)
  // dZ_{l-1} (16, in) is written as Half over the strip and to dz_prev (batch, in) for rows < batch.
  template <int l>
  __device__ static void backprop_layer(Half* tile, Half* weights, float* scratch, const float* params,
                                        const Half* saved_activation, Half* dz_prev, int row0, int batch) {
    static_assert(l >= 1, "layer 0 has no dZ below it");
    using L = Layer<l>;
    __syncthreads();  // every warp is done with the previous weights; the dy tile is complete
    load_weights<L::out, L::in>(weights, params + L::weight_offset);
    __syncthreads();  // the weights are visible to every warp

    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    Half* strip = tile + warp * frag * tile_ld;

    // acc[n] = dA[:, 16n..] = sum_k dZ[:, 16k..] (16x16) * W[16k.., 16n..] (16x16), W row-major.
    AccumulatorFrag acc[L::in / frag];
#pragma unroll
    for (int n = 0; n < L::in / frag; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int k = 0; k < L::out / frag; ++k) {
      RowMajorA dz;
      wmma::load_matrix_sync(dz, strip + k * frag, tile_ld);
#pragma unroll
      for (int n = 0; n < L::in / frag; ++n) {
        RowMajorB w;
        wmma::load_matrix_sync(w, weights + k * frag * L::weight_ld + n * frag, L::weight_ld);
        wmma::mma_sync(acc[n], dz, w, acc[n]);
      }
    }
    __syncwarp();  // every lane has read the strip: it may now be overwritten by dZ_{l-1}

    float* warp_scratch = scratch + warp * frag * frag;
    const int r = lane_row(lane);
    const int row = row0 + warp * frag + r;
#pragma unroll
    for (int n = 0; n < L::in / frag; ++n) {
      wmma::store_matrix_sync(warp_scratch, acc[n], frag, wmma::mem_row_major);
      __syncwarp();  // the fragment is in scratch
      const int col = n * frag + lane_col(lane);
      float v[8];
      read_lane_values(warp_scratch, lane, v);
      float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};  // rows past the batch: gradient 0
      if (row < batch)
        unpack8<Half>(*reinterpret_cast<const uint4*>(saved_activation + static_cast<std::size_t>(row) * L::in + col),
                      a);
      for (int t = 0; t < 8; ++t) v[t] = a[t] > 0.0f ? v[t] : 0.0f;
      const uint4 bits = pack8<Half>(v);
      *reinterpret_cast<uint4*>(strip + r * tile_ld + col) = bits;
      if (row < batch) *reinterpret_cast<uint4*>(dz_prev + static_cast<std::size_t>(row) * L::in + col) = bits;
      __syncwarp();  // every lane has read scratch before the next fragment is stored there
    }
  }

  template <int l>
  __device__ static void backprop_layers(Half* tile, Half* weights, float* scratch, const float* params,
                                         const Buffers& saved, int row0, int batch) {
    backprop_layer<l>(tile, weights, scratch, params, saved.activation[l], saved.dz[l - 1], row0, batch);
    if constexpr (l > 1) backprop_layers<l - 1>(tile, weights, scratch, params, saved, row0, batch);
  }

  __device__ static void chain_tile(unsigned char* smem, const float* params, const float* dy, const Buffers& saved,
                                    int batch) {
    if constexpr (layers >= 2) {
      Half* tile = reinterpret_cast<Half*>(smem);
      Half* weights = tile + tile_elems;
      float* scratch = reinterpret_cast<float*>(weights + weight_elems);
      const int row0 = static_cast<int>(blockIdx.x) * tile_rows;
      load_tile_rows<Layer<layers - 1>::out>(tile, tile_ld, dy, row0, batch);  // dZ_{L-1} = dy
      backprop_layers<layers - 1>(tile, weights, scratch, params, saved, row0, batch);
    }
  }

  // ---- backward 2: per-chunk weight and bias gradients ----

  // Over the rows [begin, end) of chunk blockIdx.x:
  //   dW_l = dZ_l^T A_l    dZ_l^T: (out, rows) = dZ_l (rows, out) read column-major   A_l: (rows, in)
  //   db_l = sum over rows of dZ_l
  // into partial[chunk][weight_offset .. bias_offset + out). 16x16 output fragments are dealt to
  // the warps round-robin; each accumulates over the chunk, 128 rows (8 k-steps) at a time.
  template <int l>
  __device__ static void weight_grad_chunk(unsigned char* smem, const float* x, const float* dy, const Buffers& saved,
                                           int batch) {
    using L = Layer<l>;
    constexpr int dz_ld = L::out + smem_pad;
    constexpr int a_ld = L::in + smem_pad;
    Half* dz_tile = reinterpret_cast<Half*>(smem);                              // (128, out)
    Half* a_tile = dz_tile + tile_rows * dz_ld;                                 // (128, in)
    float* bias_partial = reinterpret_cast<float*>(a_tile + tile_rows * a_ld);  // one per thread

    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid / 32;
    const int chunk = static_cast<int>(blockIdx.x);
    const int begin = chunk * saved.chunk_rows;
    const int end = min(batch, begin + saved.chunk_rows);

    constexpr int frag_cols = L::in / frag;
    constexpr int frag_count = (L::out / frag) * frag_cols;
    constexpr int frags_per_warp = (frag_count + warps - 1) / warps;  // warp's fragments: warp + i * warps
    AccumulatorFrag acc[frags_per_warp];
#pragma unroll
    for (int i = 0; i < frags_per_warp; ++i) wmma::fill_fragment(acc[i], 0.0f);

    // Bias: thread tid sums column tid % out over rows tid / out, + threads_per_col, ...
    constexpr int threads_per_col = threads / L::out;
    const int bias_col = tid % L::out;
    float bias_sum = 0.0f;

    for (int row0 = begin; row0 < end; row0 += tile_rows) {
      __syncthreads();  // every warp is done with the previous sub-tile
      if constexpr (l == layers - 1)
        load_tile_rows<L::out>(dz_tile, dz_ld, dy, row0, end);  // dZ_{L-1} = dy
      else
        load_tile_rows<L::out>(dz_tile, dz_ld, static_cast<const Half*>(saved.dz[l]), row0, end);
      if constexpr (l == 0)
        load_tile_rows<L::in>(a_tile, a_ld, x, row0, end);  // A_0 = x
      else
        load_tile_rows<L::in>(a_tile, a_ld, static_cast<const Half*>(saved.activation[l]), row0, end);
      __syncthreads();  // the sub-tile is complete

      for (int r = tid / L::out; r < tile_rows; r += threads_per_col)
        bias_sum += HalfFormat<Half>::widen(dz_tile[r * dz_ld + bias_col]);

#pragma unroll
      for (int i = 0; i < frags_per_warp; ++i) {
        const int f = warp + i * warps;
        if (f < frag_count) {            // uniform across the warp
          const int fi = f / frag_cols;  // output rows 16 fi .. (index into out)
          const int fj = f % frag_cols;  // output cols 16 fj .. (index into in)
#pragma unroll
          for (int k = 0; k < tile_rows / frag; ++k) {
            ColMajorA dz_t;  // dZ^T (out, rows): element (i, k) = dz_tile[k][i]
            wmma::load_matrix_sync(dz_t, dz_tile + k * frag * dz_ld + fi * frag, dz_ld);
            RowMajorB a;
            wmma::load_matrix_sync(a, a_tile + k * frag * a_ld + fj * frag, a_ld);
            wmma::mma_sync(acc[i], dz_t, a, acc[i]);
          }
        }
      }
    }

    float* partial = saved.partial + static_cast<std::size_t>(chunk) * num_params;
#pragma unroll
    for (int i = 0; i < frags_per_warp; ++i) {
      const int f = warp + i * warps;
      if (f < frag_count) {
        const int fi = f / frag_cols;
        const int fj = f % frag_cols;
        wmma::store_matrix_sync(partial + L::weight_offset + static_cast<std::size_t>(fi * frag) * L::in + fj * frag,
                                acc[i], L::in, wmma::mem_row_major);
      }
    }
    bias_partial[tid] = bias_sum;
    __syncthreads();
    if (tid < L::out) {
      float total = 0.0f;
      for (int p = 0; p < threads_per_col; ++p) total += bias_partial[p * L::out + tid];
      partial[L::bias_offset + tid] = total;
    }
  }

  template <int l>
  __device__ static void weight_grad_dispatch(int layer, unsigned char* smem, const float* x, const float* dy,
                                              const Buffers& saved, int batch) {
    if (layer == l)
      weight_grad_chunk<l>(smem, x, dy, saved, batch);
    else if constexpr (l + 1 < layers)
      weight_grad_dispatch<l + 1>(layer, smem, x, dy, saved, batch);
  }
};

// ---- kernels --------------------------------------------------------------------------------
// bf16 WMMA needs sm_80 (fp16 WMMA sm_70, but one gate serves both formats, and etnn builds for
// sm_80 and sm_90); for older targets the bodies compile to a trap (the launchers refuse
// devices below compute capability 8.0 before launching).

template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_forward_kernel(const float* params, const float* x, float* y, typename N::Buffers saved, int batch) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char fused_mlp_smem[];
  N::forward_tile(fused_mlp_smem, params, x, y, saved, batch);
#else
  __trap();
#endif
}

template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_chain_kernel(const float* params, const float* dy, typename N::Buffers saved, int batch) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char fused_mlp_smem[];
  N::chain_tile(fused_mlp_smem, params, dy, saved, batch);
#else
  __trap();
#endif
}

// Grid (chunks, layers).
template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_weight_grad_kernel(const float* x, const float* dy, typename N::Buffers saved, int batch) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char fused_mlp_smem[];
  N::template weight_grad_dispatch<0>(static_cast<int>(blockIdx.y), fused_mlp_smem, x, dy, saved, batch);
#else
  __trap();
#endif
}

// grads[p] += sum over c in 0..chunks-1 of partial[c * num_params + p], in that order.
template <class N>
__global__ void __launch_bounds__(threads) fused_mlp_reduce_kernel(float* grads, const float* partial, int chunks) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < N::num_params;
       p += stride) {
    float total = 0.0f;
    for (int c = 0; c < chunks; ++c) total += partial[static_cast<std::size_t>(c) * N::num_params + p];
    grads[p] += total;
  }
}

}  // namespace detail::fused_mlp

// Half: __nv_bfloat16 or __half.
template <class Half, int... Widths>
struct FusedMlp {
  static_assert(std::is_same_v<Half, __nv_bfloat16> || std::is_same_v<Half, __half>);
  static_assert(sizeof...(Widths) >= 2, "ETNN_FUSED_MLP_WIDTH: a fused MLP needs an input and an output width");
  static_assert(fused_mlp_widths_ok<Widths...>, "ETNN_FUSED_MLP_WIDTH: every width must be 16, 32, 64 or 128");

 private:
  using Net = detail::fused_mlp::Net<Half, Widths...>;
  using Buffers = typename Net::Buffers;

 public:
  static constexpr int layers = Net::layers;
  static constexpr std::size_t num_params = Net::num_params;

  // Bytes of `saved` at this batch: hidden activations A_1..A_{L-1} (Half, kept from forward to
  // backward), then backward's scratch: dZ_0..dZ_{L-2} (Half) and the per-chunk partial gradients.
  static std::size_t saved_bytes(int batch) {
    check_batch(batch);
    return layout(batch, nullptr).bytes;
  }

  // Training forward: x (batch, in) fp32 row-major -> y (batch, out) fp32 row-major; keeps the
  // hidden activations in `saved` (saved_bytes(batch) bytes, 256-byte aligned). One launch.
  static void forward(const float* params, const float* x, float* y, void* saved, int batch, cudaStream_t stream) {
    check_batch(batch);
    if (batch == 0) return;
    check_device_and_saved(saved);
    const Buffers buffers = layout(batch, saved).buffers;
    constexpr auto kernel = detail::fused_mlp::fused_mlp_forward_kernel<Net>;
    detail::fused_mlp::allow_dynamic_smem(kernel, Net::tile_smem_bytes);
    kernel<<<detail::fused_mlp::ceil_div(batch, detail::fused_mlp::tile_rows), detail::fused_mlp::threads,
             Net::tile_smem_bytes, stream>>>(params, x, y, buffers, batch);
    check_launch("fused_mlp_forward_kernel");
  }

  // Backward after forward(params, x, ., saved, batch): dy (batch, out) fp32 = dL/dy.
  // ACCUMULATES (+=) dL/dparams into grads (params' layout). dL/dx is not computed. `saved`'s
  // scratch part is overwritten (its activations are not). Three launches (two when L = 1).
  static void backward(const float* params, float* grads, const float* x, void* saved, const float* dy, int batch,
                       cudaStream_t stream) {
    check_batch(batch);
    if (batch == 0) return;
    check_device_and_saved(saved);
    const Buffers buffers = layout(batch, saved).buffers;
    if constexpr (layers >= 2) {
      constexpr auto kernel = detail::fused_mlp::fused_mlp_chain_kernel<Net>;
      detail::fused_mlp::allow_dynamic_smem(kernel, Net::tile_smem_bytes);
      kernel<<<detail::fused_mlp::ceil_div(batch, detail::fused_mlp::tile_rows), detail::fused_mlp::threads,
               Net::tile_smem_bytes, stream>>>(params, dy, buffers, batch);
      check_launch("fused_mlp_chain_kernel");
    }
    {
      constexpr auto kernel = detail::fused_mlp::fused_mlp_weight_grad_kernel<Net>;
      detail::fused_mlp::allow_dynamic_smem(kernel, Net::weight_grad_smem_bytes);
      const dim3 grid(static_cast<unsigned>(buffers.chunks), static_cast<unsigned>(layers));
      kernel<<<grid, detail::fused_mlp::threads, Net::weight_grad_smem_bytes, stream>>>(x, dy, buffers, batch);
      check_launch("fused_mlp_weight_grad_kernel");
    }
    {
      constexpr int blocks =
          static_cast<int>((num_params + detail::fused_mlp::threads - 1) / detail::fused_mlp::threads);
      detail::fused_mlp::fused_mlp_reduce_kernel<Net>
          <<<blocks, detail::fused_mlp::threads, 0, stream>>>(grads, buffers.partial, buffers.chunks);
      check_launch("fused_mlp_reduce_kernel");
    }
  }

 private:
  struct Layout {
    std::size_t bytes;
    Buffers buffers;  // null pointers when laid out without a base
  };

  // Regions in order, each starting on a region_align boundary:
  //   A_h (batch, w_h) Half for 1 <= h < L;  dZ_l (batch, w_{l+1}) Half for 0 <= l < L-1;
  //   partial (chunks, num_params) fp32.
  static Layout layout(int batch, void* base) {
    constexpr int widths[] = {Widths...};
    unsigned char* bytes = static_cast<unsigned char*>(base);
    std::size_t offset = 0;
    auto take = [&](std::size_t size) -> unsigned char* {
      unsigned char* at = bytes == nullptr ? nullptr : bytes + offset;
      offset = detail::fused_mlp::round_up(offset + size, detail::fused_mlp::region_align);
      return at;
    };
    const std::size_t rows = static_cast<std::size_t>(batch);
    Buffers buffers{};
    for (int h = 1; h < layers; ++h)
      buffers.activation[h] = reinterpret_cast<Half*>(take(rows * widths[h] * sizeof(Half)));
    for (int l = 0; l + 1 < layers; ++l)
      buffers.dz[l] = reinterpret_cast<Half*>(take(rows * widths[l + 1] * sizeof(Half)));
    const detail::fused_mlp::ChunkPlan plan = detail::fused_mlp::plan_chunks(batch < 1 ? 1 : batch);
    buffers.chunks = plan.chunks;
    buffers.chunk_rows = plan.chunk_rows;
    buffers.partial =
        reinterpret_cast<float*>(take(static_cast<std::size_t>(plan.chunks) * num_params * sizeof(float)));
    return {offset, buffers};
  }

  static void check_batch(int batch) {
    if (batch < 0) throw Error("etnn fused_mlp: negative batch " + std::to_string(batch));
  }

  static void check_device_and_saved(const void* saved) {
    if (saved == nullptr || reinterpret_cast<std::uintptr_t>(saved) % detail::fused_mlp::region_align != 0)
      throw Error("etnn fused_mlp: `saved` must be a 256-byte aligned device buffer of saved_bytes(batch)");
    int device = 0;
    int major = 0;
    ETNN_CHECK_CUDA(cudaGetDevice(&device));
    ETNN_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 8)
      throw DeviceError("etnn fused_mlp: its 16-bit tensor-core kernels need compute capability 8.0 or newer");
  }
};

}  // namespace etnn::cuda
