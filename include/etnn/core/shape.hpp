#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Shape<D0, D1, ...>: the per-sample shape of a tensor, known at compile time.
// The batch dimension is never part of a Shape; it is a runtime value of the tensor.
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include "checks.hpp"

namespace etnn {

template <int... Dims>
struct Shape {
  static_assert(etnn::check::shape_dims<Dims...>());

  static constexpr int rank = sizeof...(Dims);
  static constexpr std::size_t size = (std::size_t{1} * ... * static_cast<std::size_t>(Dims));
  static constexpr std::array<int, rank> dims{Dims...};

  // "(1, 28, 28)"
  static std::string to_string() {
    std::string s = "(";
    for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[static_cast<std::size_t>(i)]);
    return s + ")";
  }
};

namespace detail {
template <class T> struct IsShape : std::false_type {};
template <int... D> struct IsShape<Shape<D...>> : std::true_type {};
}  // namespace detail

template <class T>
concept ShapeType = detail::IsShape<T>::value;

// A flat shape of the same number of elements: Shape<1,28,28> -> Shape<784>.
template <ShapeType S>
using Flat = Shape<static_cast<int>(S::size)>;

// Dimension i of S, or 1 past its rank: lets a layer name the dimensions of a shape of the wrong
// rank long enough for its static_assert to explain the mismatch.
template <ShapeType S>
constexpr int dim_or_one(int i) {
  return i < S::rank ? S::dims[static_cast<std::size_t>(i)] : 1;
}

}  // namespace etnn
