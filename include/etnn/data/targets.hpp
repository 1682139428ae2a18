#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// The kinds of target a dataset holds, the Y of Dataset<X, Y>:
//   ClassIndices        one int per sample in [0, INT_MAX), a class index (the default)
//   etnn::Shape<K...>   real values: one float row of that shape per sample (regression)
//   MultiHot<K>         K floats per sample, each 0 or 1 (multi-label classification)
// A batch carries them as the loss takes them (loss/targets.hpp): class indices as a
// std::span<const int> of B values, the others as a TensorView<const float, target_shape<Y>> of
// B rows.
#include <cstddef>
#include <span>
#include <type_traits>

#include "../core/shape.hpp"
#include "../loss/targets.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"

namespace etnn::data {

using ClassIndices = loss::ClassIndices;

template <int K>
struct MultiHot {
  static_assert(check::multi_hot_width<K>());
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
  using value_type = float;
  using shape = Shape<K>;
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
inline constexpr bool multi_hot_targets = !class_targets<Y> && !std::is_same_v<Y, target_shape<Y>>;

// The targets of `rows` consecutive samples starting at `values` (rows * target_size<Y> values), as
// a batch carries them.
template <TargetKind Y>
auto target_rows(const target_value<Y>* values, int rows) {
  if constexpr (class_targets<Y>)
    return std::span<const int>(values, static_cast<std::size_t>(rows));
  else
    return TensorView<const float, target_shape<Y>, Cpu>(values, rows);
}
template <TargetKind Y>
using target_batch = decltype(target_rows<Y>(nullptr, 0));

}  // namespace etnn::data
