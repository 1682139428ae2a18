#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The network executor: runs the Layers of a network forward and backward over one flat
// parameter buffer, one flat gradient buffer and one workspace, with every offset computed at
// compile time.
//
// Every tensor of the flat arrays and every region of the workspace starts on a 256-byte boundary
// (core/alignment.hpp): each layer's slice starts aligned, and so does each tensor in it
// (ParamInfo's aligned_layout); every region of the workspace reserves a multiple of 64 values
// per sample.
//
// Training workspace, per sample of capacity C (all blocks are C rows):
//   [ layer outputs and saved values | gradient buffer A | gradient buffer B ]
// Layer outputs are kept for backward; flatten's output is its input and takes no space.
// Backward ping-pongs dY/dX between A and B; elementwise layers work in place. Layers before the
// first one with parameters are never run backward, and that layer skips its input gradient.
// Besides the workspace a call takes the model's buffers (running statistics, one flat array with
// compile-time offsets like the parameters) and a scratch array that layers use in turn.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/alignment.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "../core/type_list.hpp"
#include "../backend/dense.hpp"
#include "../backend/executor.hpp"
#include "checks.hpp"
#include "layer.hpp"
#include "weight_row_blocks.hpp"

namespace etnn::nn::detail {

// Per-sample values a layer keeps during training: its output (unless it aliases its input)
// and what its backward needs besides, each region rounded up to start the next aligned.
template <Layer L>
inline constexpr std::size_t output_storage_of = L::output_aliases_input ? 0 : aligned_values(L::out_shape::size);
template <Layer L>
inline constexpr std::size_t storage_of = output_storage_of<L> + aligned_values(L::saved_per_sample);

// The row blocks of layer L's weight gradient (nn/weight_row_blocks.hpp): 1 for a layer that
// declares none.
template <Layer L>
consteval int weight_row_block_count() {
  if constexpr (requires { L::weight_row_blocks.count; })
    return L::weight_row_blocks.count;
  else
    return 1;
}

template <std::size_t N>
constexpr std::array<std::size_t, N> exclusive_scan(std::array<std::size_t, N> sizes) {
  std::size_t at = 0;
  for (auto& s : sizes) at += std::exchange(s, at);
  return sizes;
}

// One call of the network, from which each layer's Pass is made.
template <class T>
struct Run {
  const T* params;
  T* buffers;                  // Program::num_buffers values
  T* scratch;                  // Program::scratch_values<Device>(batch) values
  bool training = true;
  std::uint64_t seed = 0;      // this pass's random stream; each layer derives its own
  dist::CrossRankSum sync{};         // global-batch statistics across ranks (sync_batch_norm), else empty
  Products products = Products::own;  // mixed precision on the per-layer path: GEMMs from 16-bit copies
  Gradients gradients = Gradients::add;  // backward: add dL/dparams to grads, or write them over it
  // backward on the CPU: large weight gradients in row blocks, each reported final to layer_done
  // as it completes (a data-parallel step whose gradient buckets end inside layers)
  bool weight_row_blocks = false;
};

template <class Layers>
struct Program;

template <Layer... Ls>
struct Program<TypeList<Ls...>> {
  static constexpr std::size_t count = sizeof...(Ls);
  using Index = std::make_index_sequence<count>;

  template <std::size_t I>
  using layer = std::tuple_element_t<I, std::tuple<Ls...>>;

 public:
  static_assert((check::tensors_aligned<tensors_aligned(Ls::params) && tensors_aligned(buffer_infos_of<Ls>())>() &&
                 ...));
  // Each layer's slice of the flat arrays (param_slice_of, nn/layer.hpp).
  static constexpr std::array<std::size_t, count> param_offset = exclusive_scan<count>({param_slice_of<Ls>...});
  static constexpr std::array<std::size_t, count> buffer_offset = exclusive_scan<count>({buffer_slice_of<Ls>...});
  // The lengths of the flat parameter (and gradient) and buffer arrays: the tensors' values and
  // the zeros that align them.
  static constexpr std::size_t flat_size = (std::size_t{0} + ... + param_slice_of<Ls>);
  static constexpr std::size_t num_buffers = (std::size_t{0} + ... + buffer_slice_of<Ls>);
  // End of each layer's slice of the flat parameters; the last is flat_size.
  static constexpr std::array<std::size_t, count> param_ends = [] {
    std::array<std::size_t, count> ends{param_slice_of<Ls>...};
    for (std::size_t i = 0; i < count; ++i) ends[i] += param_offset[i];
    return ends;
  }();
  // Where a gradient bucket may end, ascending: each layer's end and, in a layer whose weight
  // gradient comes in row blocks, the blocks' starts and the weight's end (weight_row_blocks.hpp).
  static constexpr std::size_t gradient_cut_count =
      (count + ... + (weight_row_block_count<Ls>() > 1 ? static_cast<std::size_t>(weight_row_block_count<Ls>()) : 0));
  static constexpr std::array<std::size_t, gradient_cut_count> gradient_cuts = [] {
    std::array<std::size_t, gradient_cut_count> cuts{};
    std::size_t k = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ([&] {
        if constexpr (weight_row_block_count<layer<I>>() > 1) {
          constexpr WeightRowBlocks blocks = layer<I>::weight_row_blocks;
          for (int b = 1; b <= blocks.count; ++b) cuts[k++] = param_offset[I] + blocks.begin(b);
        }
        cuts[k++] = param_ends[I];
      }(), ...);
    }(Index{});
    return cuts;
  }();
  // Per-sample offsets of each layer's output; its saved values follow the output.
  static constexpr std::array<std::size_t, count> storage_offset = exclusive_scan<count>({storage_of<Ls>...});
  static constexpr std::size_t storage_per_sample = (std::size_t{0} + ... + storage_of<Ls>);
  // The widest tensor any layer reads or writes: sizes the gradient and inference buffers.
  static constexpr std::size_t max_width = std::max({std::size_t{1}, Ls::in_shape::size..., Ls::out_shape::size...});
  static constexpr std::size_t gradient_width = aligned_values(max_width);  // per sample of each buffer
  static constexpr std::size_t workspace_per_sample = storage_per_sample + 2 * gradient_width;
  // The training workspace's length for up to `capacity` samples.
  static constexpr std::size_t workspace_values(int capacity) {
    return workspace_per_sample * static_cast<std::size_t>(capacity);
  }

  // Scratch shared by the layers (each uses it only during its own call).
  template <class Device>
  static constexpr std::size_t scratch_values(int batch) {
    return std::max({std::size_t{0}, scratch_values_of<Ls, Device>(batch)...});
  }

  // Whether every layer has kernels for Device, and whether any draws random numbers.
  template <class Device>
  static constexpr bool runs_on = (nn::runs_on<Ls, Device> && ...);
  static constexpr bool draws_random = (nn::draws_random<Ls> || ...);

  static constexpr std::size_t first_trainable = [] {
    constexpr std::array<bool, count + 1> has{(Ls::num_params > 0)..., true};
    std::size_t i = 0;
    while (!has[i]) ++i;
    return i;
  }();

  // act[0] = input, act[i + 1] = output of layer i; filled by forward_train, read by backward.
  template <class T>
  using Activations = std::array<const T*, count + 1>;

  template <class T>
  static T* output_gradient(T* workspace, int capacity) {
    return workspace + storage_per_sample * static_cast<std::size_t>(capacity);
  }

  // Where forward_train puts each activation for input x.
  template <class T>
  static Activations<T> locate(const T* x, T* workspace, int capacity) {
    Activations<T> act{};
    act[0] = x;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((act[I + 1] = layer<I>::output_aliases_input ? act[I]
                                                    : workspace + storage_offset[I] * static_cast<std::size_t>(capacity)),
       ...);
    }(Index{});
    return act;
  }

  template <class T, class Device>
  static void forward_train(Device device, const Run<T>& run, const T* x, T* workspace, int capacity, int batch,
                            Activations<T>& act) {
    act = locate(x, workspace, capacity);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (forward_layer<I>(device, run, workspace, capacity, batch, act), ...);
    }(Index{});
  }

  // Expects dL/d(output) at output_gradient(workspace); adds dL/d(params) to grads, or writes them
  // over it when run.gradients is Gradients::overwrite.
  // After each layer with parameters, calls layer_done(offset): every gradient at offsets >= offset
  // is then final (the data-parallel optimizer starts reducing them); with run.weight_row_blocks,
  // also inside such layers on the CPU, at each of gradient_cuts as it completes.
  // With InputGradient (a block inside residual or concat) every layer runs backward and the
  // result is where dL/dx is; otherwise the result is null.
  template <bool InputGradient = false, class T, class Device, class LayerDone>
  static const T* backward(Device device, const Run<T>& run, T* grads, T* workspace, int capacity, int batch,
                           const Activations<T>& act, LayerDone&& layer_done) {
    T* dy = output_gradient(workspace, capacity);
    T* spare = dy + gradient_width * static_cast<std::size_t>(capacity);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((backward_layer<count - 1 - I, InputGradient>(device, run, grads, workspace, capacity, batch, act, dy, spare,
                                                     layer_done),
        layer<count - 1 - I>::num_params > 0 ? layer_done(param_offset[count - 1 - I]) : void()),
       ...);
    }(Index{});
    return InputGradient ? dy : nullptr;
  }

  // PyTorch-default parameters, each layer from its own random stream of `seed` (so a layer's
  // initial values do not depend on the layers before it), and zeros between tensors.
  // params, buffers: host memory of flat_size and num_buffers values.
  template <class T>
  static void init_params(T* params, std::uint64_t seed) {
    std::fill_n(params, flat_size, T(0));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (init_layer_params<I>(params, seed), ...);
    }(Index{});
  }
  template <class T>
  static void init_buffers(T* buffers) {
    std::fill_n(buffers, num_buffers, T(0));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (init_layer_buffers<I>(buffers), ...);
    }(Index{});
  }

  // Inference: no saved values, outputs ping-pong in `scratch` (inference_values(batch) values),
  // the last layer writes into `out`.
  static constexpr std::size_t inference_values(int batch) { return 2 * gradient_width * static_cast<std::size_t>(batch); }
  template <class T, class Device>
  static void forward_infer(Device device, const Run<T>& run, const T* x, T* scratch, T* out, int batch) {
    const T* current = x;
    int toggle = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (infer_layer<I>(device, run, scratch, out, batch, current, toggle), ...);
    }(Index{});
    if (current != out) {
      using Last = layer<count - 1>;
      const std::size_t n = static_cast<std::size_t>(batch) * Last::out_shape::size;
      assign(device, out, expr::ref(current, n));
    }
  }

 private:
  template <std::size_t I, class T>
  static Pass<T> pass_of(const Run<T>& run) {
    using L = layer<I>;
    return {run.training, num_buffers_of<L>() > 0 ? run.buffers + buffer_offset[I] : nullptr, run.scratch,
            derive_seed(run.seed, static_cast<std::uint64_t>(L::module_index)), run.sync, run.products,
            run.gradients};
  }

  // Runs a layer's pass; on a device, a failed device call's error also names the layer.
  template <std::size_t I, class Device, class Call>
  static void naming_layer(Device, Call&& call) {
    if constexpr (std::is_same_v<Device, Cpu>) {
      call();
    } else {
      try {
        call();
      } catch (const DeviceError& e) {
        std::string message = e.what();
        message += "; in layer ";
        message += std::to_string(layer<I>::module_index);
        message += " of the network (parameters '";
        message += std::to_string(layer<I>::module_index);
        message += ".*')";
        throw DeviceError(message);
      }
    }
  }

  template <std::size_t I, class T>
  static void init_layer_params(T* params, std::uint64_t seed) {
    Rng rng(derive_seed(seed, static_cast<std::uint64_t>(layer<I>::module_index)));
    layer<I>::init(params + param_offset[I], rng);
  }
  template <std::size_t I, class T>
  static void init_layer_buffers(T* buffers) {
    if constexpr (num_buffers_of<layer<I>>() > 0) layer<I>::init_buffers(buffers + buffer_offset[I]);
  }

  template <std::size_t I, class T, class Device>
  static void forward_layer(Device device, const Run<T>& run, T* workspace, int capacity, int batch,
                            const Activations<T>& act) {
    using L = layer<I>;
    if constexpr (!L::output_aliases_input) {
      T* y = workspace + storage_offset[I] * static_cast<std::size_t>(capacity);
      T* saved = L::saved_per_sample > 0 ? y + output_storage_of<L> * static_cast<std::size_t>(capacity) : nullptr;
      naming_layer<I>(device, [&] {
        L::forward(device, pass_of<I>(run), run.params + param_offset[I], act[I], y, saved, batch);
      });
    }
  }

  // What layer I's forward kept for its backward, or null.
  template <std::size_t I, class T>
  static const T* saved_of(T* workspace, int capacity) {
    using L = layer<I>;
    return L::saved_per_sample > 0
               ? workspace + (storage_offset[I] + output_storage_of<L>) * static_cast<std::size_t>(capacity)
               : nullptr;
  }

  // Whether layer I's backward, on the CPU, applies the activation of layer I - 1 to its dx (in its
  // product's epilogue, while each block is in cache), and layer I - 1's backward then takes
  // dL/dz: two fused dense layers in a row (nn/dense_layer.hpp), the lower one running backward.
  template <std::size_t I, bool InputGradient, class Device>
  static consteval bool applies_activation_below() {
    if constexpr (I == 0 || I >= count || !std::is_same_v<Device, Cpu>) {
      return false;
    } else {
      return (InputGradient || I - 1 >= first_trainable) &&
             requires { requires layer<I>::applies_activation_below; } &&
             requires { requires layer<I - 1>::takes_activation_gradient; };
    }
  }

  template <std::size_t I, bool InputGradient, class T, class Device, class LayerDone>
  static void backward_layer(Device device, const Run<T>& run, T* grads, T* workspace, int capacity, int batch,
                             const Activations<T>& act, T*& dy, T*& spare, LayerDone& layer_done) {
    using L = layer<I>;
    if constexpr ((InputGradient || I >= first_trainable) && !L::output_aliases_input) {
      constexpr bool needs_dx = InputGradient || I > first_trainable;
      T* dx = needs_dx ? (L::backward_in_place ? dy : spare) : nullptr;
      const T* saved = saved_of<I>(workspace, capacity);
      Pass<T> pass = pass_of<I>(run);
      pass.dy_is_dz = applies_activation_below<I + 1, InputGradient, Device>();
      [[maybe_unused]] auto report = [&](std::size_t offset) { layer_done(param_offset[I] + offset); };
      if constexpr (std::is_same_v<Device, Cpu> && weight_row_block_count<L>() > 1)
        if (run.weight_row_blocks)
          pass.gradients_final = {&report, [](void* context, std::size_t offset) {
                                    (*static_cast<decltype(report)*>(context))(offset);
                                  }};
      if constexpr (L::num_params > 0 && !overwrites_gradients_on<L, Device>) {
        // A layer that only adds to its gradients: over zeros, when the rest are overwritten.
        if (pass.gradients == Gradients::overwrite) {
          fill(device, grads + param_offset[I], L::num_params, T(0));
          pass.gradients = Gradients::add;
        }
      }
      naming_layer<I>(device, [&] {
        if constexpr (applies_activation_below<I, InputGradient, Device>()) {
          using Below = layer<I - 1>;
          const ActivationBelow<typename Below::activation, T> below{{}, saved_of<I - 1>(workspace, capacity)};
          L::backward(device, pass, run.params + param_offset[I], grads + param_offset[I], act[I], act[I + 1], saved,
                      dy, dx, batch, below);
        } else {
          L::backward(device, pass, run.params + param_offset[I], grads + param_offset[I], act[I], act[I + 1], saved,
                      dy, dx, batch);
        }
      });
      if constexpr (needs_dx && !L::backward_in_place) std::swap(dy, spare);
    }
  }

  template <std::size_t I, class T, class Device>
  static void infer_layer(Device device, const Run<T>& run, T* scratch, T* out, int batch, const T*& current,
                          int& toggle) {
    using L = layer<I>;
    if constexpr (!L::output_aliases_input) {
      T* y = I == last_computing ? out : scratch + static_cast<std::size_t>(toggle) * gradient_width * static_cast<std::size_t>(batch);
      naming_layer<I>(device, [&] {
        L::forward(device, pass_of<I>(run), run.params + param_offset[I], current, y, static_cast<T*>(nullptr), batch);
      });
      current = y;
      toggle ^= 1;
    }
  }

  static constexpr std::size_t last_computing = [] {
    constexpr std::array<bool, count + 1> computes{false, !Ls::output_aliases_input...};
    std::size_t i = count;
    while (i > 0 && !computes[i]) --i;
    return i == 0 ? count : i - 1;
  }();
};

}  // namespace etnn::nn::detail
