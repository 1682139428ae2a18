#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// etnn::Model<Net, T, Device>: a network type on a device with a scalar type. It owns one flat
// parameter buffer and one flat gradient buffer; every parameter tensor is a slice at a
// compile-time offset, named as torch.nn.Sequential.state_dict() names it ("0.weight", ...).
// Non-trainable state (batch norm's running statistics) lives in a third flat buffer, named the
// same way ("1.running_mean"). Like a torch.nn.Module it is in training mode until eval().
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/precision.hpp"
#include "../core/random.hpp"
#include "../core/checks.hpp"
#include "checks.hpp"
#include "../tensor/copy.hpp"
#include "gradient_buffer.hpp"
#include "../backend/staging.hpp"
#include "../backend/threads.hpp"
#include "../tensor/tensor.hpp"
#include "program.hpp"
#include "../backend/executor.hpp"
#include "../backend/memory.hpp"
#include "fused_mlp_program.hpp"
#include "split_mlp_program.hpp"
#include "sequential.hpp"

namespace etnn {

// One parameter tensor as a slice of the flat buffers.
struct NamedParameter {
  std::string name;        // "2.weight"
  std::vector<int> shape;  // PyTorch layout: (out, in) for linear weights
  std::size_t offset;      // into parameters() and gradients()
  std::size_t numel;
};

namespace nn::detail {
// Mixed precision that takes the fully fused kernels where a network fits them.
template <class Scalar>
inline constexpr bool fuses_narrow_mlps = std::is_same_v<Scalar, bf16> || std::is_same_v<Scalar, fp16>;

// How a model of Net and Scalar runs: layer by layer; as the fully fused kernels (a build that has
// them, nvcc; etnn::bf16 or etnn::fp16; a chain of linear layers they take); or split, a wide first
// linear layer by layer and the rest fused.
enum class Executor { layers, fused, split };
template <class Net, class Scalar>
consteval Executor executor_of() {
  if constexpr (!fuses_narrow_mlps<Scalar> || !device_compiled<Cuda>) {
    return Executor::layers;
  } else {
    return []<class... Ls>(TypeList<Ls...>) {
      if constexpr (fusable_mlp<Ls...>()) return Executor::fused;
      else if constexpr (splits_into_fused_tail<Ls...>()) return Executor::split;
      else return Executor::layers;
    }(typename Net::layers{});
  }
}

// The executor of a network for a model's scalar type: Program, the fully fused kernels
// (nn/fused_mlp_program.hpp) or the split (nn/split_mlp_program.hpp), as executor_of says.
template <class Net, class Scalar, Executor = executor_of<Net, Scalar>()>
struct ProgramFor {
  using type = Program<typename Net::layers>;
};
template <class Net, class Scalar>
struct ProgramFor<Net, Scalar, Executor::fused> {
  using type = FusedMlpProgram<typename Net::layers, typename backend::HalfOf<Scalar>::type>;
};
template <class Net, class Scalar>
struct ProgramFor<Net, Scalar, Executor::split> {
  using type = SplitMlpProgram<typename Net::layers, typename backend::HalfOf<Scalar>::type>;
};
}  // namespace nn::detail

// Net may be spelled decltype(net) for a constexpr net, which is const-qualified. Scalar is float,
// double, or etnn::bf16 / etnn::fp16 / etnn::bf16_unfused / etnn::fp16_unfused (mixed precision on
// CUDA: fp32 parameters, 16-bit products; core/precision.hpp).
template <class NetSpelled, class Scalar = float, class Device = Cpu>
class Model {
  using Net = std::remove_cv_t<NetSpelled>;
  using T = master_t<Scalar>;
  static_assert(nn::check::network_has_input<nn::Network<Net>>());
  static_assert(nn::check::network_has_layers<(Net::layers::size > 0)>());
  static_assert(nn::check::model_scalar<Scalar, mixed_precision<Scalar> && std::is_same_v<Device, Cuda>>());
  static_assert(etnn::check::device_available<Device>());

 public:
  using network = Net;
  using scalar_type = Scalar;
  using value_type = T;  // of parameters, gradients, inputs and outputs
  using device = Device;
  using input_shape = typename Net::input_shape;
  using output_shape = typename Net::output_shape;
  using program = typename nn::detail::ProgramFor<Net, Scalar>::type;
  static constexpr std::size_t num_params = Net::num_params;  // trainable values, as PyTorch counts them
  // The length of the flat parameter and gradient arrays: every tensor starts on a 256-byte
  // boundary (core/alignment.hpp), and the zeros between tensors stay zero (their gradients are 0).
  static constexpr std::size_t flat_size = program::flat_size;
  static constexpr std::size_t num_buffers = program::num_buffers;  // the buffer array's length, likewise
  static_assert(nn::check::layers_on_device<!device_compiled<Device> || program::template runs_on<Device>>());

  // Parameters initialised as PyTorch initialises each layer, from a seeded generator: one
  // stream per layer, so a layer's initial values do not depend on the layers before it.
  // A device model is initialised on the host and copied over, so it starts where a CPU model
  // with the same seed starts.
  explicit Model(std::uint64_t seed = 0)
      : params_(flat_size), grads_(flat_size), buffers_(num_buffers), seed_(seed) {
    if constexpr (std::is_same_v<Device, Cpu>) {
      program::init_params(params_.data(), seed);
      program::init_buffers(buffers_.data());
    } else {
      Buffer<T, Cpu> params(flat_size), buffers(num_buffers);
      program::init_params(params.data(), seed);
      program::init_buffers(buffers.data());
      copy_from_host(Device{}, params_.data(), params.data(), flat_size);
      copy_from_host(Device{}, buffers_.data(), buffers.data(), num_buffers);
    }
    zero_grad();
  }

  // PyTorch's model.train() / model.eval(): batch norm uses batch statistics and updates its
  // running statistics, and dropout drops, only in training mode. The mode applies to every
  // forward pass, the Trainer's and forward()'s; etnn::evaluate switches to eval for its duration.
  void train(bool on = true) noexcept { training_ = on; }
  void eval() noexcept { training_ = false; }
  bool training() const noexcept { return training_; }

  T* parameters() noexcept { return params_.data(); }
  const T* parameters() const noexcept { return params_.data(); }
  // The gradients live in the model's own buffer, or in memory its data-parallel optimizer sums
  // in place for the optimizer's life (keep_gradients_in): a pointer taken before the optimizer was
  // built, or after it went, no longer points at them.
  T* gradients() noexcept { return grads_.data(); }
  const T* gradients() const noexcept { return grads_.data(); }

  // Keeps the gradients in `storage` (flat_size values on the model's device that outlive this
  // use) instead of the model's own buffer, which is released meanwhile; nullptr brings them back
  // into a buffer of its own. A data-parallel optimizer whose reducer sums shared memory in place
  // does this for its life (optim/gradient_storage.hpp).
  void keep_gradients_in(T* storage) { grads_.keep_in(storage); }

  T* buffers() noexcept { return buffers_.data(); }
  const T* buffers() const noexcept { return buffers_.data(); }

  void zero_grad() { fill(Device{}, grads_.data(), flat_size, T(0)); }

  // The network call of the next forward pass. In training mode each one gets a fresh random
  // stream (dropout masks) from the model's seed and a count of training passes, which training
  // checkpoints keep; `warm_up` gives an eval-mode call that changes nothing (buffer sizing).
  nn::detail::Run<T> next_run(T* scratch, bool warm_up = false) {
    const bool training = training_ && !warm_up;
    nn::detail::Run<T> run{params_.data(), buffers_.data(), scratch, training, derive_seed(seed_, passes_)};
    run.products = products_of<Scalar>;
    if (training) ++passes_;
    return run;
  }
  std::uint64_t training_passes() const noexcept { return passes_; }
  void restore_training_passes(std::uint64_t passes) noexcept { passes_ = passes; }

  // Every parameter tensor, in state_dict order.
  static std::vector<NamedParameter> named_parameters() {
    std::vector<NamedParameter> out;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (append_names<I>(out, program::template layer<I>::params, program::param_offset[I]), ...);
    }(std::make_index_sequence<program::count>{});
    return out;
  }

  // Every buffer (running statistics), in state_dict order; offsets into buffers().
  static std::vector<NamedParameter> named_buffers() {
    std::vector<NamedParameter> out;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (append_buffer_names<I>(out), ...);
    }(std::make_index_sequence<program::count>{});
    return out;
  }

  // Inference: y = net(x) for x's batch, into a new tensor on the model's device (etnn::to_host
  // brings a device's to the host). x may be host data for a device model.
  template <class X>
  Tensor<T, output_shape, Device> forward(const X& x) {
    Tensor<T, output_shape, Device> y(const_view(x).batch());
    forward(x, y.view());
    return y;
  }

  // Sizes the inference buffers for batches of up to `batch` samples, and the GEMMs' packing
  // buffers by one pass over zeros, so that forward(x, y) allocates nothing afterwards.
  void reserve(int batch) {
    const auto rows = static_cast<std::size_t>(std::max(batch, 0));
    if (batch <= reserved_) return;
    reserved_ = batch;
    activations_.reserve_discard(program::inference_values(batch));
    scratch_.reserve_discard(program::template scratch_values<Device>(batch));
    Buffer<T, Device> zeros(input_shape::size * rows), out(output_shape::size * rows);
    fill(Device{}, zeros.data(), zeros.size(), T(0));
    program::forward_infer(Device{}, next_run(scratch_.data(), true), zeros.data(), activations_.data(), out.data(),
                           batch);
    backend::spread_thread_scratch(Device{});
  }

  // Inference into the caller's tensor; allocates only when the batch exceeds every earlier one
  // (and reserve()). The buffers belong to the model: one thread at a time runs a model's forward.
  template <class X>
  void forward(const X& x, TensorView<T, output_shape, Device> y) {
    const auto in = backend::stage_as<T, Device>(const_view(x), input_staging_);
    using In = decltype(in);
    static_assert(nn::check::input_shape<typename In::shape, input_shape>());
    static_assert(nn::check::input_scalar<typename decltype(const_view(x))::value_type, T>());
    if (in.batch() != y.batch())
      throw ShapeError("etnn::Model::forward: input batch " + std::to_string(in.batch()) +
                       " but output batch " + std::to_string(y.batch()));
    reserve(in.batch());
    program::forward_infer(Device{}, next_run(scratch_.data()), in.data(), activations_.data(), y.data(), in.batch());
  }

 private:
  template <std::size_t I, class Infos>
  static void append_names(std::vector<NamedParameter>& out, const Infos& infos, std::size_t base) {
    using L = typename program::template layer<I>;
    for (const auto& p : infos) {
      out.push_back({std::to_string(L::module_index) + "." + std::string(p.name),
                     std::vector<int>(p.shape.begin(), p.shape.begin() + p.rank), base + p.offset, p.numel()});
    }
  }

  template <std::size_t I>
  static void append_buffer_names(std::vector<NamedParameter>& out) {
    using L = typename program::template layer<I>;
    if constexpr (nn::num_buffers_of<L>() > 0) append_names<I>(out, L::buffers, program::buffer_offset[I]);
  }

  Buffer<T, Device> params_;
  nn::GradientBuffer<T, Device> grads_;
  Buffer<T, Device> buffers_;
  std::uint64_t seed_;
  std::uint64_t passes_ = 0;   // training-mode forward passes so far (dropout streams)
  bool training_ = true;
  int reserved_ = 0;             // largest batch reserve() has sized for
  Buffer<T, Device> activations_;  // inference ping-pong buffers
  Buffer<T, Device> scratch_;      // layers' scratch
  backend::Staging<T, Device> input_staging_;  // host input copied to the device
};

}  // namespace etnn
