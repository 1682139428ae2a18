#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// Dataset<S>: n labelled samples of the static shape S, held in host memory.
//   features: n * S::size floats, sample i at [i * S::size, (i + 1) * S::size), row-major in S
//   labels:   n ints in [0, INT_MAX), class indices
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/shape.hpp"

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

template <ShapeType S>
class Dataset {
 public:
  using shape = S;

  Dataset() = default;
  Dataset(std::vector<float> features, std::vector<int> labels)
      : features_(std::move(features)), labels_(std::move(labels)) {
    if (features_.size() % S::size != 0 || features_.size() / S::size != labels_.size()) {
      throw ShapeError("etnn::data::Dataset: " + std::to_string(features_.size()) + " feature values for " +
                       std::to_string(labels_.size()) + " labels; samples of shape " + S::to_string() +
                       " need " + std::to_string(S::size) + " values each, so pass labels.size() * " +
                       std::to_string(S::size) + " features");
    }
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      // INT_MAX is excluded so that num_classes() = max label + 1 fits an int.
      if (labels_[i] < 0 || labels_[i] == std::numeric_limits<int>::max()) {
        throw ShapeError("etnn::data::Dataset: label " + std::to_string(i) + " is " + std::to_string(labels_[i]) +
                         "; labels are class indices in [0, INT_MAX), remap them before building the dataset");
      }
      num_classes_ = std::max(num_classes_, labels_[i] + 1);
    }
  }

  // Number of samples.
  std::size_t size() const noexcept { return labels_.size(); }
  // First of the S::size values of sample i (i < size()).
  const float* sample(std::size_t i) const noexcept { return features_.data() + i * S::size; }
  int label(std::size_t i) const noexcept { return labels_[i]; }
  // Largest label + 1 (0 when empty).
  int num_classes() const noexcept { return num_classes_; }
  std::span<const float> features() const noexcept { return features_; }
  std::span<const int> labels() const noexcept { return labels_; }

  // A copy of samples [first, first + count); num_classes() is recomputed from the copied labels.
  Dataset subset(std::size_t first, std::size_t count) const {
    if (first > size() || count > size() - first) {
      throw ShapeError("etnn::data::Dataset::subset: samples [" + std::to_string(first) + ", " +
                       std::to_string(first) + " + " + std::to_string(count) + ") are outside a dataset of " +
                       std::to_string(size()) + "; keep first + count <= size()");
    }
    const auto values = features_.begin() + static_cast<std::ptrdiff_t>(first * S::size);
    const auto labels = labels_.begin() + static_cast<std::ptrdiff_t>(first);
    return Dataset(std::vector<float>(values, values + static_cast<std::ptrdiff_t>(count * S::size)),
                   std::vector<int>(labels, labels + static_cast<std::ptrdiff_t>(count)));
  }

  // x = (x - mean) / stddev for every feature value, in float, like torchvision's
  // transforms.Normalize((mean,), (stddev,)) on one channel.
  void normalize(float mean, float stddev) {
    detail::check_normalization(mean, stddev, "etnn::data::Dataset::normalize");
    for (float& x : features_) x = (x - mean) / stddev;
  }

 private:
  std::vector<float> features_;
  std::vector<int> labels_;
  int num_classes_ = 0;
};

}  // namespace etnn::data

namespace etnn::data::detail {
template <ShapeType S>
void require_values(const data::Dataset<S>& data, const char* where) {
  if (data.features().empty()) {
    throw Error(std::string(where) + ": the dataset is empty; there is no statistic to compute");
  }
}
}  // namespace etnn::data::detail

namespace etnn::data {

// Mean of all feature values, summed in double.
template <ShapeType S>
double mean(const Dataset<S>& data) {
  detail::require_values(data, "etnn::data::mean");
  double sum = 0.0;
  for (float x : data.features()) sum += x;
  return sum / static_cast<double>(data.features().size());
}

// Population standard deviation of all feature values: sqrt(sum (x - mean)^2 / N), in double.
template <ShapeType S>
double stddev(const Dataset<S>& data) {
  detail::require_values(data, "etnn::data::stddev");
  const double m = mean(data);
  double sum = 0.0;
  for (float x : data.features()) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(data.features().size()));
}

}  // namespace etnn::data
