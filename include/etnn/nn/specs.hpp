#pragma once
// Layer specs: what a user writes. A spec knows nothing of its input shape until the network
// binds it (`bind<In, Index>`), which yields a Layer (nn/layer.hpp).
//   nn::input<1, 28, 28>, nn::linear<512>, nn::flatten, nn::relu, ...
#include <ratio>
#include <string>
#include <type_traits>

#include "../core/static_checks.hpp"
#include "../expr/functors.hpp"
#include "activation_layer.hpp"
#include "dense_layer.hpp"
#include "flatten_layer.hpp"

namespace etnn::nn {

// Tag base of every layer spec; operator>> composes only these.
struct LayerSpec {};

template <class S>
concept Spec = std::is_base_of_v<LayerSpec, S>;

// The per-sample input shape; starts every network.
template <int... Dims>
struct Input : LayerSpec {
  using shape = Shape<Dims...>;
  static std::string describe() {
    std::string s = "input<";
    ((s += std::to_string(Dims) + ","), ...);
    s.back() = '>';
    return s;
  }
};

// Fully connected: y = x W^T + b with Out features, PyTorch's nn.Linear(in, Out).
template <int Out>
struct Linear : LayerSpec {
  static_assert(check::positive_width<Out>());
  template <ShapeType In, int Index>
  using bind = DenseLayer<In, Out, fn::Identity, Index>;
  static std::string describe() { return "linear<" + std::to_string(Out) + ">"; }
};

// (B, ...) -> (B, prod(...)), PyTorch's nn.Flatten().
struct Flatten : LayerSpec {
  template <ShapeType In, int Index>
  using bind = FlattenLayer<In, Index>;
  static std::string describe() { return "flatten"; }
};

// An elementwise activation F (expr/functors.hpp).
template <class F>
struct Activation : LayerSpec {
  using function = F;
  template <ShapeType In, int Index>
  using bind = ActivationLayer<In, F, Index>;
  static std::string describe() { return F::name; }
};

using ReLU = Activation<fn::Relu>;
template <class Slope = std::ratio<1, 100>>
using LeakyReLU = Activation<fn::LeakyRelu<Slope>>;
using Tanh = Activation<fn::Tanh>;
using Sigmoid = Activation<fn::Sigmoid>;
using GELU = Activation<fn::Gelu>;
using SiLU = Activation<fn::Silu>;

template <int... Dims>
inline constexpr Input<Dims...> input{};
template <int Out>
inline constexpr Linear<Out> linear{};
inline constexpr Flatten flatten{};
inline constexpr ReLU relu{};
// Negative slope 0.01 as PyTorch; another slope: nn::leaky_relu_with<std::ratio<1, 5>>.
inline constexpr LeakyReLU<> leaky_relu{};
template <class Slope>
inline constexpr LeakyReLU<Slope> leaky_relu_with{};
inline constexpr Tanh tanh{};
inline constexpr Sigmoid sigmoid{};
inline constexpr GELU gelu{};
inline constexpr SiLU silu{};

}  // namespace etnn::nn
