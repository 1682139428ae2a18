#pragma once
// The gradient check every layer test runs: a double-precision Net on a random batch with
// cross-entropy (labels b mod classes), every parameter checked (gradcheck.hpp), reported to doctest.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gradcheck.hpp"

namespace etnn::test {

// `prepare(model)` may set parameters first (e.g. move them off their initial values).
template <class Net, class Prepare>
void check_network_gradients(const std::string& name, int batch, std::uint64_t seed, Prepare&& prepare) {
  etnn::Model<Net, double> model(seed);
  prepare(model);
  etnn::Tensor<double, typename Net::input_shape> x(batch);
  fill_input<typename Net::input_shape>(x.data(), x.size(), seed + 100, 1.5);
  std::vector<int> y;
  for (int b = 0; b < batch; ++b) y.push_back(b % Net::output_shape::dims[0]);
  etnn::loss::CrossEntropy loss;
  const auto r = gradcheck(model, loss, x, y);
  INFO(name, ": ", r.first_failure);
  CHECK(r.checked == Net::num_params);
  CHECK(r.failed == 0);
  MESSAGE(name, " max relative error ", r.max_relative_error);
}

template <class Net>
void check_network_gradients(const std::string& name, int batch = 3, std::uint64_t seed = 1) {
  check_network_gradients<Net>(name, batch, seed, [](auto&) {});
}

}  // namespace etnn::test
