#pragma once
// Every compile-time shape and type check of etnn, in one place. Each check is a consteval
// function whose static_assert message starts with a grep-able key and says how to fix it;
// the node that needs it writes `static_assert(check::something<...>());`.
// tests/compile_fail/ holds one program per message.
#include <concepts>
#include <cstddef>
#include <type_traits>

#include "device.hpp"

namespace etnn::check {

template <int... Dims>
consteval bool shape_dims() {
  static_assert(sizeof...(Dims) > 0, "ETNN_SHAPE_EMPTY: etnn::Shape needs at least one dimension");
  static_assert(((Dims > 0) && ...), "ETNN_SHAPE_NONPOSITIVE: every dimension of etnn::Shape must be positive");
  return true;
}

template <class A, class B>
consteval bool same_scalar() {
  static_assert(std::is_same_v<A, B>,
                "ETNN_EXPR_TYPES: both operands of an expression must have the same scalar type; "
                "cast the scalar (e.g. 2.0f for float data)");
  return true;
}

template <bool Sized>
consteval bool sized_expression() {
  static_assert(Sized,
                "ETNN_EXPR_UNSIZED: an expression of scalars alone has no length; include at least one "
                "expr::ref(data, n) operand");
  return true;
}

template <long long SlopeNumerator>
consteval bool leaky_slope() {
  static_assert(SlopeNumerator >= 0, "ETNN_LEAKY_SLOPE: leaky_relu needs a non-negative slope");
  return true;
}

template <class Device>
consteval bool device_available() {
  static_assert(device_compiled<Device>,
                "ETNN_DEVICE_UNAVAILABLE: this device's backend is not part of the build; etnn::Cuda "
                "needs nvcc and -DETNN_WITH_CUDA=ON (the CUDA backend), otherwise use etnn::Cpu");
  return true;
}

template <bool ReducerReadsThisMemory>
consteval bool reducer_device() {
  static_assert(ReducerReadsThisMemory,
                "ETNN_REDUCER_DEVICE: this reducer sums another device's memory than the model's: "
                "etnn::dist::Mpi takes etnn::Cpu models, etnn::dist::Nccl takes etnn::Cuda models");
  return true;
}

template <bool AllLayersHaveKernels>
consteval bool layers_on_device() {
  static_assert(AllLayersHaveKernels,
                "ETNN_DEVICE_LAYER: a layer of this network has no kernels for this device: every built-in "
                "layer runs on etnn::Cuda, a layer of your own once it declares static constexpr bool "
                "cuda_kernels = true (its forward and backward then run with etnn::Cuda); else use etnn::Cpu");
  return true;
}

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

// Convolution, pooling, normalisation and combinators.
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

// Names each member a would-be Reducer lacks (the Reducer concept of core/reducer.hpp, one
// requirement per message).
template <class R>
consteval bool reducer() {
  static_assert(requires(R& r) { { r.rank() } -> std::convertible_to<int>; },
                "ETNN_REDUCER: the reducer has no `int rank()` member (see core/reducer.hpp)");
  static_assert(requires(R& r) { { r.size() } -> std::convertible_to<int>; },
                "ETNN_REDUCER: the reducer has no `int size()` member (see core/reducer.hpp)");
  static_assert(requires(R& r, float* f, double* d, std::size_t n) {
                  r.broadcast(f, n, 0);
                  r.broadcast(d, n, 0);
                },
                "ETNN_REDUCER: the reducer has no `broadcast(T* data, size_t n, int root)` member for float and double");
  static_assert(requires { typename R::Pending; },
                "ETNN_REDUCER: the reducer has no `Pending` type (the handle of a started allreduce)");
  static_assert(requires(R& r, float* f, double* d, std::size_t n) {
                  { r.start_allreduce_sum(f, n) } -> std::same_as<typename R::Pending>;
                  { r.start_allreduce_sum(d, n) } -> std::same_as<typename R::Pending>;
                },
                "ETNN_REDUCER: the reducer has no `Pending start_allreduce_sum(T* data, size_t n)` member for float "
                "and double");
  static_assert(requires(R& r, typename R::Pending& p) { { r.poll(p) } -> std::convertible_to<bool>; },
                "ETNN_REDUCER: the reducer has no `bool poll(Pending&)` member");
  static_assert(requires(R& r, typename R::Pending& p) { r.wait(p); },
                "ETNN_REDUCER: the reducer has no `wait(Pending&)` member");
  static_assert(requires(R& r) { r.abort("reason"); },
                "ETNN_REDUCER: the reducer has no `abort(const char* reason)` member");
  return true;
}

// ---- Targets the Trainer hands to a loss (loss/targets.hpp, train/trainer.hpp) ----

template <bool KnownKind>
consteval bool loss_target_kind() {
  static_assert(KnownKind,
                "ETNN_LOSS_TARGET_KIND: the loss's target_kind must be etnn::loss::ClassIndices, "
                "etnn::loss::RealValues or etnn::loss::MultiHot (loss/targets.hpp); the Trainer stages "
                "targets by it");
  return true;
}

template <bool ClassIndices>
consteval bool class_index_targets() {
  static_assert(ClassIndices,
                "ETNN_TARGET_KIND: this loss takes class indices, one int per sample "
                "(std::vector<int>, std::span<const int>); targets of the output's shape (a Tensor) "
                "go with losses such as MSE, BCEWithLogits or MultiLabelSoftMargin");
  return true;
}

template <bool TensorTargets>
consteval bool tensor_targets() {
  static_assert(TensorTargets,
                "ETNN_TARGET_KIND: this loss takes targets of the output's shape (an etnn::Tensor or "
                "TensorView with one row per sample); class indices go with CrossEntropy, NLL or "
                "MultiMargin");
  return true;
}

// ---- Losses with parameters of their own (loss/parametric.hpp, train/trainer.hpp) ----

template <class Out, int Embedding>
consteval bool embedding_width() {
  static_assert(Out::rank == 1 && Out::size == static_cast<std::size_t>(Embedding),
                "ETNN_LOSS_SHAPE: the network's output must be flat embeddings (B, Embedding) of the width "
                "the margin head or CenterLoss was declared with (its first template argument)");
  return true;
}

template <bool HasOptimizer>
consteval bool loss_optimizer() {
  static_assert(HasOptimizer,
                "ETNN_LOSS_OPTIMIZER: this loss has parameters of its own (a margin head's weight, "
                "CenterLoss's centers); give the Trainer an optimizer for them after the model's: "
                "etnn::optim::SGD loss_opt(loss, {.lr = 0.01f}); etnn::Trainer trainer(model, loss, opt, loss_opt)");
  return true;
}

template <bool OptimizesTheLoss>
consteval bool loss_optimizer_target() {
  static_assert(OptimizesTheLoss,
                "ETNN_LOSS_OPTIMIZER: the Trainer's fourth argument must be an optimizer of the loss's own "
                "parameters, built on the loss: etnn::optim::SGD loss_opt(loss, {...})");
  return true;
}

}  // namespace etnn::check
