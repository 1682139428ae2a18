#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The Layer concept: a layer spec bound to its input shape and its position in the network.
// The network executor (nn/program.hpp) runs any type that models it, built-in or user-defined.
//
//   in_shape, out_shape          per-sample shapes
//   module_index                 position in the equivalent torch.nn.Sequential (state_dict prefix)
//   num_params, params           size of its slice of the flat parameter buffer, and its tensors,
//                                each starting at a multiple of region_alignment_values
//                                (aligned_layout, nn/param_info.hpp; ETNN_PARAM_ALIGNMENT)
//   saved_per_sample             extra values forward keeps for backward (training only)
//   output_aliases_input         output is the input reinterpreted (flatten): no storage, no work
//   backward_in_place            dx may be written over dy (elementwise layers)
//   init(params, rng)            PyTorch-default initialisation
//   forward(device, pass, params, x, y, saved, batch)                   saved is null in inference
//   backward(device, pass, params, grads, x, y, saved, dy, dx, batch)   dx is null for the first layer;
//                                                                       grads accumulate (+=); dy may be overwritten
// pass (nn/pass.hpp) carries the mode, the layer's buffers, its scratch space and its random seed.
// Optional members, zero or absent when not given:
//   num_buffers, buffers, init_buffers(buffers)   non-trainable state saved with the model
//                                                 (batch norm's running statistics)
//   scratch_values(batch)                         temporary values needed during one call, or
//   scratch_values<Device>(batch)                 the same where it depends on the device
//   cuda_kernels                                  true when forward/backward have etnn::Cuda overloads
//   overwrites_gradients                          true when backward on the CPU writes its gradients
//                                                 over grads when pass.gradients is Gradients::overwrite
//                                                 (on other devices every layer adds, over zeros)
//   draws_random                                  true when training passes draw random numbers
//                                                 (dropout): a recorded CUDA graph could not replay them
//   applies_activation_below                      true when its CPU backward can apply the activation
//                                                 of the layer below to dx (nn/dense_layer.hpp)
//   takes_activation_gradient                     true when its CPU backward can take dL/dz, its own
//                                                 activation applied by the layer above (pass.dy_is_dz)
//   weight_row_blocks                             a WeightRowBlocks: its first parameter's gradient can
//                                                 be computed in row blocks, reported final one by one
//                                                 (pass.gradients_final, nn/weight_row_blocks.hpp)
#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>

#include "../core/alignment.hpp"
#include "../core/device.hpp"
#include "../core/random.hpp"
#include "../core/shape.hpp"
#include "param_info.hpp"
#include "pass.hpp"

namespace etnn::nn {

template <class L>
concept Layer = requires {
  typename L::in_shape;
  typename L::out_shape;
  { L::module_index } -> std::convertible_to<int>;
  { L::num_params } -> std::convertible_to<std::size_t>;
  { L::saved_per_sample } -> std::convertible_to<std::size_t>;
  { L::output_aliases_input } -> std::convertible_to<bool>;
  { L::backward_in_place } -> std::convertible_to<bool>;
  L::params.size();
} && ShapeType<typename L::in_shape> && ShapeType<typename L::out_shape>;

// Defaults for a layer without parameters.
struct ParameterFree {
  static constexpr std::size_t num_params = 0;
  static constexpr std::array<ParamInfo, 0> params{};
  template <class T> static void init(T*, Rng&) {}
};

// Defaults for a parameter-free layer whose output has its input's shape, keeps nothing for
// backward and may write dx over dy (activations, dropout, softmax).
template <ShapeType In, int Index>
struct InPlaceLayer : ParameterFree {
  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = true;
};

// Whether a layer has kernels for a device: every layer runs on the CPU; one with CUDA kernels
// (cuda/) says so with `static constexpr bool cuda_kernels = true`.
template <class L, class Device>
inline constexpr bool runs_on = std::is_same_v<Device, Cpu> || requires { requires L::cuda_kernels; };

// Whether a layer draws random numbers in training passes (dropout), which it says with
// `static constexpr bool draws_random = true`: each pass then differs from the one before, so a
// recorded CUDA graph of the step could not replay it.
template <class L>
inline constexpr bool draws_random = requires { requires L::draws_random; };

// Whether a layer's backward on Device can write its gradients instead of adding to them: on the
// CPU, where it says so with `static constexpr bool overwrites_gradients = true` (and then honours
// pass.gradients). A device's products add, so there the executor zeroes every layer's gradients.
template <class L, class Device>
inline constexpr bool overwrites_gradients_on =
    std::is_same_v<Device, Cpu> && requires { requires L::overwrites_gradients; };

// A layer's non-trainable state (0 when it declares none) and its scratch need for a batch.
template <Layer L>
constexpr std::size_t num_buffers_of() {
  if constexpr (requires { L::num_buffers; }) return L::num_buffers;
  else return 0;
}

// The layer's slices of a network's flat parameter and buffer arrays: its own, rounded up so that
// the next layer's starts aligned (core/alignment.hpp).
template <Layer L>
inline constexpr std::size_t param_slice_of = aligned_values(L::num_params);
template <Layer L>
inline constexpr std::size_t buffer_slice_of = aligned_values(num_buffers_of<L>());
// Its buffers' tensors (none when it declares none).
template <Layer L>
constexpr auto buffer_infos_of() {
  if constexpr (requires { L::buffers; }) return L::buffers;
  else return std::array<ParamInfo, 0>{};
}
template <Layer L, class Device>
constexpr std::size_t scratch_values_of(int batch) {
  if constexpr (requires { L::template scratch_values<Device>(batch); }) return L::template scratch_values<Device>(batch);
  else if constexpr (requires { L::scratch_values(batch); }) return L::scratch_values(batch);
  else return 0;
}

}  // namespace etnn::nn
