#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// PyTorch's default initialisation of nn.Linear and nn.Conv2d (reset_parameters): weights by
// kaiming_uniform_(a = sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from
// the same bound. fan_in is in_features, or C K K for a convolution. nn.Embedding's: N(0, 1).
#include <cmath>
#include <cstddef>

#include "../core/random.hpp"

namespace etnn::nn {

template <class T>
void init_fan_in_uniform(T* p, std::size_t n, std::size_t fan_in, Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(rng.uniform(-bound, bound));
}

// N(0, 1) values, as nn.Embedding's reset_parameters draws its weight.
template <class T>
void init_standard_normal(T* p, std::size_t n, Rng& rng) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(rng.normal());
}

}  // namespace etnn::nn
