#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// fast_exp(x): e^x for float without a library call, so that a loop of them vectorises (a
// softmax's exponentials); other types, and device code, call std::exp. Cephes' expf:
// x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by a degree-7
// polynomial, 2^n written into the exponent bits: within 1e-7 relative of std::exp (x is clamped
// to [-87, 88], so e^-inf is 1.6e-38, not 0). NaN stays NaN.
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace etnn::detail {

template <class T>
ETNN_HD T fast_exp(T x) {
#if defined(__CUDA_ARCH__)
  return std::exp(x);
#else
  if constexpr (!std::is_same_v<T, float>) {
    return std::exp(x);
  } else {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    return p * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  }
#endif
}

}  // namespace etnn::detail
