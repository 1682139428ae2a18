#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// The numbers a file holds (a .npy array's integers and floats, a CSV cell) as the values of a
// Dataset, checked: features and real-valued or multi-hot targets become float, class labels int.
//   to float: finite (unless allowed otherwise), within float's range; integers round to nearest
//   to int:   a whole number in [0, INT_MAX), the range of Dataset's class indices
// The readers turn a refusal's reason into a message naming the file and where the value is.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace etnn::data::detail {

// Why v cannot become a To (float or int), or null when it can, with the value in out.
template <class To, class From>
const char* convert_value(From v, To& out, bool allow_non_finite) noexcept {
  static_assert(std::is_same_v<To, float> || std::is_same_v<To, int>, "features and targets are float or int");
  if constexpr (std::is_floating_point_v<From>) {
    if (!std::isfinite(v)) {
      if (std::is_same_v<To, int> || !allow_non_finite) {
        return std::is_same_v<To, int> ? "is not a number; class labels are whole numbers"
                                       : "is NaN or infinite; clean the data, or pass .allow_non_finite = true "
                                         "to keep such values";
      }
      out = static_cast<To>(v);
      return nullptr;
    }
    if constexpr (std::is_same_v<To, float>) {
      if (std::abs(v) > static_cast<From>(std::numeric_limits<float>::max())) {
        return "is beyond float's range (3.4e38); scale the values before saving them";
      }
    } else {
      if (v != std::trunc(v)) {
        return "is not a whole number but class labels are; round the labels, or load real values as an "
               "etnn::Shape<K> target";
      }
      if (v < 0 || v >= static_cast<From>(std::numeric_limits<int>::max())) {
        return "is outside [0, INT_MAX), the range of class indices; remap the labels to 0, 1, 2, ...";
      }
    }
    out = static_cast<To>(v);
  } else {
    if constexpr (std::is_same_v<To, int>) {
      if (std::cmp_less(v, 0) || std::cmp_greater_equal(v, std::numeric_limits<int>::max())) {
        return "is outside [0, INT_MAX), the range of class indices; remap the labels to 0, 1, 2, ...";
      }
    }
    out = static_cast<To>(v);
  }
  return nullptr;
}

// v as a message shows it: integers exactly, floats in the shortest form that reads back ("0.1", "1e+300").
template <class From>
std::string value_string(From v) {
  char text[64];  // room for any integer and the longest shortest double ("-2.2250738585072014e-308")
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

}  // namespace etnn::data::detail
