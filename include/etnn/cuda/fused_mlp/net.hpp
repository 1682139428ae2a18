#pragma once
// Private to cuda/fused_mlp.hpp: the fused MLP's per-layer device code (Net): the forward layers, the
// backprop (dZ chain) layers and the per-chunk weight and bias gradients, each run by a whole block.
#include <mma.h>

#include <cstddef>
#include <type_traits>

#include "../../expr/fused_mlp_padding.hpp"
#include "geometry.hpp"
#include "tile_io.hpp"

namespace etnn::cuda::detail::fused_mlp {

template <class Half, class Act, int... W>
struct Net : Geometry<Half, Act, W...> {
  using Geo = Geometry<Half, Act, W...>;
  using Geo::layers;
  using Geo::num_params;
  using typename Geo::layout;
  using typename Geo::Buffers;
  template <int l>
  using Layer = typename Geo::template Layer<l>;
  using Geo::tile_elems;
  using Geo::tile_ld;
  using Geo::weight_elems;
  using RowMajorA = RowMajorAFrag<Half>;
  using ColMajorA = ColMajorAFrag<Half>;
  using RowMajorB = RowMajorBFrag<Half>;

  // ---- the product of every forward and chain layer ----

  // Loads W_l (out, in) into shared `weights` (row-major, row pitch weight_ld), then, for the warp's
  // 16 rows `strip` of `tile` (row pitch tile_ld) holding S (16, K) as Half:
  //   acc[n] = (S B)[:, 16n .. 16n+15] = sum_k S[:, 16k..] (16x16) * B[16k.., 16n..] (16x16)
  // where B (K, N) is W_l read in BLayout:
  //   wmma::col_major: B = W_l^T (in, out), W_l row-major read as column-major: element (k, n) = W_l[n][k]
  //   wmma::row_major: B = W_l (out, in) as it is:                              element (k, n) = W_l[k][n]
  // Each fragment then goes through the warp's 16x16 fp32 scratch, and every lane calls
  //   epilogue(v, strip, r, row, col)
  // with its 8 values v = (S B)[r][col .. col+7] in fp32 (r = lane_row, col = 16n + lane_col), the
  // strip (which the epilogue may write over: every lane has read it) and row, the batch row of
  // strip row r. The forward layers (BLayout col_major) and the chain's (row_major) differ only in
  // B's layout and their epilogues.
  template <int l, class BLayout, class Epilogue>
  __device__ static void strip_times_weights(Half* tile, Half* weights, float* scratch, const float* params, int row0,
                                             Epilogue&& epilogue) {
    using L = Layer<l>;
    constexpr bool transposed = std::is_same_v<BLayout, wmma::col_major>;
    static_assert(transposed || std::is_same_v<BLayout, wmma::row_major>);
    constexpr int K = transposed ? L::in : L::out;
    constexpr int N = transposed ? L::out : L::in;
    using BFrag = wmma::fragment<wmma::matrix_b, frag, frag, frag, Half, BLayout>;

    __syncthreads();  // every warp is done with the previous weights; the tile (x, dy, a layer's output) is complete
    load_weights<L::out, L::in>(weights, params + L::weight_offset);
    __syncthreads();  // the weights are visible to every warp

    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    Half* strip = tile + warp * frag * tile_ld;

    AccumulatorFrag acc[N / frag];
#pragma unroll
    for (int n = 0; n < N / frag; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int k = 0; k < K / frag; ++k) {
      RowMajorA s;
      wmma::load_matrix_sync(s, strip + k * frag, tile_ld);
#pragma unroll
      for (int n = 0; n < N / frag; ++n) {
        BFrag b;  // B[16k.., 16n..]: W_l[16n..][16k..] read column-major, or W_l[16k..][16n..] row-major
        const Half* b_block = transposed ? weights + n * frag * L::weight_ld + k * frag
                                         : weights + k * frag * L::weight_ld + n * frag;
        wmma::load_matrix_sync(b, b_block, L::weight_ld);
        wmma::mma_sync(acc[n], s, b, acc[n]);
      }
    }
    __syncwarp();  // every lane has read the strip: the epilogue may now write over it

    float* warp_scratch = scratch + warp * frag * frag;
    const int r = lane_row(lane);
    const int row = row0 + warp * frag + r;
#pragma unroll
    for (int n = 0; n < N / frag; ++n) {
      wmma::store_matrix_sync(warp_scratch, acc[n], frag, wmma::mem_row_major);
      __syncwarp();  // the fragment is in scratch
      const int col = n * frag + lane_col(lane);
      float v[8];
      read_lane_values(warp_scratch, lane, v);
      epilogue(v, strip, r, row, col);
      __syncwarp();  // every lane has read scratch before the next fragment is stored there
    }
  }

  // ---- forward ----

  // One layer for the warp's 16 rows `strip` (row pitch tile_ld):
  //   Z = A W^T + b     A: (16, in) Half shared   W: (out, in) Half shared   Z: (16, out) fp32
  // Hidden layer: A_next = f(Z) (fn::activate, the CPU's fused layers' step) as Half written over
  // the strip (columns 0..out-1) and to saved_activation (batch, out) for rows < batch; where f'
  // needs Z, f'(Z) to saved_kept (batch, out) too. Output layer: y (batch, out) = Z in fp32.
  template <int l>
  __device__ static void forward_layer(Half* tile, Half* weights, float* scratch, const float* params,
                                       Half* saved_activation, Half* saved_kept, float* y, int row0, int batch) {
    using L = Layer<l>;
    // acc = A W^T (K = in, N = out): W^T (in, out) is W (out, in) row-major read as column-major,
    // element (k, n) = W[n][k].
    strip_times_weights<l, wmma::col_major>(
        tile, weights, scratch, params, row0, [&](float (&v)[8], Half* strip, int r, int row, int col) {
          for (int t = 0; t < 8; ++t) v[t] += params[L::bias_offset + col + t];
          if constexpr (L::hidden) {
            float kept[8];
            for (int t = 0; t < 8; ++t) v[t] = fn::activate(Act{}, v[t], &kept[t]);
            const uint4 bits = pack8<Half>(v);
            *reinterpret_cast<uint4*>(strip + r * tile_ld + col) = bits;
            if (row < batch) {
              const std::size_t at = static_cast<std::size_t>(row) * L::out + col;
              *reinterpret_cast<uint4*>(saved_activation + at) = bits;
              if constexpr (Act::derivative_needs_input) *reinterpret_cast<uint4*>(saved_kept + at) = pack8<Half>(kept);
            }
          } else {
            if (row < batch)
              for (int t = 0; t < 8; ++t) y[static_cast<std::size_t>(row) * L::out + col + t] = v[t];
          }
        });
  }

  template <int l>
  __device__ static void forward_layers(Half* tile, Half* weights, float* scratch, const float* params,
                                        const Buffers& saved, float* y, int row0, int batch) {
    forward_layer<l>(tile, weights, scratch, params, saved.activation[l + 1], saved.kept[l + 1], y, row0, batch);
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
  //   dZ_{l-1} = fn::chain_kept(f, dA_l, A_l, K_l): dA_l (.) f'(A_l), A_l from saved_activation
  //              (batch, in), or dA_l (.) K_l, K_l = f'(Z_{l-1}) from saved_kept, where f' needs Z
  // dZ_{l-1} (16, in) is written as Half over the strip and to dz_prev (batch, in) for rows < batch.
  template <int l>
  __device__ static void backprop_layer(Half* tile, Half* weights, float* scratch, const float* params,
                                        const Half* saved_activation, const Half* saved_kept, Half* dz_prev,
                                        int row0, int batch) {
    static_assert(l >= 1, "layer 0 has no dZ below it");
    using L = Layer<l>;
    // acc = dA_l = dZ_l W_l (K = out, N = in): W_l (out, in) row-major read as it is,
    // element (k, n) = W_l[k][n].
    strip_times_weights<l, wmma::row_major>(
        tile, weights, scratch, params, row0, [&](float (&v)[8], Half* strip, int r, int row, int col) {
          // Rows past the batch: A = 0 and K = 0, their gradient is dropped.
          float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
          float kept[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
          if (row < batch) {
            const std::size_t at = static_cast<std::size_t>(row) * L::in + col;
            unpack8<Half>(*reinterpret_cast<const uint4*>(saved_activation + at), a);
            if constexpr (Act::derivative_needs_input)
              unpack8<Half>(*reinterpret_cast<const uint4*>(saved_kept + at), kept);
          }
          for (int t = 0; t < 8; ++t) v[t] = fn::chain_kept(Act{}, v[t], a, kept, static_cast<std::size_t>(t));
          const uint4 bits = pack8<Half>(v);
          *reinterpret_cast<uint4*>(strip + r * tile_ld + col) = bits;
          if (row < batch) *reinterpret_cast<uint4*>(dz_prev + static_cast<std::size_t>(row) * L::in + col) = bits;
        });
  }

  template <int l>
  __device__ static void backprop_layers(Half* tile, Half* weights, float* scratch, const float* params,
                                         const Buffers& saved, int row0, int batch) {
    backprop_layer<l>(tile, weights, scratch, params, saved.activation[l], saved.kept[l], saved.dz[l - 1], row0,
                      batch);
    if constexpr (l > 1) backprop_layers<l - 1>(tile, weights, scratch, params, saved, row0, batch);
  }

  // The input gradient, from the warp's 16 rows `strip` holding dZ_0 (16, w_1):
  //   dX = dZ_0 W_0      W_0: (w_1, w_0) Half shared row-major      dX: (batch, w_0) fp32, rows < batch
  __device__ static void input_gradient(Half* tile, Half* weights, float* scratch, const float* params, float* dx,
                                        int row0, int batch) {
    constexpr int in = Layer<0>::in;
    strip_times_weights<0, wmma::row_major>(tile, weights, scratch, params, row0,
                                            [&](float (&v)[8], Half*, int, int row, int col) {
                                              if (row < batch)
                                                for (int t = 0; t < 8; ++t)
                                                  dx[static_cast<std::size_t>(row) * in + col + t] = v[t];
                                            });
  }

  // dZ_{L-1} = dy down to dZ_0 (layers >= 2), then dX when dx is not null (the same for every block).
  __device__ static void chain_tile(unsigned char* smem, const float* params, const float* dy, const Buffers& saved,
                                    float* dx, int batch) {
    Half* tile = reinterpret_cast<Half*>(smem);
    Half* weights = tile + tile_elems;
    float* scratch = reinterpret_cast<float*>(weights + weight_elems);
    const int row0 = static_cast<int>(blockIdx.x) * tile_rows;
    load_tile_rows<Layer<layers - 1>::out>(tile, tile_ld, dy, row0, batch);  // dZ_{L-1} = dy
    if constexpr (layers >= 2) backprop_layers<layers - 1>(tile, weights, scratch, params, saved, row0, batch);
    if (dx != nullptr) input_gradient(tile, weights, scratch, params, dx, row0, batch);
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
