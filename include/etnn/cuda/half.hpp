#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The two 16-bit formats of etnn's mixed precision on the device, as kernels convert to and from
// them: __nv_bfloat16 (etnn::bf16: fp32's exponent range, 8 bits of mantissa) and __half
// (etnn::fp16: 11 bits of mantissa, overflows past 65504). Both are 2 bytes. Rounding is to
// nearest, ties to even; a pair holds the value at the lower address in .x.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

namespace etnn::cuda::detail {

template <class Half>
struct HalfFormat;

template <>
struct HalfFormat<__nv_bfloat16> {
  using pair = __nv_bfloat162;
  __device__ static __nv_bfloat16 round(float v) { return __float2bfloat16(v); }
  __device__ static pair round2(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
  __device__ static float widen(__nv_bfloat16 h) { return __bfloat162float(h); }
};

template <>
struct HalfFormat<__half> {
  using pair = __half2;
  __device__ static __half round(float v) { return __float2half_rn(v); }
  __device__ static pair round2(float lo, float hi) { return __floats2half2_rn(lo, hi); }
  __device__ static float widen(__half h) { return __half2float(h); }
};

inline constexpr std::size_t half_bytes = 2;
static_assert(sizeof(__nv_bfloat16) == half_bytes && sizeof(__half) == half_bytes);

}  // namespace etnn::cuda::detail
