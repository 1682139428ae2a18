#pragma once
// etnn::Trainer: one training step is forward, loss, backward, gradient reduction and update,
// over a workspace sized once from the network type and the largest batch. After the first step
// at a given batch size a step allocates nothing.
//   etnn::Trainer trainer(model, loss, opt);
//   for (auto batch : loader) trainer.step(batch);
//   float l = trainer.step(x, y);
//   etnn::Trainer big(model, loss, opt, {.accumulate = 4});   // 4 micro-batches per update
// A loss with parameters of its own (loss/parametric.hpp: ArcFace, CenterLoss, ...) comes with
// their optimizer, which steps after the model's:
//   etnn::Trainer trainer(model, arcface, opt, head_opt);
#include <span>
#include <string>
#include <type_traits>

#include "../core/cross_rank_sum.hpp"
#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../cpu/executor.hpp"
#include "../loss/parametric.hpp"
#include "../loss/targets.hpp"
#include "../tensor/tensor.hpp"
#include "staging.hpp"

namespace etnn {

struct TrainerOptions {
  int accumulate = 1;  // micro-batches per optimizer step (gradient accumulation)
  // Data parallel: batch norm's statistics over the global batch of all ranks (PyTorch's
  // nn.SyncBatchNorm: N ranks with batch b then train as one process with batch N b), instead of
  // each rank's own batch (DDP's default). Costs a few small allreduces per batch-norm layer.
  bool sync_batch_norm = false;
};

namespace detail {
// The Trainer's LossOptim for a loss without parameters.
struct NoLossOptimizer {};
}  // namespace detail

template <class Model, class Loss, class Optim, class LossOptim = detail::NoLossOptimizer>
class Trainer {
 public:
  // A loss with parameters of its own (loss/parametric.hpp) needs an optimizer for them.
  static constexpr bool loss_has_parameters = loss::ParametricLoss<Loss>;
  static constexpr bool has_loss_optimizer = !std::is_same_v<LossOptim, detail::NoLossOptimizer>;
  static_assert(check::loss_optimizer<!loss_has_parameters || has_loss_optimizer>());

  using T = typename Model::value_type;
  using Device = typename Model::device;
  using program = typename Model::program;
  using input_shape = typename Model::input_shape;
  using output_shape = typename Model::output_shape;

  Trainer(Model& model, Loss& loss, Optim& optimizer, TrainerOptions options = {})
      : model_(model), loss_(loss), optimizer_(optimizer), options_(checked(options)) {}

  // loss_optimizer updates the loss's own parameters (a parametric loss only).
  Trainer(Model& model, Loss& loss, Optim& optimizer, LossOptim& loss_optimizer, TrainerOptions options = {})
    requires has_loss_optimizer
      : model_(model), loss_(loss), optimizer_(optimizer), loss_optimizer_(&loss_optimizer),
        options_(checked(options)) {
    static_assert(check::loss_optimizer_target<
                  loss_has_parameters && requires { requires std::is_same_v<typename LossOptim::model_type, Loss>; }>());
  }

  // Sizes everything a step needs for batches of up to `batch` samples: the workspace, the
  // buffers that convert float data to the model's scalar type, and the GEMMs' packing buffers
  // (by one forward and backward pass of zeros, which adds exactly zero to the gradients; it runs in
  // eval mode, so running statistics and dropout streams are untouched).
  // Steps after it allocate nothing; without it the first step (or a larger batch) does this.
  void reserve(int batch) {
    if (batch <= capacity_) return;
    const auto rows = static_cast<std::size_t>(batch);
    workspace_ = Buffer<T, Device>(program::workspace_per_sample * rows);
    scratch_ = Buffer<T, Device>(program::scratch_values(batch));
    capacity_ = batch;
    if constexpr (!std::is_same_v<T, float>) {
      input_staging_.reserve_discard(input_shape::size * rows);
      target_staging_.reserve_discard(output_shape::size * rows);
    }
    Buffer<T, Device> zeros(input_shape::size * rows);
    fill(Device{}, zeros.data(), zeros.size(), T(0));
    const auto run = model_.next_run(scratch_.data(), true);
    program::forward_train(Device{}, run, zeros.data(), workspace_.data(), capacity_, batch, activations_);
    fill(Device{}, program::output_gradient(workspace_.data(), capacity_), output_shape::size * rows, T(0));
    program::backward(Device{}, run, model_.gradients(), workspace_.data(), capacity_, batch, activations_,
                      [](std::size_t) {});
  }
  int capacity() const noexcept { return capacity_; }

  // A batch from a DataLoader: batch.x (B samples), batch.y (B targets).
  template <class Batch>
    requires requires(const Batch& b) { b.x; b.y; }
  T step(const Batch& batch) {
    return step(batch.x, batch.y);
  }

  // x: B samples of the network's input shape; y: B class indices or (B, output) real targets,
  // as the loss takes. Returns the batch's mean loss (before the update).
  // With accumulate = k, each call is one micro-batch: gradients of k calls are averaged, and only
  // the k-th call reduces them across ranks and updates (PyTorch's no_sync on the others).
  template <class X, class Y>
  T step(const X& x, const Y& y) {
    const bool last = micro_step_ + 1 == options_.accumulate;
    if (micro_step_ == 0) {
      model_.zero_grad();
      if constexpr (loss_has_parameters) loss_.zero_grad();
    }
    if (!last) {
      const T loss = backward_pass(x, y, [](std::size_t) {});
      ++micro_step_;
      return loss;
    }
    try {
      const T loss = backward_pass(x, y, [this](std::size_t first) { optimizer_.gradients_ready_from(first); });
      optimizer_.step();
      if constexpr (has_loss_optimizer) loss_optimizer_->step();
      micro_step_ = 0;
      return loss;
    } catch (...) {
      optimizer_.abandon_step();  // reductions in flight: the job cannot continue consistently
      if constexpr (has_loss_optimizer) loss_optimizer_->abandon_step();
      throw;
    }
  }

  // Forward, loss and backward without an update and without communication: adds to the model's
  // gradients (and a parametric loss's) dL/dparams of this batch's mean loss, divided by
  // `accumulate` (so that k calls sum to the mean over the k batches). For custom loops; does not
  // move the accumulation window.
  template <class X, class Y>
  T accumulate_gradients(const X& x, const Y& y) {
    return backward_pass(x, y, [](std::size_t) {});
  }

  const TrainerOptions& options() const noexcept { return options_; }
  // Position within the accumulation window (0 .. accumulate - 1), kept by training checkpoints.
  int micro_step() const noexcept { return micro_step_; }
  void restore_micro_step(int micro_step) {
    if (micro_step < 0 || micro_step >= options_.accumulate)
      throw Error("etnn::Trainer: micro step " + std::to_string(micro_step) + " outside [0, " +
                  std::to_string(options_.accumulate) + ")");
    micro_step_ = micro_step;
  }
  Model& model() noexcept { return model_; }
  Optim& optimizer() noexcept { return optimizer_; }
  // The optimizer of a parametric loss's parameters.
  LossOptim& loss_optimizer() noexcept
    requires has_loss_optimizer
  {
    return *loss_optimizer_;
  }

 private:
  static TrainerOptions checked(TrainerOptions options) {
    if (options.accumulate < 1)
      throw Error("etnn::Trainer: accumulate must be >= 1, got " + std::to_string(options.accumulate));
    return options;
  }

  // Forward, loss (its gradient divided by `accumulate`) and backward, calling layer_done as
  // layers finish (see Program::backward).
  template <class X, class Y, class LayerDone>
  T backward_pass(const X& x, const Y& y, LayerDone&& layer_done) {
    const auto in = const_view(x);
    static_assert(check::input_shape<typename decltype(in)::shape, input_shape>());
    const int batch = in.batch();
    if (batch <= 0) throw ShapeError("etnn::Trainer: empty batch");
    reserve(batch);
    const auto staged = detail::stage_as<T, Device>(in, input_staging_);
    auto run = model_.next_run(scratch_.data());
    if (options_.sync_batch_norm && optimizer_.reducer().size() > 1) run.sync = CrossRankSum(optimizer_.reducer());
    program::forward_train(Device{}, run, staged.data(), workspace_.data(), capacity_, batch, activations_);
    const TensorView<const T, output_shape, Device> output(activations_.back(), batch);
    T* output_grad = program::output_gradient(workspace_.data(), capacity_);
    // A parametric loss adds its parameters' gradients itself: scaled by 1/accumulate as dL/doutput is below.
    if constexpr (loss_has_parameters) loss_.set_gradient_scale(T(1) / static_cast<T>(options_.accumulate));
    const T loss = loss_value_and_grad(output, y, output_grad);
    if (options_.accumulate > 1) {
      const std::size_t n = static_cast<std::size_t>(batch) * output_shape::size;
      assign(Device{}, output_grad, expr::ref(output_grad, n) * (T(1) / static_cast<T>(options_.accumulate)));
    }
    program::backward(Device{}, run, model_.gradients(), workspace_.data(), capacity_, batch, activations_,
                      layer_done);
    return loss;
  }

  template <class Y>
  T loss_value_and_grad(TensorView<const T, output_shape, Device> output, const Y& y, T* grad) {
    using Kind = typename Loss::target_kind;
    static_assert(check::loss_target_kind<std::is_same_v<Kind, loss::ClassIndices> ||
                                          std::is_same_v<Kind, loss::RealValues> ||
                                          std::is_same_v<Kind, loss::MultiHot>>());
    if constexpr (std::is_same_v<Kind, loss::ClassIndices>) {
      static_assert(check::class_index_targets<std::is_convertible_v<const Y&, std::span<const int>>>());
      return loss_.value_and_grad(Device{}, output, std::span<const int>(y), grad);
    } else {  // RealValues and MultiHot: a tensor of the output's shape
      static_assert(check::tensor_targets<requires(const Y& t) { const_view(t); }>());
      const auto staged = detail::stage_as<T, Device>(const_view(y), target_staging_);
      return loss_.value_and_grad(Device{}, output, staged, grad);
    }
  }

  Model& model_;
  Loss& loss_;
  Optim& optimizer_;
  LossOptim* loss_optimizer_ = nullptr;  // null without loss parameters
  TrainerOptions options_;
  int micro_step_ = 0;  // position within the current accumulation window
  Buffer<T, Device> workspace_;
  Buffer<T, Device> scratch_;  // the layers' scratch (im2col columns, per-channel sums)
  int capacity_ = 0;
  Buffer<T, Device> input_staging_;
  Buffer<T, Device> target_staging_;
  typename program::template Activations<T> activations_{};
};

}  // namespace etnn
