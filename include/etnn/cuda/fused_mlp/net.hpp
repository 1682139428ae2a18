#pragma once
// Private to cuda/fused_mlp.hpp: the fused MLP's per-layer device code (Net): the forward layers, the
// backprop (dZ chain) layers and the per-chunk weight and bias gradients, each run by a whole block.
#include <mma.h>

#include <cstddef>

#include "geometry.hpp"
#include "tile_io.hpp"

namespace etnn::cuda::detail::fused_mlp {

template <class Half, int... W>
struct Net : Geometry<Half, W...> {
  using Geo = Geometry<Half, W...>;
  using Geo::layers;
  using Geo::num_params;
  using typename Geo::Buffers;
  template <int l>
  using Layer = typename Geo::template Layer<l>;
  using Geo::tile_elems;
  using Geo::tile_ld;
  using Geo::weight_elems;
  using RowMajorA = RowMajorAFrag<Half>;
  using ColMajorA = ColMajorAFrag<Half>;
  using RowMajorB = RowMajorBFrag<Half>;
  using ColMajorB = ColMajorBFrag<Half>;

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

}  // namespace etnn::cuda::detail::fused_mlp
