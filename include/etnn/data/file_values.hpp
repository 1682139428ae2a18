#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// The numbers a file holds (a .npy array's integers and floats, a CSV cell) as the values of a
// Dataset<X, Y>, checked:
//   feature            float: within float's range; finite unless the loader allows NaN and infinity
//   ClassIndices       int: a whole number in [0, INT_MAX)
//   Shape<K...>        float: finite, within float's range
//   MultiHot<K>        float: 0 or 1
// Integers convert to float rounding to nearest. Each function returns why the value cannot be
// converted, or null; the readers turn the reason into a message naming the file and the place.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "targets.hpp"

namespace etnn::data::detail {

template <class From>
const char* to_float(From v, float& out) noexcept {
  if constexpr (std::is_floating_point_v<From>) {
    if (std::isfinite(v) && std::abs(v) > static_cast<From>(std::numeric_limits<float>::max())) {
      return "is beyond float's range (3.4e38); scale the values before saving them";
    }
  }
  out = static_cast<float>(v);
  return nullptr;
}

template <class From>
const char* to_class_index(From v, int& out) noexcept {
  constexpr const char* outside = "is outside [0, INT_MAX), the range of class indices; remap the labels to 0, 1, 2, ...";
  if constexpr (std::is_floating_point_v<From>) {
    if (!std::isfinite(v) || v != std::trunc(v)) {
      return "is not a whole number but class labels are; round the labels, or load real values as an "
             "etnn::Shape<K> target";
    }
    if (v < 0 || v >= static_cast<From>(std::numeric_limits<int>::max())) return outside;
  } else {
    if (std::cmp_less(v, 0) || std::cmp_greater_equal(v, std::numeric_limits<int>::max())) return outside;
  }
  out = static_cast<int>(v);
  return nullptr;
}

// A feature value.
template <class From>
const char* to_feature(From v, float& out, bool allow_non_finite) noexcept {
  if constexpr (std::is_floating_point_v<From>) {
    if (!std::isfinite(v) && !allow_non_finite) {
      return "is NaN or infinite; clean the data, or pass .allow_non_finite = true to keep such features";
    }
  }
  return to_float(v, out);
}

// A target value of the kind Y.
template <TargetKind Y, class From>
const char* to_target(From v, target_value<Y>& out) noexcept {
  if constexpr (index_targets<Y>) {
    return to_class_index(v, out);
  } else {
    if constexpr (std::is_floating_point_v<From>) {
      if (!std::isfinite(v)) return "is NaN or infinite but targets must be finite; drop those samples";
    }
    if (const char* why = to_float(v, out)) return why;
    if (multi_hot_targets<Y> && out != 0.0f && out != 1.0f) {
      return "is not 0 or 1 as multi-hot targets are; for soft targets load an etnn::Shape<K> target";
    }
    return nullptr;
  }
}

// v as a message shows it: integers exactly, floats in the shortest form that reads back ("0.1", "1e+300").
template <class From>
std::string value_string(From v) {
  char text[64];  // room for any integer and the longest shortest double ("-2.2250738585072014e-308")
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

}  // namespace etnn::data::detail
