#pragma once
// Every compile-time shape and type check of etnn, in one place. Each check is a consteval
// function whose static_assert message starts with a grep-able key and says how to fix it;
// the node that needs it writes `static_assert(check::something<...>());`.
// tests/compile_fail/ holds one program per message.
#include <type_traits>

#include "shape.hpp"

namespace etnn::check {

template <class In>
consteval bool linear_input() {
  static_assert(In::rank == 1,
                "ETNN_SHAPE_MISMATCH: linear<N> expects a flat input (one dimension); "
                "insert nn::flatten before it");
  return true;
}

template <int N>
consteval bool positive_width() {
  static_assert(N > 0, "ETNN_BAD_WIDTH: linear<N> needs N > 0 output features");
  return true;
}

template <bool StartsWithInput>
consteval bool network_has_input() {
  static_assert(StartsWithInput,
                "ETNN_NO_INPUT: a network must start with nn::input<...> giving the per-sample "
                "input shape, e.g. nn::input<784> >> nn::linear<10>");
  return true;
}

template <bool InputComesFirst>
consteval bool input_first() {
  static_assert(InputComesFirst,
                "ETNN_INPUT_NOT_FIRST: nn::input<...> can only start a network; remove the "
                "second nn::input");
  return true;
}

template <bool IsLayer>
consteval bool is_layer_spec() {
  static_assert(IsLayer,
                "ETNN_NOT_A_LAYER: operator>> composes etnn::nn layer specs (nn::linear<N>, "
                "nn::relu, ...); the right-hand side is not one");
  return true;
}

template <bool HasLayers>
consteval bool network_has_layers() {
  static_assert(HasLayers, "ETNN_EMPTY_NETWORK: the network has an input but no layers; add e.g. nn::linear<N>");
  return true;
}

template <class Given, class Expected>
consteval bool input_scalar() {
  static_assert(std::is_same_v<Given, Expected>,
                "ETNN_INPUT_TYPE: the input's scalar type differs from the model's; convert the "
                "data or use etnn::Model<Net, float>");
  return true;
}

template <class T>
consteval bool model_scalar() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "ETNN_SCALAR_TYPE: etnn::Model's scalar type must be float or double");
  return true;
}

template <class Given, class Expected>
consteval bool input_shape() {
  static_assert(std::is_same_v<Given, Expected>,
                "ETNN_INPUT_SHAPE: the input's per-sample shape differs from the network's "
                "nn::input<...>; load or build the data with the network's input shape");
  return true;
}

template <class Out>
consteval bool class_scores() {
  static_assert(Out::rank == 1,
                "ETNN_LOSS_SHAPE: this loss expects flat class scores (B, C); end the network "
                "with nn::linear<C> (or nn::flatten)");
  return true;
}

template <class Given, class Expected>
consteval bool target_shape() {
  static_assert(std::is_same_v<Given, Expected>,
                "ETNN_TARGET_SHAPE: the targets' per-sample shape must equal the network's "
                "output shape for this loss");
  return true;
}

}  // namespace etnn::check
