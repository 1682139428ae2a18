#pragma once
// Shared by the tests of the target kinds (data/targets.hpp): one small task per kind, a random
// dataset of it, and the loss that trains it.
//   ClassIndices        4 classes,             CrossEntropy
//   Shape<2>            2 real values,         MSE
//   MultiHot<3>         3 labels of 0 or 1,    MultiLabelSoftMargin
#include <cstddef>
#include <cstdint>
#include <vector>

#include <etnn/etnn.hpp>

#include "gradcheck.hpp"

namespace etnn::test {

template <class Y>
struct TargetTask;

template <>
struct TargetTask<data::ClassIndices> {
  static constexpr int outputs = 4;
  using Loss = loss::CrossEntropy;
  static int value(Rng& rng, std::size_t) { return static_cast<int>(rng.below(outputs)); }
};
template <>
struct TargetTask<Shape<2>> {
  static constexpr int outputs = 2;
  using Loss = loss::MSE;
  static float value(Rng& rng, std::size_t) { return static_cast<float>(rng.uniform(-2, 2)); }
};
template <>
struct TargetTask<data::MultiHot<3>> {
  static constexpr int outputs = 3;
  using Loss = loss::MultiLabelSoftMargin;
  static float value(Rng& rng, std::size_t) { return rng.uniform() < 0.4 ? 1.0f : 0.0f; }
};

// n samples of shape X with uniform features and random targets of kind Y, from `seed`.
template <ShapeType X, class Y>
data::Dataset<X, Y> random_dataset(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * X::size);
  fill_uniform(x.data(), x.size(), seed);
  std::vector<data::target_value<Y>> t(n * data::target_size<Y>);
  Rng rng(seed + 1);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = TargetTask<Y>::value(rng, i);
  return {std::move(x), std::move(t)};
}

}  // namespace etnn::test
