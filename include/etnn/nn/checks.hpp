#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of layer specs, networks and models: shapes, window options, inputs and
// scalar types.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.
#include <type_traits>

namespace etnn::nn::check {

template <bool AllLayersHaveKernels>
consteval bool layers_on_device() {
  static_assert(AllLayersHaveKernels,
                "ETNN_DEVICE_LAYER: a layer of this network has no kernels for this device: every built-in "
                "layer runs on etnn::Cuda, a layer of your own once it declares static constexpr "
                "bool cuda_kernels = true (its forward and backward then run with etnn::Cuda); else use etnn::Cpu");
  return true;
}

template <bool Aligned>
consteval bool tensors_aligned() {
  static_assert(Aligned,
                "ETNN_PARAM_ALIGNMENT: every parameter (and buffer) tensor of a layer starts at a multiple of "
                "etnn::region_alignment_values values (256 bytes of float); lay a layer's tensors out with "
                "static constexpr auto params = etnn::nn::aligned_layout<N>({...}) and take "
                "num_params = etnn::nn::slice_values(params) (buffers and num_buffers likewise)");
  return true;
}

template <class In>
consteval bool linear_input() {
  static_assert(In::rank <= 2,
                "ETNN_SHAPE_MISMATCH: linear<N> expects a flat input (one dimension) or a sequence (T, D), "
                "which it maps position by position; insert nn::flatten before it");
  return true;
}

// Layers other than nn::embedding see token ids as plain numbers: refuse them.
template <bool IsTokens>
consteval bool not_token_ids() {
  static_assert(!IsTokens,
                "ETNN_TOKEN_INPUT: token ids are indices, not features; start the network with "
                "nn::input_tokens<T, V> >> nn::embedding<D>");
  return true;
}

template <bool IsTokens>
consteval bool embedding_input() {
  static_assert(IsTokens,
                "ETNN_EMBEDDING_INPUT: nn::embedding<D> looks up token ids; it follows "
                "nn::input_tokens<T, V> (T ids in [0, V) per sample), not a float input");
  return true;
}

template <class In, bool IsTokens>
consteval bool sequence_input() {
  static_assert(In::rank == 2 && !IsTokens,
                "ETNN_SEQUENCE_INPUT: this layer works on a sequence (T, D) of T positions of width D; "
                "start the network with nn::input<T, D>, or nn::input_tokens<T, V> >> nn::embedding<D>");
  return true;
}

template <int Width, int Heads>
consteval bool attention_heads() {
  static_assert(Heads > 0 && Width % Heads == 0,
                "ETNN_ATTENTION_HEADS: multi_head_attention<H> splits the width D into H heads of D / H "
                "values each, so H must divide D (as nn.MultiheadAttention requires)");
  return true;
}

template <int N>
consteval bool positive_width() {
  static_assert(N > 0, "ETNN_BAD_WIDTH: linear<N>, embedding<N> and conv1d<N, ...> need N > 0 output features");
  return true;
}

template <class In>
consteval bool image_input() {
  static_assert(In::rank == 3,
                "ETNN_SHAPE_MISMATCH: conv2d and pooling expect a (C, H, W) input; start the network with "
                "nn::input<C, H, W> (not a flat input)");
  return true;
}

template <bool AllOptions>
consteval bool window_options() {
  static_assert(AllOptions,
                "ETNN_WINDOW_OPTION: after the kernel size, conv2d and pooling take only nn::stride<S> and "
                "nn::pad<P>");
  return true;
}

template <int Kernel, int Stride, int Pad>
consteval bool window_params() {
  static_assert(Kernel > 0 && Stride > 0 && Pad >= 0,
                "ETNN_BAD_WINDOW: a kernel or pooling window needs kernel > 0, stride > 0 and pad >= 0");
  return true;
}

template <int Size, int Kernel, int Pad>
consteval bool window_fits() {
  static_assert(Kernel <= Size + 2 * Pad,
                "ETNN_WINDOW_TOO_LARGE: the kernel or pooling window is larger than the padded input; "
                "use a smaller window or more padding");
  return true;
}

template <int Kernel, int Pad>
consteval bool pool_padding() {
  static_assert(2 * Pad <= Kernel, "ETNN_BAD_WINDOW: pooling pad must be at most half the window, as in PyTorch");
  return true;
}

template <class In>
consteval bool softmax_input() {
  static_assert(In::rank == 1,
                "ETNN_SHAPE_MISMATCH: softmax and log_softmax work over a flat input (B, N); insert nn::flatten");
  return true;
}

template <long long Num, long long Den>
consteval bool dropout_probability() {
  static_assert(Num >= 0 && Num < Den, "ETNN_DROPOUT_P: dropout needs a probability p with 0 <= p < 1");
  return true;
}

template <class In, class Out>
consteval bool residual_shape() {
  static_assert(std::is_same_v<In, Out>,
                "ETNN_RESIDUAL_SHAPE: residual(block) adds the block's output to its input, so the block "
                "must keep the shape of its input (end it with a layer of the input's width)");
  return true;
}

template <class A, class B>
consteval bool concat_shapes() {
  static_assert(A::rank == 1 && B::rank == 1,
                "ETNN_CONCAT_SHAPE: concat(a, b) joins flat outputs (B, N) and (B, M); end each branch "
                "with a flat layer (nn::flatten or nn::linear<N>)");
  return true;
}

template <bool IsBlock>
consteval bool block_without_input() {
  static_assert(IsBlock,
                "ETNN_BLOCK_INPUT: a block given to residual() or concat() is a chain of layers without "
                "nn::input; its input is what precedes it in the network");
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

template <class T, bool MixedPrecisionAllowed>
consteval bool model_scalar() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || MixedPrecisionAllowed,
                "ETNN_SCALAR_TYPE: etnn::Model's scalar type must be float or double (or, on etnn::Cuda, the mixed "
                "precisions etnn::bf16, etnn::fp16, etnn::bf16_unfused, etnn::fp16_unfused)");
  return true;
}

template <class Given, class Expected>
consteval bool input_shape() {
  static_assert(std::is_same_v<Given, Expected>,
                "ETNN_INPUT_SHAPE: the input's per-sample shape differs from the network's "
                "nn::input<...>; load or build the data with the network's input shape");
  return true;
}

}  // namespace etnn::nn::check
