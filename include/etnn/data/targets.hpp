#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// The kinds of target a dataset holds, the Y of Dataset<X, Y>:
//   ClassIndices        one int per sample in [0, INT_MAX), a class index (the default)
//   etnn::Shape<K...>   real values: one float row of that shape per sample (regression)
//   MultiHot<K>         K floats per sample, each 0 or 1 (multi-label classification)
//   SequenceLabels<T>   T ints per sample: a class index per position of a sequence, or
//                       loss::ignore_index (-100) for a position no loss counts (a language model)
// A batch carries them as the loss takes them (loss/targets.hpp): class indices as a
// std::span<const int> of B values (B T for sequence labels), the others as a
// TensorView<const float, target_shape<Y>> of B rows.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "../core/error.hpp"

#include "../core/shape.hpp"
#include "../loss/targets.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"

namespace etnn::data {

using ClassIndices = loss::ClassIndices;

template <int K>
struct MultiHot {
  static_assert(check::labels_per_sample<K>());
};

template <int T>
struct SequenceLabels {
  static_assert(check::labels_per_sample<T>());
};

namespace detail {
template <class Y>
struct TargetTraits {
  static constexpr bool known = false;
};
template <>
struct TargetTraits<ClassIndices> {
  static constexpr bool known = true;
  using value_type = int;
  using shape = Shape<1>;
};
template <int... K>
struct TargetTraits<Shape<K...>> {
  static constexpr bool known = true;
  using value_type = float;
  using shape = Shape<K...>;
};
template <int K>
struct TargetTraits<MultiHot<K>> {
  static constexpr bool known = true;
  static constexpr bool multi_hot = true;
  using value_type = float;
  using shape = Shape<K>;
};
template <int T>
struct TargetTraits<SequenceLabels<T>> {
  static constexpr bool known = true;
  static constexpr bool sequence_labels = true;
  using value_type = int;
  using shape = Shape<T>;
};
}  // namespace detail

template <class Y>
concept TargetKind = detail::TargetTraits<Y>::known;

// The stored type of one target value: int for class indices, else float.
template <TargetKind Y>
using target_value = typename detail::TargetTraits<Y>::value_type;
// The per-sample shape of the targets (Shape<1> for class indices) and its number of values.
template <TargetKind Y>
using target_shape = typename detail::TargetTraits<Y>::shape;
template <TargetKind Y>
inline constexpr std::size_t target_size = target_shape<Y>::size;
template <TargetKind Y>
inline constexpr bool class_targets = std::is_same_v<Y, ClassIndices>;
template <TargetKind Y>
inline constexpr bool multi_hot_targets = requires { requires detail::TargetTraits<Y>::multi_hot; };
template <TargetKind Y>
inline constexpr bool sequence_label_targets = requires { requires detail::TargetTraits<Y>::sequence_labels; };
// Targets that batches carry as a span of class indices (one per sample, or one per position).
template <TargetKind Y>
inline constexpr bool index_targets = class_targets<Y> || sequence_label_targets<Y>;

// The targets of `rows` consecutive samples starting at `values` (rows * target_size<Y> values), as
// a batch carries them.
template <TargetKind Y>
auto target_rows(const target_value<Y>* values, int rows) {
  if constexpr (index_targets<Y>)
    return std::span<const int>(values, static_cast<std::size_t>(rows) * target_size<Y>);
  else
    return TensorView<const float, target_shape<Y>, Cpu>(values, rows);
}
template <TargetKind Y>
using target_batch = decltype(target_rows<Y>(nullptr, 0));

// Throws etnn::ShapeError, naming `who` and the sample, unless every target value fits its kind:
// a class index in [0, INT_MAX) (INT_MAX is excluded so that max label + 1 fits an int), that or
// loss::ignore_index at a sequence's position, 0 or 1 for multi-hot rows, a finite real value
// otherwise. Returns the largest label + 1 for class
// indices (0 when there are none), else 0.
template <TargetKind Y>
int check_targets(std::span<const target_value<Y>> targets, const char* who) {
  int num_classes = 0;
  for (std::size_t v = 0; v < targets.size(); ++v) {
    const target_value<Y> t = targets[v];
    const auto fail = [&](const char* advice) {
      const std::string what = class_targets<Y> ? "label " + std::to_string(v)
                               : "the target of sample " + std::to_string(v / target_size<Y>) +
                                     (target_size<Y> > 1 ? " (value " + std::to_string(v % target_size<Y>) + ")" : "");
      throw ShapeError(std::string(who) + ": " + what + " is " + std::to_string(t) + "; " + advice);
    };
    if constexpr (class_targets<Y>) {
      if (t < 0 || t == std::numeric_limits<int>::max())
        fail("labels are class indices in [0, INT_MAX), remap them before building the dataset");
      num_classes = std::max(num_classes, t + 1);
    } else if constexpr (sequence_label_targets<Y>) {
      if (t == loss::ignore_index) continue;
      if (t < 0 || t == std::numeric_limits<int>::max())
        fail("sequence labels are class indices in [0, INT_MAX) or etnn::loss::ignore_index (-100)");
      num_classes = std::max(num_classes, t + 1);
    } else if constexpr (multi_hot_targets<Y>) {
      if (t != 0.0f && t != 1.0f) fail("multi-hot targets are 0 or 1 (for soft targets use etnn::Shape<K> targets)");
    } else if (!std::isfinite(t)) {
      fail("real-valued targets must be finite");
    }
  }
  return num_classes;
}

}  // namespace etnn::data
