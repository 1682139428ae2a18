#pragma once
// Private to cuda/fused_mlp.hpp: tile I/O of the fused MLP's kernels: block-wide copies of row tiles
// and weights from global into shared memory as Half, packing 8 values, the lane mapping of the
// fragment epilogue, and the WMMA fragment types.
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../half.hpp"
#include "geometry.hpp"

namespace etnn::cuda::detail::fused_mlp {

namespace wmma = nvcuda::wmma;

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

}  // namespace etnn::cuda::detail::fused_mlp
