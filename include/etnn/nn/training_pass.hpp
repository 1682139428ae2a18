#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// etnn::nn::TrainingPass<Model>: a model's training forward and backward passes, over a workspace
// sized once from the network type and the largest batch (laid out as nn/program.hpp says). It
// owns the workspace, the layers' scratch, the activations from forward to backward, the input
// staging and, on CUDA, the passes recorded into graphs (backend/graphs.hpp). After the first pass
// at a given batch size a pass allocates nothing.
//   nn::TrainingPass pass(model);
//   const auto out = pass.forward(x);       // out.values: y (B, output); out.gradient: dL/dy goes there
//   loss.value_and_grad(Cpu{}, out.values, labels, out.gradient);
//   pass.backward(1.0f, [](std::size_t) {});  // model.gradients() += dL/dparams
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/graphs.hpp"
#include "../dist/cross_rank_sum.hpp"
#include "../core/error.hpp"
#include "../backend/executor.hpp"
#include "../tensor/buffer.hpp"
#include "../backend/staging.hpp"
#include "../backend/threads.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"
#include "program.hpp"

namespace etnn::nn {

template <class Model>
class TrainingPass {
 public:
  using T = typename Model::value_type;
  using Device = typename Model::device;
  using program = typename Model::program;
  using input_shape = typename Model::input_shape;
  using output_shape = typename Model::output_shape;

  // What forward() leaves for the loss: the network's output y, and where the loss writes dL/dy
  // (the same shape, in the workspace), which backward() reads.
  struct Output {
    TensorView<const T, output_shape, Device> values;
    T* gradient;
  };

  // graphs_off: why the passes must not be recorded into CUDA graphs, or "" to record them where
  // they can be.
  explicit TrainingPass(Model& model, std::string graphs_off = "")
      : model_(model), graphs_(graphs_off_reason(std::move(graphs_off))) {}

  // Sizes everything a pass needs for batches of up to `batch` samples: the workspace, the scratch,
  // the buffer that converts float input to the model's scalar type, and the GEMMs' packing
  // buffers (by one forward and backward pass of zeros, which adds exactly zero to the gradients;
  // it runs in eval mode, so running statistics and dropout streams are untouched), then every CPU
  // thread's scratch (backend/threads.hpp).
  void reserve(int batch) {
    if (batch <= capacity_) return;
    const auto rows = static_cast<std::size_t>(batch);
    graphs_.clear();  // they point into the workspace and scratch replaced here
    workspace_ = Buffer<T, Device>(program::workspace_values(batch));
    scratch_ = Buffer<T, Device>(program::template scratch_values<Device>(batch));
    capacity_ = batch;
    if constexpr (!std::is_same_v<T, float>) input_staging_.values.reserve_discard(input_shape::size * rows);
    Buffer<T, Device> zeros(input_shape::size * rows);
    fill(Device{}, zeros.data(), zeros.size(), T(0));
    const auto run = model_.next_run(scratch_.data(), true);
    program::forward_train(Device{}, run, zeros.data(), workspace_.data(), capacity_, batch, activations_);
    fill(Device{}, program::output_gradient(workspace_.data(), capacity_), output_shape::size * rows, T(0));
    program::backward(Device{}, run, model_.gradients(), workspace_.data(), capacity_, batch, activations_,
                      [](std::size_t) {});
    backend::spread_thread_scratch(Device{});
  }
  int capacity() const noexcept { return capacity_; }

  // The forward pass, in the model's mode, of x: B samples of the network's input shape. sync:
  // the sum across ranks of batch norm's global-batch statistics, or empty for each rank's own.
  template <class X>
  Output forward(const X& x, dist::CrossRankSum sync = {}) {
    const auto in = const_view(x);
    static_assert(check::input_shape<typename decltype(in)::shape, input_shape>());
    batch_ = in.batch();
    if (batch_ <= 0) throw ShapeError("etnn::Trainer: empty batch");  // the Trainer's message, as before
    reserve(batch_);
    input_ = backend::stage_as<T, Device>(in, input_staging_).data();
    run_ = model_.next_run(scratch_.data());
    run_.sync = sync;
    // Where the activations are does not depend on the pass, so a replayed graph needs only this.
    activations_ = program::locate(input_, workspace_.data(), capacity_);
    graphs_.run(graph_key(0), [&] {
      program::forward_train(Device{}, run_, input_, workspace_.data(), capacity_, batch_, activations_);
    });
    return {{activations_.back(), batch_}, program::output_gradient(workspace_.data(), capacity_)};
  }

  // The backward pass of the last forward(): dL/dy, as the loss left it at Output::gradient, times
  // gradient_scale; then model.gradients() += dL/dparams (Gradients::overwrite: = dL/dparams, what
  // they held is ignored), calling layer_done as layers finish (see Program::backward), and inside
  // layers as their weight gradients' row blocks do when weight_row_blocks (the CPU's).
  template <class LayerDone>
  void backward(T gradient_scale, LayerDone&& layer_done, Gradients gradients = Gradients::add,
                bool weight_row_blocks = false) {
    if constexpr (!std::is_same_v<Device, Cpu>) {
      // A recorded graph replays one backward for every micro-batch: the gradients are zeroed
      // outside it, and it adds.
      if (gradients == Gradients::overwrite) model_.zero_grad();
      gradients = Gradients::add;
    }
    run_.gradients = gradients;
    run_.weight_row_blocks = weight_row_blocks;
    if (gradient_scale != T(1)) {
      T* output_gradient = program::output_gradient(workspace_.data(), capacity_);
      const std::size_t n = static_cast<std::size_t>(batch_) * output_shape::size;
      assign(Device{}, output_gradient, expr::ref(output_gradient, n) * gradient_scale);
    }
    graphs_.run(graph_key(1), [&] {
      program::backward(Device{}, run_, model_.gradients(), workspace_.data(), capacity_, batch_, activations_,
                        layer_done);
    });
  }

  // On CUDA, the recorded graphs of the passes (cuda::GraphCache: how many, whether on, and why not).
  const backend::StepGraphs<Device>& graphs() const noexcept { return graphs_; }

 private:
  // Why the passes are not recorded, or "" when they are. Graphs record what a pass launches, not
  // the host's part of it, with the arguments of the recording.
  static std::string graphs_off_reason(std::string off) {
    if (!off.empty()) return off;
    if constexpr (program::draws_random) return "the network draws random numbers (dropout): each pass differs";
    return "";
  }

  // A graph of a pass holds pointers and sizes: the input's address and the batch, besides the
  // pass's and the model's own buffers, which stay put. The mode selects kernels (batch norm's
  // statistics), so eval-mode passes are parts of their own: 0 forward, 1 backward, 2 and 3 the
  // same in eval mode. Nothing else a recorded pass reads changes between steps: a network that
  // draws random numbers is not recorded, and in one process the bucket callbacks do nothing.
  std::tuple<int, int, const void*> graph_key(int part) const {
    return {run_.training ? part : part + 2, batch_, input_};
  }

  Model& model_;
  Buffer<T, Device> workspace_;
  Buffer<T, Device> scratch_;  // the layers' scratch (im2col columns, per-channel sums)
  int capacity_ = 0;
  backend::Staging<T, Device> input_staging_;
  typename program::template Activations<T> activations_{};
  // The pass in progress, from forward() to backward().
  detail::Run<T> run_{};
  int batch_ = 0;
  const T* input_ = nullptr;
  backend::StepGraphs<Device> graphs_;
};

}  // namespace etnn::nn
