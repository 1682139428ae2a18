#pragma once
// Gradient check in double precision against central finite differences, with PyTorch's
// gradcheck tolerances: |analytic - numeric| <= atol + rtol |numeric|, atol 1e-5, rtol 1e-3.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

#include "flat_index.hpp"

namespace etnn::test {

struct GradcheckResult {
  std::size_t checked = 0;
  std::size_t failed = 0;
  double max_relative_error = 0;  // over entries whose gradient magnitude exceeds atol
  std::string first_failure;
};

inline constexpr double grad_atol = 1e-5;
inline constexpr double grad_rtol = 1e-3;
inline constexpr double grad_eps = 1e-6;

// Checks d loss(model(x), y) / d params for every parameter of a double-precision model.
template <class Model, class Loss, class X, class Y>
GradcheckResult gradcheck(Model& model, Loss& loss, const X& x, const Y& y) {
  static_assert(std::is_same_v<typename Model::value_type, double>, "gradcheck runs in double precision");
  etnn::optim::SGD opt(model, {.lr = 0.0f});
  etnn::Trainer trainer(model, loss, opt);
  model.zero_grad();
  trainer.accumulate_gradients(x, y);

  auto loss_at = [&] {
    auto out = model.forward(x);
    if constexpr (std::is_same_v<typename Loss::target_kind, etnn::loss::ClassIndices>) {
      return loss.value(etnn::Cpu{}, etnn::const_view(out), std::span<const int>(y));
    } else {
      return loss.value(etnn::Cpu{}, etnn::const_view(out), etnn::const_view(y));
    }
  };

  GradcheckResult r;
  double* w = model.parameters();
  const double* g = model.gradients();
  for (const auto& p : Model::named_parameters()) {
    for (std::size_t k = 0; k < p.numel; ++k) {
      const std::size_t i = p.offset + k;
      const double saved = w[i];
      w[i] = saved + grad_eps;
      const double up = loss_at();
      w[i] = saved - grad_eps;
      const double down = loss_at();
      w[i] = saved;
      const double numeric = (up - down) / (2 * grad_eps);
      const double diff = std::abs(g[i] - numeric);
      ++r.checked;
      if (std::max(std::abs(numeric), std::abs(g[i])) > grad_atol)
        r.max_relative_error = std::max(r.max_relative_error, diff / std::max(std::abs(numeric), std::abs(g[i])));
      if (diff > grad_atol + grad_rtol * std::abs(numeric)) {
        if (r.failed++ == 0)
          r.first_failure = p.name + "[" + std::to_string(k) + "]: analytic " + std::to_string(g[i]) +
                            ", numeric " + std::to_string(numeric);
      }
    }
  }
  // The zeros that align each tensor (nn/program.hpp) stay zero, and so do their gradients.
  std::vector<bool> in_tensor(Model::flat_size, false);
  for (const auto& p : Model::named_parameters()) std::fill_n(in_tensor.begin() + p.offset, p.numel, true);
  for (std::size_t i = 0; i < Model::flat_size; ++i) {
    if (!in_tensor[i] && (w[i] != 0 || g[i] != 0) && r.failed++ == 0)
      r.first_failure = "flat index " + std::to_string(i) + ", between tensors: value " + std::to_string(w[i]) +
                        ", gradient " + std::to_string(g[i]);
  }
  return r;
}

// Deterministic pseudo-random values in [-scale, scale) for test inputs.
template <class T>
void fill_uniform(T* data, std::size_t n, std::uint64_t seed, double scale = 1.0) {
  etnn::Rng rng(seed);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(rng.uniform(-scale, scale));
}

// The same for every parameter tensor of a model, in state_dict order from one stream (the zeros
// between tensors stay zero).
template <class Model>
void fill_parameters_uniform(Model& model, std::uint64_t seed, double scale = 1.0) {
  etnn::Rng rng(seed);
  for (const auto& p : Model::named_parameters())
    for (std::size_t k = 0; k < p.numel; ++k)
      model.parameters()[p.offset + k] = static_cast<typename Model::value_type>(rng.uniform(-scale, scale));
}

// Token ids in [0, vocabulary), as a dataset of Tokens<T, V> samples holds them.
template <class T>
void fill_token_ids(T* data, std::size_t n, std::uint64_t seed, int vocabulary) {
  etnn::Rng rng(seed);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(rng.below(static_cast<std::uint64_t>(vocabulary)));
}

// A random input for a network: ids for Tokens<T, V>, else uniform values in [-scale, scale].
template <class Shape, class T>
void fill_input(T* data, std::size_t n, std::uint64_t seed, double scale = 1.0) {
  if constexpr (etnn::TokenShape<Shape>) fill_token_ids(data, n, seed, Shape::vocabulary);
  else fill_uniform(data, n, seed, scale);
}

}  // namespace etnn::test
