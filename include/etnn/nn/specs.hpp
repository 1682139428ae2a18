#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// Layer specs: what a user writes. A spec knows nothing of its input shape until the network
// binds it (`bind<In, Index>`), which yields a Layer (nn/layer.hpp).
//   nn::input<1, 28, 28>, nn::linear<512>, nn::flatten, nn::relu, ...
// A spec that can absorb the activation after it (linear, conv1d, conv2d) also has
// bind_fused<In, F, Index>.
#include <ratio>
#include <string>
#include <type_traits>

#include "checks.hpp"
#include "../expr/functors.hpp"
#include "activation_layer.hpp"
#include "attention_layer.hpp"
#include "batch_norm_layer.hpp"
#include "conv1d_layer.hpp"
#include "conv_layer.hpp"
#include "dense_layer.hpp"
#include "dropout_layer.hpp"
#include "embedding_layer.hpp"
#include "flatten_layer.hpp"
#include "layer_norm_layer.hpp"
#include "pool_layer.hpp"
#include "positional_embedding_layer.hpp"
#include "softmax_layer.hpp"

namespace etnn::nn {

// Tag base of every layer spec; operator>> composes only these.
struct LayerSpec {};

template <class S>
concept Spec = std::is_base_of_v<LayerSpec, S>;

// What starts every network: the per-sample input shape S.
template <ShapeType S>
struct InputSpec : LayerSpec {
  using shape = S;
  static constexpr bool is_input = true;
};

template <class S>
concept InputSpecType = Spec<S> && requires { requires S::is_input; };

// nn::input<Dims...>: samples of Shape<Dims...>.
template <int... Dims>
struct Input : InputSpec<Shape<Dims...>> {
  static std::string describe() {
    std::string s = "input<";
    ((s += std::to_string(Dims) + ","), ...);
    s.back() = '>';
    return s;
  }
};

// nn::input_tokens<T, V>: samples of T token ids in [0, V) (Tokens<T, V>), read by nn::embedding.
template <int T, int V>
struct InputTokens : InputSpec<Tokens<T, V>> {
  static std::string describe() { return "input_tokens<" + std::to_string(T) + "," + std::to_string(V) + ">"; }
};

// Fully connected: y = x W^T + b with Out features, PyTorch's nn.Linear(in, Out).
template <int Out>
struct Linear : LayerSpec {
  static_assert(check::positive_width<Out>());
  template <ShapeType In, class F, int Index>
  using bind_fused = DenseLayer<In, Out, F, Index>;
  template <ShapeType In, int Index>
  using bind = bind_fused<In, fn::Identity, Index>;
  static std::string describe() { return "linear<" + std::to_string(Out) + ">"; }
};

// PyTorch's nn.Embedding(V, D) on token ids Tokens<T, V>: (T) ids -> a (T, D) sequence.
template <int D>
struct Embedding : LayerSpec {
  template <ShapeType In, int Index>
  using bind = EmbeddingLayer<In, D, Index>;
  static std::string describe() { return "embedding<" + std::to_string(D) + ">"; }
};

// Self-attention over a (T, D) sequence with Heads heads, masked to earlier positions when
// Causal: PyTorch's nn.MultiheadAttention(D, Heads, batch_first=True) called as attn(x, x, x).
template <int Heads, bool Causal>
struct MultiHeadAttention : LayerSpec {
  template <ShapeType In, int Index>
  using bind = MultiHeadAttentionLayer<In, Heads, Causal, Index>;
  static std::string describe() {
    return "multi_head_attention<" + std::to_string(Heads) + (Causal ? ",causal>" : ">");
  }
};

// Options of conv1d, conv2d and the pooling layers, written after the kernel size in any order:
//   nn::conv2d<16, 3, nn::stride<2>, nn::pad<1>>
template <int S>
struct stride {};
template <int P>
struct pad {};

namespace detail {
template <int S>
constexpr int pick_stride(stride<S>, int) { return S; }
template <class O>
constexpr int pick_stride(O, int fallback) { return fallback; }
template <int P>
constexpr int pick_pad(pad<P>, int) { return P; }
template <class O>
constexpr int pick_pad(O, int fallback) { return fallback; }
template <class O>
inline constexpr bool is_window_option = false;
template <int S>
inline constexpr bool is_window_option<stride<S>> = true;
template <int P>
inline constexpr bool is_window_option<pad<P>> = true;

template <int Default, class... Opts>
constexpr int stride_of() {
  static_assert(check::window_options<(is_window_option<Opts> && ...)>());
  int s = Default;
  ((s = pick_stride(Opts{}, s)), ...);
  return s;
}
template <class... Opts>
constexpr int pad_of() {
  int p = 0;
  ((p = pick_pad(Opts{}, p)), ...);
  return p;
}

inline std::string window_description(const char* name, std::initializer_list<int> leading, int stride, int pad) {
  std::string s = name;
  s += '<';
  for (int v : leading) (s += std::to_string(v)) += ',';
  s += "stride<" + std::to_string(stride) + ">,pad<" + std::to_string(pad) + ">>";
  return s;
}
}  // namespace detail

// PyTorch's nn.Conv2d(C, Out, Kernel, stride=Stride, padding=Pad) on (C, H, W) inputs.
template <int Out, int Kernel, int Stride, int Pad>
struct Conv2d : LayerSpec {
  template <ShapeType In, class F, int Index>
  using bind_fused = ConvLayer<In, Out, Kernel, Stride, Pad, F, Index>;
  template <ShapeType In, int Index>
  using bind = bind_fused<In, fn::Identity, Index>;
  static std::string describe() { return detail::window_description("conv2d", {Out, Kernel}, Stride, Pad); }
};

// PyTorch's nn.Conv1d(C, Out, Kernel, stride=Stride, padding=Pad) over the positions of a (T, C)
// sequence: (T, C) -> (T', Out).
template <int Out, int Kernel, int Stride, int Pad>
struct Conv1d : LayerSpec {
  template <ShapeType In, class F, int Index>
  using bind_fused = Conv1dLayer<In, Out, Kernel, Stride, Pad, F, Index>;
  template <ShapeType In, int Index>
  using bind = bind_fused<In, fn::Identity, Index>;
  static std::string describe() { return detail::window_description("conv1d", {Out, Kernel}, Stride, Pad); }
};

// PyTorch's nn.MaxPool2d / nn.AvgPool2d(Kernel, stride=Stride, padding=Pad).
template <class Kind, int Kernel, int Stride, int Pad>
struct Pool2d : LayerSpec {
  template <ShapeType In, int Index>
  using bind = PoolLayer<In, Kind, Kernel, Stride, Pad, Index>;
  static std::string describe() {
    return detail::window_description(std::is_same_v<Kind, expr::MaxPooling> ? "max_pool2d" : "avg_pool2d", {Kernel},
                                      Stride, Pad);
  }
};

// A parameter-free or self-describing layer spec bound by one template: batch_norm, layer_norm,
// softmax, log_softmax.
template <template <class, int> class Bound, const char* Name>
struct SimpleSpec : LayerSpec {
  template <ShapeType In, int Index>
  using bind = Bound<In, Index>;
  static std::string describe() { return Name; }
};

namespace detail {
inline constexpr char batch_norm_name[] = "batch_norm";
inline constexpr char layer_norm_name[] = "layer_norm";
inline constexpr char positional_embedding_name[] = "positional_embedding";
inline constexpr char softmax_name[] = "softmax";
inline constexpr char log_softmax_name[] = "log_softmax";
template <ShapeType In, int Index>
using SoftmaxOf = SoftmaxLayer<In, detail::Probabilities, Index>;
template <ShapeType In, int Index>
using LogSoftmaxOf = SoftmaxLayer<In, detail::LogProbabilities, Index>;
}  // namespace detail

using BatchNorm = SimpleSpec<BatchNormLayer, detail::batch_norm_name>;
using LayerNorm = SimpleSpec<LayerNormLayer, detail::layer_norm_name>;
using PositionalEmbedding = SimpleSpec<PositionalEmbeddingLayer, detail::positional_embedding_name>;
using Softmax = SimpleSpec<detail::SoftmaxOf, detail::softmax_name>;
using LogSoftmax = SimpleSpec<detail::LogSoftmaxOf, detail::log_softmax_name>;

// PyTorch's nn.Dropout(p) with p = P::num / P::den.
template <class P = std::ratio<1, 2>>
struct Dropout : LayerSpec {
  template <ShapeType In, int Index>
  using bind = DropoutLayer<In, P, Index>;
  static std::string describe() { return "dropout<" + std::to_string(P::num) + "/" + std::to_string(P::den) + ">"; }
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
template <int T, int V>
inline constexpr InputTokens<T, V> input_tokens{};
template <int Out>
inline constexpr Linear<Out> linear{};
inline constexpr Flatten flatten{};
template <int Out, int Kernel, class... Opts>
inline constexpr Conv1d<Out, Kernel, detail::stride_of<1, Opts...>(), detail::pad_of<Opts...>()> conv1d{};
template <int Out, int Kernel, class... Opts>
inline constexpr Conv2d<Out, Kernel, detail::stride_of<1, Opts...>(), detail::pad_of<Opts...>()> conv2d{};
template <int Kernel, class... Opts>
inline constexpr Pool2d<expr::MaxPooling, Kernel, detail::stride_of<Kernel, Opts...>(), detail::pad_of<Opts...>()>
    max_pool2d{};
template <int Kernel, class... Opts>
inline constexpr Pool2d<expr::AveragePooling, Kernel, detail::stride_of<Kernel, Opts...>(), detail::pad_of<Opts...>()>
    avg_pool2d{};
inline constexpr BatchNorm batch_norm{};
inline constexpr LayerNorm layer_norm{};
template <int D>
inline constexpr Embedding<D> embedding{};
inline constexpr PositionalEmbedding positional_embedding{};
// nn::multi_head_attention<4> attends to every position; nn::multi_head_attention<4, true> only to
// the position itself and those before it (a language model's causal mask).
template <int Heads, bool Causal = false>
inline constexpr MultiHeadAttention<Heads, Causal> multi_head_attention{};
inline constexpr Softmax softmax{};
inline constexpr LogSoftmax log_softmax{};
// p = 0.5 as PyTorch; another p: nn::dropout_with<std::ratio<1, 5>>.
inline constexpr Dropout<> dropout{};
template <class P>
inline constexpr Dropout<P> dropout_with{};
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
