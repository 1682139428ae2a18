#pragma once
// The network executor of a mixed-precision model on CUDA (etnn::Model<Net, etnn::bf16, Cuda>):
// a chain of linear layers with ReLU between them and every width in {16, 32, 64, 128} runs as
// the fully fused kernels of cuda/fused_mlp.hpp, one forward launch and three backward ones,
// activations on chip in bf16. It is Program with forward and backward replaced: the parameter
// layout, names and initialisation are the same, so checkpoints and optimizers do not change.
//
// Training workspace per sample: [ output (out) | dL/doutput (out) ]; the kernels' saved
// activations and backward scratch are the layers' scratch (scratch_values(batch)).
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../core/device.hpp"
#include "../core/static_checks.hpp"
#include "../core/type_list.hpp"
#include "../cuda/fused_mlp.hpp"
#include "../cuda/runtime.hpp"
#include "../expr/functors.hpp"
#include "dense_layer.hpp"
#include "program.hpp"

namespace etnn::nn::detail {

// What the fused kernels need to know of a layer: a linear layer's widths and activation.
template <class L>
struct FusedLayer {
  static constexpr bool dense = false;
};
template <ShapeType In, int Out, class Act, int Index>
struct FusedLayer<DenseLayer<In, Out, Act, Index>> {
  static constexpr bool dense = true;
  static constexpr int in = In::dims[0];
  static constexpr int out = Out;
  static constexpr bool relu = std::is_same_v<Act, fn::Relu>;
  static constexpr bool identity = std::is_same_v<Act, fn::Identity>;
};

// Linear layers only, ReLU after each but the last, none after the last, every width fusable.
template <class... Ls>
consteval bool fusable_mlp() {
  constexpr std::size_t n = sizeof...(Ls);
  constexpr bool dense[] = {FusedLayer<Ls>::dense...};
  constexpr bool relu[] = {FusedLayer<Ls>::relu...};
  constexpr bool identity[] = {FusedLayer<Ls>::identity...};
  for (std::size_t i = 0; i < n; ++i)
    if (!dense[i] || (i + 1 < n ? !relu[i] : !identity[i])) return false;
  using First = std::tuple_element_t<0, std::tuple<Ls...>>;
  return cuda::fused_mlp_widths_ok<FusedLayer<First>::in, FusedLayer<Ls>::out...>;
}

template <class Layers>
struct FusedMlpProgram;

template <Layer... Ls>
struct FusedMlpProgram<TypeList<Ls...>> : Program<TypeList<Ls...>> {
  using base = Program<TypeList<Ls...>>;
  static_assert(check::mixed_precision_network<fusable_mlp<Ls...>()>());
  using First = std::tuple_element_t<0, std::tuple<Ls...>>;
  using kernels = cuda::FusedMlp<FusedLayer<First>::in, FusedLayer<Ls>::out...>;
  static constexpr std::size_t out_width = base::template layer<base::count - 1>::out_shape::size;

  static constexpr std::size_t storage_per_sample = out_width;
  static constexpr std::size_t workspace_per_sample = 2 * out_width;
  template <class Device>
  static constexpr bool runs_on = std::is_same_v<Device, Cuda>;

  // The kernels' saved activations and backward scratch, in floats.
  template <class Device>
  static std::size_t scratch_values(int batch) {
    return (kernels::saved_bytes(batch) + sizeof(float) - 1) / sizeof(float);
  }

  template <class T>
  using Activations = typename base::template Activations<T>;

  template <class T>
  static T* output_gradient(T* workspace, int capacity) {
    return workspace + out_width * static_cast<std::size_t>(capacity);
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
    kernels::forward(run.params, x, workspace, run.scratch, batch, cuda::stream());
  }

  // Every gradient is final when the last kernel is: layer_done(0) once.
  template <bool InputGradient = false, class LayerDone>
  static const float* backward(Cuda, const Run<float>& run, float* grads, float* workspace, int capacity, int batch,
                               const Activations<float>& act, LayerDone&& layer_done) {
    static_assert(!InputGradient, "a fused MLP computes no input gradient (it is not a block inside another)");
    kernels::backward(run.params, grads, act.front(), run.scratch, output_gradient(workspace, capacity), batch,
                      cuda::stream());
    layer_done(std::size_t{0});
    return nullptr;
  }

  static void forward_infer(Cuda, const Run<float>& run, const float* x, float*, float* out, int batch) {
    kernels::forward(run.params, x, out, run.scratch, batch, cuda::stream());
  }
};

}  // namespace etnn::nn::detail
