#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// fast_exp(x): e^x for float without a library call, so that a loop of them vectorises (a
// softmax's exponentials); other types, and device code, call std::exp. Cephes' expf:
// x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by a degree-7
// polynomial, 2^n written into the exponent bits: within 1e-7 relative of std::exp (x is clamped
// to [-87, 88], so e^-inf is 1.6e-38, not 0). NaN stays NaN. Branch-free, with no float-to-int
// conversion, so that loops of it vectorise at -O2 and without -march.
// fast_erf(x): erf(x) for float the same way (GELU's erf): x is clamped to [-4, 4], where erf is
// +-1 in float, and erf(x) = x P(x^2) / Q(x^2) with P of degree 6 and Q of degree 4 (the rational
// approximation of XLA's and Eigen's vectorised erf): within 4e-7 absolute of erf, 6 float ulps
// at 1, and relative to erf near 0. NaN stays NaN.
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace etnn::detail {

// a b + c, fused where the CPU has an FMA instruction. Written out, so that the compiler has no
// choice left of which product to contract: its choice can differ between a loop's vector body
// and its scalar remainder, and the remainder's extent depends on how threads split the loop, so
// a result would depend on the thread count. (Without an FMA instruction there is nothing to
// contract.) Device code keeps nvcc's own contraction.
template <class T>
ETNN_INLINE ETNN_HD T fmadd(T a, T b, T c) {
#if !defined(__CUDA_ARCH__) && defined(__FP_FAST_FMAF)
  if constexpr (std::is_same_v<T, float>) return std::fma(a, b, c);
#endif
#if !defined(__CUDA_ARCH__) && defined(__FP_FAST_FMA)
  if constexpr (std::is_same_v<T, double>) return std::fma(a, b, c);
#endif
  return a * b + c;
}

// x with its magnitude clamped to that of the float whose bits are `below` (x < 0) or `above`
// (x >= 0); infinities too, NaN not. Done on the bits: a float select may trap, which keeps GCC
// from vectorising it under -ftrapping-math (the default); an integer select cannot. Host only.
ETNN_INLINE float clamp_magnitude(float x, std::int32_t below, std::int32_t above) {
  const std::int32_t bits = std::bit_cast<std::int32_t>(x);
  const std::int32_t magnitude = bits & 0x7fffffff;
  const std::int32_t limit = bits < 0 ? below : above;
  const bool clamped = (magnitude > limit) & (magnitude <= 0x7f800000);
  return std::bit_cast<float>(clamped ? (bits & INT32_MIN) | limit : bits);
}

template <class T>
ETNN_INLINE ETNN_HD T fast_exp(T x) {
#if defined(__CUDA_ARCH__)
  return std::exp(x);
#else
  if constexpr (!std::is_same_v<T, float>) {
    return std::exp(x);
  } else {
    x = clamp_magnitude(x, 0x42AE0000, 0x42B00000);  // to [-87, 88]: the bits of 87 and 88
    // k = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer in the low mantissa bits
    // (std::floor or a float-to-int conversion would block vectorisation the same way).
    // r = x - n ln 2, with ln 2 in two parts.
    const std::int32_t k = std::bit_cast<std::int32_t>(fmadd(x, 1.44269504088896341f, 12582912.0f)) - 0x4B400000;
    const float n = static_cast<float>(k);
    const float r = fmadd(n, 2.12194440e-4f, fmadd(-n, 0.693359375f, x));
    float p = 1.9875691500e-4f;
    p = fmadd(p, r, 1.3981999507e-3f);
    p = fmadd(p, r, 8.3334519073e-3f);
    p = fmadd(p, r, 4.1665795894e-2f);
    p = fmadd(p, r, 1.6666665459e-1f);
    p = fmadd(p, r, 5.0000001201e-1f);
    p = fmadd(p * r, r, r) + 1.0f;
    return p * std::bit_cast<float>((k + 127) << 23);
  }
#endif
}

template <class T>
ETNN_INLINE ETNN_HD T fast_erf(T x) {
#if defined(__CUDA_ARCH__)
  return std::erf(x);
#else
  if constexpr (!std::is_same_v<T, float>) {
    return std::erf(x);
  } else {
    x = clamp_magnitude(x, 0x40800000, 0x40800000);  // to [-4, 4]: the bits of 4
    const float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = fmadd(p, x2, 2.77068142495902e-08f);
    p = fmadd(p, x2, -2.10102402082508e-06f);
    p = fmadd(p, x2, -5.69250639462346e-05f);
    p = fmadd(p, x2, -7.34990630326855e-04f);
    p = fmadd(p, x2, -2.95459980854025e-03f);
    p = fmadd(p, x2, -1.60960333262415e-02f);
    float q = -1.45660718464996e-05f;
    q = fmadd(q, x2, -2.13374055278905e-04f);
    q = fmadd(q, x2, -1.68282697438203e-03f);
    q = fmadd(q, x2, -7.37332916720468e-03f);
    q = fmadd(q, x2, -1.42647390514189e-02f);
    return x * p / q;
  }
#endif
}

}  // namespace etnn::detail
