#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::linear<Out> bound to a flat input, optionally fused with the activation that follows it.
//   y = f(x W^T + b)    x: (B, IN)  W: (OUT, IN)  b: (OUT)  y: (B, OUT)
// On a sequence (T, IN) it maps each position, as nn.Linear on a (B, T, IN) tensor: the same
// products over B T rows, y: (B, T, OUT).
#include <type_traits>

#include "../core/device.hpp"
#include "checks.hpp"
#include "../backend/dense.hpp"
#include "../backend/executor.hpp"
#include "init.hpp"
#include "layer.hpp"
#include "weight_row_blocks.hpp"

namespace etnn::nn {

template <ShapeType In, int Out, class Act, int Index>
struct DenseLayer {
  static_assert(check::linear_input<In>());
  static_assert(check::not_token_ids<TokenShape<In>>());
  static constexpr int in_features = In::dims[In::rank - 1];
  static constexpr int positions = In::rank == 2 ? In::dims[0] : 1;  // rows per sample

  using in_shape = In;
  using out_shape = std::conditional_t<In::rank == 2, Shape<positions, Out>, Shape<Out>>;
  using activation = Act;
  static constexpr int module_index = Index;
  static constexpr std::array<ParamInfo, 2> params = aligned_layout<2>({{
      {"weight", 2, {Out, in_features, 0, 0}, 0},
      {"bias", 1, {Out, 0, 0, 0}, 0},
  }});
  static constexpr std::size_t num_params = slice_values(params);
  // f'(Z), kept by forward when f' cannot be computed from the output alone (gelu, silu).
  static constexpr std::size_t saved_per_sample = Act::derivative_needs_input ? std::size_t{positions} * Out : 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // cuda/dense.hpp
  static constexpr bool overwrites_gradients = true;  // on the CPU (nn/layer.hpp)
  // On the CPU, two of them in a row fuse their backward: the upper one applies the lower one's
  // activation to dX in its product (backward's `below`), and the lower one takes dL/dz (its
  // pass.dy_is_dz): one pass less over dY.
  static constexpr bool applies_activation_below = true;
  static constexpr bool takes_activation_gradient = !std::is_same_v<Act, fn::Identity>;
  // On the CPU, a large W's gradient in row blocks when the step asks (pass.gradients_final).
  static constexpr WeightRowBlocks weight_row_blocks = WeightRowBlocks::of(Out, in_features);

  template <class T>
  static void init(T* p, Rng& rng) {
    init_fan_in_uniform(p, params[0].numel(), in_features, rng);
    init_fan_in_uniform(p + params[1].offset, params[1].numel(), in_features, rng);
  }

  // On the device, a mixed-precision model's products read 16-bit copies of their operands.
  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int samples) {
    const int batch = samples * positions;
    if constexpr (std::is_same_v<Device, Cpu>)
      dense_forward<in_features, Out>(device, p, p + params[1].offset, x, y, saved, batch, Act{});
    else
      dense_forward<in_features, Out>(device, p, p + params[1].offset, x, y, saved, batch, Act{}, pass.products);
  }

  // below (the CPU only): the activation of the layer below, whose outputs are x, to apply to dx.
  template <class T, class Device, class Below = NoActivationBelow>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T* y, const T* saved,
                       T* dy, T* dx, int samples, Below below = {}) {
    const int batch = samples * positions;
    if constexpr (std::is_same_v<Device, Cpu>) {
      dense_backward<in_features, Out>(device, p, g, g + params[1].offset, x, y, saved, dy, dx, batch, Act{},
                                       pass.gradients == Gradients::overwrite ? cpu::Accumulate::no
                                                                              : cpu::Accumulate::yes,
                                       pass.dy_is_dz, below,
                                       WeightBlocks<GradientsFinal>{pass.gradients_final ? weight_row_blocks.rows : 0,
                                                                    pass.gradients_final});
    } else {  // the device's products add (the executor zeroes first: overwrites_gradients_on)
      static_assert(std::is_same_v<Below, NoActivationBelow>, "etnn: below is the CPU's only");
      dense_backward<in_features, Out>(device, p, g, g + params[1].offset, x, y, saved, dy, dx, batch, Act{},
                                       pass.products);
    }
  }
};

}  // namespace etnn::nn
