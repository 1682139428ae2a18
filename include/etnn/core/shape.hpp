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

// Tokens<T, V>: the per-sample shape of T token ids in [0, V), PyTorch's LongTensor of shape
// (B, T) fed to nn.Embedding(V, D). It is the rank-1 shape (T) to everything that moves samples
// (tensors, datasets, loaders): the ids travel as the tensor's element type, exact as integers up
// to 2^24 in float, and nn::embedding, the one layer that reads them, checks each id.
template <int T, int V>
struct Tokens : Shape<T> {
  static_assert(V > 0, "ETNN_SHAPE_NONPOSITIVE: Tokens<T, V> needs a vocabulary of V > 0 ids");
  static constexpr int vocabulary = V;
  // "(128) ids < 65"
  static std::string to_string() { return Shape<T>::to_string() + " ids < " + std::to_string(V); }
};

namespace detail {
template <class T> struct IsShape : std::false_type {};
template <int... D> struct IsShape<Shape<D...>> : std::true_type {};
template <int T, int V> struct IsShape<Tokens<T, V>> : std::true_type {};
template <class T> struct IsTokens : std::false_type {};
template <int T, int V> struct IsTokens<Tokens<T, V>> : std::true_type {};
}  // namespace detail

template <class T>
concept ShapeType = detail::IsShape<T>::value;

// A shape of token ids (Tokens<T, V>), which only nn::embedding reads.
template <class T>
concept TokenShape = detail::IsTokens<T>::value;

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
