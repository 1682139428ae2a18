#pragma once
// What the CUDA test files share: whether a usable GPU is present, random data, copies between
// the devices, the parity measure and tolerances, and the networks the parity tests train.
#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ratio>
#include <span>
#include <type_traits>
#include <vector>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;

namespace cuda_test {

inline bool gpu() {
  static const bool usable = etnn::cuda::detail::cuda_unavailable_reason().empty();
  return usable;
}

// n values uniform in [-scale, scale] from seed (etnn::test::fill_uniform).
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::vector<T> v(n);
  etnn::test::fill_uniform(v.data(), n, seed, scale);
  return v;
}

template <class T>
std::vector<T> to_host(const etnn::Buffer<T, etnn::Cuda>& b) {
  std::vector<T> v(b.size());
  etnn::copy_to_host(etnn::Cuda{}, v.data(), b.data(), b.size());
  return v;
}

template <class T>
etnn::Buffer<T, etnn::Cuda> to_device(const std::vector<T>& v) {
  etnn::Buffer<T, etnn::Cuda> b(v.size());
  etnn::copy_from_host(etnn::Cuda{}, b.data(), v.data(), v.size());
  return b;
}

// max_i |a_i - b_i| / max(1, |b_i|)
template <class T>
double max_relative_error(std::span<const T> a, std::span<const T> b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])) /
                                std::max(1.0, std::abs(static_cast<double>(b[i]))));
  return worst;
}
template <class T>
double max_relative_error(const std::vector<T>& a, const std::vector<T>& b) {
  return max_relative_error<T>(std::span<const T>(a), std::span<const T>(b));
}

template <class T>
constexpr double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;

// Every kind of layer etnn has, for the device parity tests and the compile-time checks:
// convolution with 2-d batch norm, 1-d batch norm, layer norm, dropout, a residual block, a
// concatenation with a softmax branch, log-softmax at the end (trained with NLL).
using EveryLayer = decltype(nn::input<3, 8, 8> >> nn::conv2d<4, 3> >> nn::batch_norm >> nn::relu >>
                            nn::avg_pool2d<2> >> nn::flatten >> nn::linear<32> >> nn::batch_norm >> nn::gelu >>
                            nn::layer_norm >> nn::dropout_with<std::ratio<1, 5>> >>
                            nn::residual(nn::linear<32> >> nn::tanh >> nn::linear<32>) >>
                            nn::concat(nn::linear<8> >> nn::relu, nn::linear<6> >> nn::softmax) >> nn::linear<10> >>
                            nn::log_softmax);
// Without dropout: its step can be recorded as a CUDA graph.
using Normalised = decltype(nn::input<3, 8, 8> >> nn::conv2d<4, 3> >> nn::batch_norm >> nn::relu >> nn::flatten >>
                            nn::linear<16> >> nn::batch_norm >> nn::layer_norm >>
                            nn::residual(nn::linear<16> >> nn::relu >> nn::linear<16>) >> nn::linear<10> >>
                            nn::log_softmax);
// The sequence layers: conv1d (strided too), positional_embedding, attention (causal) and the
// per-position layers over a float sequence, and an embedding over token ids.
using SequenceLayers = decltype(nn::input<12, 8> >> nn::conv1d<8, 3, nn::pad<1>> >> nn::gelu >>
                                nn::positional_embedding >> nn::residual(nn::layer_norm >> nn::multi_head_attention<2, true>) >>
                                nn::residual(nn::layer_norm >> nn::linear<16> >> nn::gelu >> nn::linear<8>) >>
                                nn::conv1d<4, 2, nn::stride<2>> >> nn::flatten >> nn::linear<10> >> nn::log_softmax);
using TokenLayers = decltype(nn::input_tokens<12, 9> >> nn::embedding<8> >> nn::positional_embedding >>
                             nn::residual(nn::layer_norm >> nn::multi_head_attention<4>) >> nn::layer_norm >>
                             nn::flatten >> nn::linear<10> >> nn::log_softmax);

}  // namespace cuda_test
