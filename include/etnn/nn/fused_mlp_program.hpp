#pragma once
// The network executor of a mixed-precision model on CUDA (etnn::Model<Net, etnn::bf16, Cuda>,
// or etnn::fp16): a chain of linear layers with ReLU between them and every width at most 128 runs
// as the fully fused kernels of cuda/fused_mlp.hpp, one forward launch and three backward ones,
// activations on chip in the 16-bit format. Widths other than 16, 32, 64 and 128 are padded with zeros to the next of them
// (nn/fused_mlp_padding.hpp): then the parameters, the input and the output gradient are copied
// into padded buffers first, and the output and the parameter gradients copied back. It is
// Program with forward and backward replaced: the parameter layout, names and initialisation are
// the same, so checkpoints and optimizers do not change.
//
// Training workspace per sample: [ output (out) | dL/doutput (out) ]; the layers' scratch
// (scratch_values(batch)) holds the kernels' saved activations and backward scratch, then, when
// padded, the padded parameters, their gradients, input, output and output gradient.
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/precision.hpp"

#include "../core/type_list.hpp"
#include "../cuda/fused_mlp.hpp"
#include "../cuda/runtime.hpp"
#include "../expr/functors.hpp"
#include "dense_layer.hpp"
#include "fused_mlp_padding.hpp"
#include "program.hpp"

namespace etnn::nn::detail {

// What the fused kernels need to know of a layer: a linear layer's widths and activation. Any
// other layer answers too (not dense, no widths), so that fusable_mlp can ask of every network.
template <class L>
struct FusedLayer {
  static constexpr bool dense = false;
  static constexpr int in = 0;
  static constexpr int out = 0;
  static constexpr bool relu = false;
  static constexpr bool identity = false;
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
  return PaddedMlp<FusedLayer<First>::in, FusedLayer<Ls>::out...>::fits;
}

// column_copy_element as the padded copies' element map (cuda/fused_mlp/padding.hpp).
struct ColumnCopy {
  ETNN_HD static float element(const float* from, int from_cols, int to_cols, std::size_t index) {
    return column_copy_element(from, from_cols, to_cols, index);
  }
};

// The kernels' 16-bit operand type of a mixed-precision scalar type.
template <class Scalar>
using half_of = std::conditional_t<products_of<Scalar> == Products::fp16, __half, __nv_bfloat16>;

// Half: __nv_bfloat16 or __half.
template <class Layers, class Half>
struct FusedMlpProgram;

template <Layer... Ls, class Half>
struct FusedMlpProgram<TypeList<Ls...>, Half> : Program<TypeList<Ls...>> {
  using base = Program<TypeList<Ls...>>;
  static_assert(fusable_mlp<Ls...>(), "etnn: ProgramFor chooses FusedMlpProgram only for networks it takes");
  using First = std::tuple_element_t<0, std::tuple<Ls...>>;
  using padding = PaddedMlp<FusedLayer<First>::in, FusedLayer<Ls>::out...>;
  using kernels = cuda::FusedMlp<Half, fused_width(FusedLayer<First>::in), fused_width(FusedLayer<Ls>::out)...>;
  static constexpr int in_width = FusedLayer<First>::in;
  static constexpr std::size_t out_width = base::template layer<base::count - 1>::out_shape::size;
  static constexpr int padded_in = fused_width(in_width);
  static constexpr int padded_out = fused_width(static_cast<int>(out_width));

  static constexpr std::size_t storage_per_sample = out_width;
  static constexpr std::size_t workspace_per_sample = 2 * out_width;
  template <class Device>
  static constexpr bool runs_on = std::is_same_v<Device, Cuda>;

  // The scratch's regions: the kernels' `saved` first (256-byte aligned, as the scratch is), then
  // when padded each region on a 256-byte boundary.
  struct Regions {
    void* saved;
    float* params;  // padded_params, the padded parameters
    float* grads;   // padded_params, their gradients
    float* x;       // (batch, padded_in)
    float* y;       // (batch, padded_out)
    float* dy;      // (batch, padded_out)
    std::size_t floats;
  };
  static Regions regions(float* scratch, int batch) {
    constexpr std::size_t align = 256 / sizeof(float);
    std::size_t at = 0;
    const auto take = [&](std::size_t floats) {
      float* region = scratch == nullptr ? nullptr : scratch + at;
      at += (floats + align - 1) / align * align;
      return region;
    };
    const auto rows = static_cast<std::size_t>(batch);
    Regions r{};
    r.saved = take((kernels::saved_bytes(batch) + sizeof(float) - 1) / sizeof(float));
    if constexpr (padding::needed) {
      r.params = take(padding::padded_params);
      r.grads = take(padding::padded_params);
      r.x = take(rows * padded_in);
      r.y = take(rows * padded_out);
      r.dy = take(rows * padded_out);
    }
    r.floats = at;
    return r;
  }

  template <class Device>
  static std::size_t scratch_values(int batch) {
    return regions(nullptr, batch).floats;
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
    fused_forward(run, x, workspace, batch);
  }

  // Every gradient is final when the last kernel is: layer_done(0) once.
  template <bool InputGradient = false, class LayerDone>
  static const float* backward(Cuda, const Run<float>& run, float* grads, float* workspace, int capacity, int batch,
                               const Activations<float>& act, LayerDone&& layer_done) {
    static_assert(!InputGradient, "a fused MLP computes no input gradient (it is not a block inside another)");
    const Regions r = regions(run.scratch, batch);
    const float* dy = output_gradient(workspace, capacity);
    if constexpr (padding::needed) {
      // forward left the padded parameters and input in the scratch.
      cuda::detail::copy_columns<ColumnCopy>(dy, static_cast<int>(out_width), r.dy, padded_out, batch, cuda::stream());
      ETNN_CHECK_CUDA(cudaMemsetAsync(r.grads, 0, padding::padded_params * sizeof(float), cuda::stream()));
      kernels::backward(r.params, r.grads, r.x, r.saved, r.dy, batch, cuda::stream());
      cuda::detail::add_true_gradients<padding>(r.grads, grads, cuda::stream());
    } else {
      kernels::backward(run.params, grads, act.front(), r.saved, dy, batch, cuda::stream());
    }
    layer_done(std::size_t{0});
    return nullptr;
  }

  static void forward_infer(Cuda, const Run<float>& run, const float* x, float*, float* out, int batch) {
    fused_forward(run, x, out, batch);
  }

 private:
  // x (batch, in) -> y (batch, out) through the kernels, padded when the widths need it.
  static void fused_forward(const Run<float>& run, const float* x, float* y, int batch) {
    const Regions r = regions(run.scratch, batch);
    if constexpr (padding::needed) {
      cuda::detail::pad_parameters<padding>(run.params, r.params, cuda::stream());
      cuda::detail::copy_columns<ColumnCopy>(x, in_width, r.x, padded_in, batch, cuda::stream());
      kernels::forward(r.params, r.x, r.y, r.saved, batch, cuda::stream());
      cuda::detail::copy_columns<ColumnCopy>(r.y, padded_out, y, static_cast<int>(out_width), batch, cuda::stream());
    } else {
      kernels::forward(run.params, x, y, r.saved, batch, cuda::stream());
    }
  }
};

}  // namespace etnn::nn::detail
