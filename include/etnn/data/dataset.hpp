#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// Dataset<S, Y>: n samples of the static shape S with targets of the kind Y (targets.hpp), held in
// host memory.
//   features: n * S::size floats, sample i at [i * S::size, (i + 1) * S::size), row-major in S
//   targets:  n * target_size<Y> values, sample i's at [i * target_size<Y>, (i + 1) * target_size<Y>):
//             Y = ClassIndices (the default): n ints in [0, INT_MAX), class indices
//             Y = Shape<K...>:                n rows of K... floats, real values
//             Y = MultiHot<K>:                n rows of K floats, each 0 or 1
//   etnn::data::Dataset<etnn::Shape<8>, etnn::Shape<1>> data(std::move(x), std::move(t));  // regression
// For S = Tokens<T, V> every feature value must be a token id, an integer in [0, V).
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../core/token_ids.hpp"
#include "targets.hpp"

namespace etnn::data::detail {
inline void check_normalization(float mean, float stddev, const char* who) {
  if (!(stddev > 0.0f) || !std::isfinite(stddev) || !std::isfinite(mean)) {
    throw Error(std::string(who) + ": mean " + std::to_string(mean) + " and stddev " + std::to_string(stddev) +
                " must be finite with stddev > 0; compute them with etnn::data::mean and etnn::data::stddev on "
                "a non-constant training set");
  }
}
}  // namespace etnn::data::detail

namespace etnn::data {

template <ShapeType S, class Y = ClassIndices>
class Dataset {
  static_assert(check::target_kind<TargetKind<Y>>());

 public:
  using shape = S;
  using target_kind = Y;
  using target_type = target_value<Y>;

  Dataset() = default;
  Dataset(std::vector<float> features, std::vector<target_type> targets)
      : features_(std::move(features)), targets_(std::move(targets)) {
    const std::size_t n = targets_.size() / target_size<Y>;
    if (features_.size() % S::size != 0 || targets_.size() % target_size<Y> != 0 || features_.size() / S::size != n) {
      throw ShapeError("etnn::data::Dataset: " + std::to_string(features_.size()) + " feature values for " +
                       std::to_string(targets_.size()) + (class_targets<Y> ? " labels" : " target values") +
                       "; samples of shape " + S::to_string() +
                       " need " + std::to_string(S::size) + " values each" +
                       (class_targets<Y> ? std::string(" and one label")
                                         : " and " + std::to_string(target_size<Y>) + " target values " +
                                               target_shape<Y>::to_string()) +
                       ", so pass " + std::to_string(S::size) + " features per " +
                       (class_targets<Y> ? "label" : std::to_string(target_size<Y>) + " target values"));
    }
    num_classes_ = check_targets<Y>(targets_, "etnn::data::Dataset");
    // Token ids once here, for the batches a loader stages to a device (nn::embedding checks
    // them on every CPU forward, but cannot on a device).
    if constexpr (TokenShape<S>)
      etnn::detail::check_token_ids<S::dims[0], S::vocabulary>(features_.data(), features_.size(), "etnn::data::Dataset");
  }

  // Number of samples.
  std::size_t size() const noexcept { return targets_.size() / target_size<Y>; }
  // First of the S::size values of sample i (i < size()).
  const float* sample(std::size_t i) const noexcept { return features_.data() + i * S::size; }
  // First of the target_size<Y> target values of sample i.
  const target_type* target(std::size_t i) const noexcept { return targets_.data() + i * target_size<Y>; }
  // The class index of sample i.
  int label(std::size_t i) const noexcept
    requires class_targets<Y>
  {
    return targets_[i];
  }
  // Largest label + 1 (0 when empty).
  int num_classes() const noexcept
    requires class_targets<Y>
  {
    return num_classes_;
  }
  std::span<const float> features() const noexcept { return features_; }
  std::span<const target_type> targets() const noexcept { return targets_; }
  std::span<const int> labels() const noexcept
    requires class_targets<Y>
  {
    return targets_;
  }

  // A copy of samples [first, first + count); num_classes() is recomputed from the copied labels.
  Dataset subset(std::size_t first, std::size_t count) const {
    if (first > size() || count > size() - first) {
      throw ShapeError("etnn::data::Dataset::subset: samples [" + std::to_string(first) + ", " +
                       std::to_string(first) + " + " + std::to_string(count) + ") are outside a dataset of " +
                       std::to_string(size()) + "; keep first + count <= size()");
    }
    const auto values = features_.begin() + static_cast<std::ptrdiff_t>(first * S::size);
    const auto targets = targets_.begin() + static_cast<std::ptrdiff_t>(first * target_size<Y>);
    return Dataset(std::vector<float>(values, values + static_cast<std::ptrdiff_t>(count * S::size)),
                   std::vector<target_type>(targets, targets + static_cast<std::ptrdiff_t>(count * target_size<Y>)));
  }

  // The same features with other targets (one row of target_size<Y2> per sample), e.g. class
  // labels mapped to multi-hot attributes: std::move(data).with_targets<MultiHot<6>>(rows).
  template <class Y2>
  Dataset<S, Y2> with_targets(std::vector<target_value<Y2>> targets) && {
    return Dataset<S, Y2>(std::move(features_), std::move(targets));
  }

  // x = (x - mean) / stddev for every feature value, in float, like torchvision's
  // transforms.Normalize((mean,), (stddev,)) on one channel.
  void normalize(float mean, float stddev) {
    detail::check_normalization(mean, stddev, "etnn::data::Dataset::normalize");
    for (float& x : features_) x = (x - mean) / stddev;
  }

 private:
  std::vector<float> features_;
  std::vector<target_type> targets_;
  int num_classes_ = 0;  // class indices only
};

}  // namespace etnn::data

namespace etnn::data::detail {
template <ShapeType S, class Y>
void require_values(const data::Dataset<S, Y>& data, const char* where) {
  if (data.features().empty()) {
    throw Error(std::string(where) + ": the dataset is empty; there is no statistic to compute");
  }
}
}  // namespace etnn::data::detail

namespace etnn::data {

// Mean of all feature values, summed in double.
template <ShapeType S, class Y>
double mean(const Dataset<S, Y>& data) {
  detail::require_values(data, "etnn::data::mean");
  double sum = 0.0;
  for (float x : data.features()) sum += x;
  return sum / static_cast<double>(data.features().size());
}

// Population standard deviation of all feature values: sqrt(sum (x - mean)^2 / N), in double.
template <ShapeType S, class Y>
double stddev(const Dataset<S, Y>& data) {
  detail::require_values(data, "etnn::data::stddev");
  const double m = mean(data);
  double sum = 0.0;
  for (float x : data.features()) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(data.features().size()));
}

}  // namespace etnn::data
