#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The network executor of a mixed-precision model on CUDA (etnn::Model<Net, etnn::bf16, Cuda>,
// or etnn::fp16): a chain of linear layers with one activation between them (ReLU, tanh or SiLU:
// expr::detail::fused_hidden) and every width at most 128 runs
// as the fully fused kernels (cuda/fused_mlp.hpp, through backend/fused_mlp.hpp), one forward
// launch and three backward ones, activations on chip in the 16-bit format. Widths other than 16,
// 32, 64 and 128 run padded with zeros to the next of them (expr/fused_mlp_padding.hpp,
// cuda/fused_mlp/padding.hpp). It is Program with forward and backward replaced: the parameter
// layout, names and initialisation are the same, so checkpoints and optimizers do not change.
//
// Training workspace per sample: [ output (out) | dL/doutput (out) ]; the layers' scratch
// (scratch_values(batch)) holds the kernels' saved activations and backward scratch, and when
// padded the padded parameters, their gradients, input, output and output gradient.
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../backend/fused_mlp.hpp"
#include "../core/device.hpp"
#include "../core/precision.hpp"
#include "../core/type_list.hpp"
#include "../expr/functors.hpp"
#include "../expr/fused_mlp_padding.hpp"
#include "dense_layer.hpp"
#include "program.hpp"

namespace etnn::nn::detail {

// What the fused kernels need to know of a layer: a linear layer's widths and activation. Any
// other layer answers too (not dense, no widths), so that fusable_mlp can ask of every network.
template <class L>
struct FusedLayer {
  static constexpr bool dense = false;
  static constexpr int in = 0;
  static constexpr int out = 0;
  using activation = void;
};
template <ShapeType In, int Out, class Act, int Index>
struct FusedLayer<DenseLayer<In, Out, Act, Index>> {
  static constexpr bool dense = In::rank == 1;  // not linear over a sequence's positions
  static constexpr int in = In::dims[0];
  static constexpr int out = Out;
  using activation = Act;
};

// The activation between the fused layers: the first layer's (fn::Relu, never applied, when there
// is one layer).
template <class... Ls>
using FusedActivation = std::conditional_t<(sizeof...(Ls) > 1),
                                           typename FusedLayer<std::tuple_element_t<0, std::tuple<Ls...>>>::activation,
                                           fn::Relu>;

// Linear layers only, the same activation the kernels take (expr::detail::fused_hidden) after
// each but the last, none after the last, every width fusable.
template <class... Ls>
consteval bool fusable_mlp() {
  constexpr std::size_t n = sizeof...(Ls);
  using Act = FusedActivation<Ls...>;
  if constexpr (!expr::detail::fused_hidden<Act>) {
    return false;
  } else {
    constexpr bool dense[] = {FusedLayer<Ls>::dense...};
    constexpr bool same_activation[] = {std::is_same_v<typename FusedLayer<Ls>::activation, Act>...};
    constexpr bool identity[] = {std::is_same_v<typename FusedLayer<Ls>::activation, fn::Identity>...};
    for (std::size_t i = 0; i < n; ++i)
      if (!dense[i] || (i + 1 < n ? !same_activation[i] : !identity[i])) return false;
    using First = std::tuple_element_t<0, std::tuple<Ls...>>;
    return expr::detail::PaddedMlp<FusedLayer<First>::in, FusedLayer<Ls>::out...>::fits;
  }
}

// Half: __nv_bfloat16 or __half.
template <class Layers, class Half>
struct FusedMlpProgram;

template <Layer... Ls, class Half>
struct FusedMlpProgram<TypeList<Ls...>, Half> : Program<TypeList<Ls...>> {
  using base = Program<TypeList<Ls...>>;
  static_assert(fusable_mlp<Ls...>(), "etnn: ProgramFor chooses FusedMlpProgram only for networks it takes");
  using First = std::tuple_element_t<0, std::tuple<Ls...>>;
  // The kernels at the network's widths: input, then each layer's output.
  using kernels = typename backend::FusedMlpKernels<Half, FusedActivation<Ls...>, FusedLayer<First>::in,
                                                    FusedLayer<Ls>::out...>::type;
  static constexpr std::size_t out_width = base::template layer<base::count - 1>::out_shape::size;
  static_assert(kernels::padding::num_params == base::flat_size,
                "etnn: the fused kernels read the parameters where the linear layers lay them out");

  static constexpr std::size_t storage_per_sample = aligned_values(out_width);
  static constexpr std::size_t workspace_per_sample = 2 * storage_per_sample;
  static constexpr std::size_t workspace_values(int capacity) {
    return workspace_per_sample * static_cast<std::size_t>(capacity);
  }
  template <class Device>
  static constexpr bool runs_on = std::is_same_v<Device, Cuda>;

  template <class Device>
  static std::size_t scratch_values(int batch) {
    return kernels::scratch_floats(batch);
  }

  template <class T>
  using Activations = typename base::template Activations<T>;

  template <class T>
  static T* output_gradient(T* workspace, int capacity) {
    return workspace + storage_per_sample * static_cast<std::size_t>(capacity);
  }

  // act[0] = input, act[count] = output; the hidden activations live in the kernels' scratch.
  template <class T>
  static Activations<T> locate(const T* x, T* workspace, int) {
    Activations<T> act{};
    act.front() = x;
    act.back() = workspace;
    return act;
  }

  static void forward_train(Cuda, const Run<float>& run, const float* x, float* workspace, int capacity, int batch,
                            Activations<float>& act) {
    act = locate(x, workspace, capacity);
    kernels::forward(run.params, x, workspace, run.scratch, batch);
  }

  // Every gradient is final when the last kernel is: layer_done(0) once.
  template <bool InputGradient = false, class LayerDone>
  static const float* backward(Cuda, const Run<float>& run, float* grads, float* workspace, int capacity, int batch,
                               const Activations<float>& act, LayerDone&& layer_done) {
    static_assert(!InputGradient, "a fused MLP computes no input gradient (it is not a block inside another)");
    backward_to(Cuda{}, run, grads, workspace, capacity, batch, act, nullptr);
    layer_done(std::size_t{0});
    return nullptr;
  }

  // The gradients, and dL/dx (batch, in) into dx unless it is null: the fused MLP as the tail of a
  // network whose first layer trains (nn/split_mlp_program.hpp).
  static void backward_to(Cuda, const Run<float>& run, float* grads, float* workspace, int capacity, int batch,
                          const Activations<float>& act, float* dx) {
    kernels::backward(run.params, grads, act.front(), output_gradient(workspace, capacity), run.scratch, batch, dx);
  }

  static void forward_infer(Cuda, const Run<float>& run, const float* x, float*, float* out, int batch) {
    kernels::forward(run.params, x, out, run.scratch, batch);
  }
};

}  // namespace etnn::nn::detail
