#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
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
// A step whose loss or reduced gradient holds a NaN or an infinity is skipped (the non-finite
// guard, on by default): parameters, optimizer state and buffers stay as they were, and after
// max_non_finite_in_a_row such steps in a row the step throws etnn::NonFiniteError. On a CUDA
// device the verdict is decided on the device and the update predicated on it, so that the host
// does not wait within the step (for one process, without loss scaling, clipping or loss
// parameters; the host counts the verdicts as they arrive, and the error comes at the start of a
// later update window, before the verdicts that could end a run are followed by another step).
// An etnn::fp16 model's loss is scaled (dynamic loss scaling, TrainerOptions::loss_scaling).
// The Trainer orchestrates: the model's training pass runs forward and backward
// (nn/training_pass.hpp), the optimizers finish the step (reduce, non-finite scan, update), and the
// guard (non_finite_guard.hpp) and the loss scaler (loss_scaler.hpp) keep their rules.
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "../backend/loss_loops.hpp"
#include "../dist/cross_rank_sum.hpp"
#include "../core/error.hpp"
#include "../core/precision.hpp"
#include "checks.hpp"
#include "../loss/parametric.hpp"
#include "../loss/target_staging.hpp"
#include "../nn/training_pass.hpp"
#include "loss_scaler.hpp"
#include "non_finite_guard.hpp"
#include "trainer_options.hpp"

namespace etnn {

namespace train::detail {
// The Trainer's LossOptim for a loss without parameters.
struct NoLossOptimizer {};
}  // namespace train::detail

template <class Model, class Loss, class Optim, class LossOptim = train::detail::NoLossOptimizer>
class Trainer {
 public:
  // A loss with parameters of its own (loss/parametric.hpp) needs an optimizer for them.
  static constexpr bool loss_has_parameters = loss::ParametricLoss<Loss>;
  static constexpr bool has_loss_optimizer = !std::is_same_v<LossOptim, train::detail::NoLossOptimizer>;
  static_assert(train::check::loss_optimizer<!loss_has_parameters || has_loss_optimizer>());

  using T = typename Model::value_type;
  using Device = typename Model::device;
  using program = typename Model::program;
  using input_shape = typename Model::input_shape;
  using output_shape = typename Model::output_shape;
  using reducer_type = typename Optim::reducer_type;

  Trainer(Model& model, Loss& loss, Optim& optimizer, TrainerOptions options = {})
      : model_(model), loss_(loss), optimizer_(optimizer), options_(checked(options)),
        guard_(options_.skip_non_finite, options_.max_non_finite_in_a_row),
        scaler_(*options_.loss_scaling, options_.skip_non_finite), pass_(model, graphs_off_reason(options, optimizer)) {}

  // loss_optimizer updates the loss's own parameters (a parametric loss only).
  Trainer(Model& model, Loss& loss, Optim& optimizer, LossOptim& loss_optimizer, TrainerOptions options = {})
    requires has_loss_optimizer
      : Trainer(model, loss, optimizer, options) {
    static_assert(train::check::loss_optimizer_target<
                  loss_has_parameters && requires { requires std::is_same_v<typename LossOptim::model_type, Loss>; }>());
    loss_optimizer_ = &loss_optimizer;
  }

  // Sizes everything a step needs for batches of up to `batch` samples: the training pass's
  // workspace and buffers (TrainingPass::reserve) and the buffer that converts float targets to
  // the model's scalar type. Steps after it allocate no device memory; without it the first step
  // (or a larger batch) does this. (On CUDA the pinned host memory that data travels through is
  // sized by the first steps: cuda/pinned_staging.hpp.)
  void reserve(int batch) {
    if (batch <= pass_.capacity()) return;
    targets_.reserve(output_shape::size * static_cast<std::size_t>(batch));
    pass_.reserve(batch);
  }
  int capacity() const noexcept { return pass_.capacity(); }

  // What step() returns: the batch's mean loss, a T; on a CUDA device the loss on its way to the
  // host (cuda::PendingLoss<T>), which converts to T when read (or .value(), where a number is
  // needed: printf, std::format, std::max), as PyTorch's loss.item() reads its loss tensor: a step
  // whose loss is not read does not wait for the device to compute it. Read it on the stepping
  // thread before that thread computes another loss on the device (the next step does), which
  // replaces it: reading it then is an etnn::Error, unless it had been read (the non-finite guard
  // reads it in the step where the host decides its verdict).
  using loss_value = backend::LossValue<T, Device>;

  // A batch from a DataLoader: batch.x (B samples), batch.y (B targets).
  template <class Batch>
    requires requires(const Batch& b) { b.x; b.y; }
  loss_value step(const Batch& batch) {
    return step(batch.x, batch.y);
  }

  // x: B samples of the network's input shape; y: B class indices or (B, output) real targets,
  // as the loss takes. Returns the batch's mean loss (before the update): a loss_value.
  // With accumulate = k, each call is one micro-batch: gradients of k calls are averaged, and only
  // the k-th call reduces them across ranks and updates (PyTorch's no_sync on the others).
  template <class X, class Y>
  loss_value step(const X& x, const Y& y) {
    guard_.settle(optimizer_, train::detail::Settle::before_step);
    throw_owed_input_error(micro_step_ > 0);
    if (micro_step_ == 0) start_window();
    if (micro_step_ + 1 < options_.accumulate) {
      loss_value loss = backward_pass(x, y, [](std::size_t) {}, false, window_on_device_);
      if (guard_.on() && !window_on_device_) guard_.check_loss(static_cast<T>(loss));
      ++micro_step_;
      return loss;
    }
    std::optional<loss_value> loss;
    bool skipped = false;
    // Clipping turned on within a window whose losses the device tested: the host decides, told
    // what the device found in those losses.
    const bool on_device = window_on_device_ && verdict_on_device();
    try {
      loss.emplace(backward_pass(x, y, [this](std::size_t first) { optimizer_.gradients_ready_from(first); },
                                 optimizer_.wants_row_blocks(), window_on_device_));
      // The verdicts of earlier steps the device decided: those arrived, or all where the host
      // decides this one.
      guard_.settle(optimizer_, on_device ? train::detail::Settle::arrived : train::detail::Settle::all);
      if (!on_device) throw_owed_input_error(true);
      if constexpr (backend::verdict_on_device<Device>) {
        if (window_on_device_ && !on_device) {
          guard_.check_loss_flag(guard_.window_loss_non_finite(optimizer_.read_verdict_now()));
          throw_owed_input_error(true);
        }
        if (on_device) {  // the guard's verdict decided on the device, the update predicated on it
          const auto& verdict = optimizer_.step_unless_skipped();
          guard_.verdict_sent(optimizer_.verdicts_sent());
          guard_.restore_buffers_if_skipped(verdict, model_);
          micro_step_ = 0;
          return *std::move(loss);
        }
      }
      // The guard reads the loss (on a CUDA device: once the gradients' test has brought the
      // device's results back, one wait for both); without the guard nothing reads it.
      skipped = with_optimizers([&](auto&... optimizer) { return guard_.skips(*loss, optimizer...); });
      if (skipped) {
        guard_.restore_buffers(model_);
        with_optimizers([](auto&... optimizer) { (optimizer.skip_step(), ...); });
      } else {
        with_optimizers([&](auto&... optimizer) {
          (scaler_.unscale(optimizer.model()), ...);
          (optimizer.step(), ...);
        });
      }
      micro_step_ = 0;
    } catch (...) {  // reductions in flight: the job cannot continue consistently
      with_optimizers([](auto&... optimizer) { (optimizer.abandon_step(), ...); });
      throw;
    }
    guard_.end_window(skipped, scaler_.update(skipped, guard_.loss_finite_on_every_rank()));
    return *std::move(loss);
  }

  // Forward, loss and backward without an update and without communication: adds to the model's
  // gradients (and a parametric loss's) dL/dparams of this batch's mean loss, divided by
  // `accumulate` (so that k calls sum to the mean over the k batches) and multiplied by
  // loss_scale() (1 unless loss scaling is on: divide by it before an update). For custom loops;
  // does not move the accumulation window.
  template <class X, class Y>
  loss_value accumulate_gradients(const X& x, const Y& y) {
    return backward_pass(x, y, [](std::size_t) {});
  }

  const TrainerOptions& options() const noexcept { return options_; }
  // Position within the accumulation window (0 .. accumulate - 1), kept by training checkpoints.
  // Restoring it leaves the window's loss flag as it was (restore_guard_state sets a checkpoint's).
  int micro_step() const noexcept { return micro_step_; }
  void restore_micro_step(int micro_step) {
    if (micro_step < 0 || micro_step >= options_.accumulate)
      throw Error("etnn::Trainer: micro step " + std::to_string(micro_step) + " outside [0, " +
                  std::to_string(options_.accumulate) + ")");
    guard_.settle_quietly(optimizer_);
    guard_.check_loss_flag(device_window_loss_non_finite());  // the host decides the window from here
    micro_step_ = micro_step;
    guard_.resume_window();
    window_on_device_ = false;  // the window's earlier losses were not marked: the host decides
  }

  // Steps the non-finite guard has skipped so far (loss-scale overflows included), and how many of
  // the latest ones in a row (0 after an update, and after the error that a run of
  // max_non_finite_in_a_row ends with; overflows neither count nor end a run).
  // On a CUDA device the verdicts of the last steps may still be on their way: they wait for them
  // and count them (so read them on the stepping thread).
  std::int64_t skipped_steps() const {
    guard_.settle_quietly(optimizer_);
    return guard_.skipped_steps();
  }
  int non_finite_in_a_row() const {
    guard_.settle_quietly(optimizer_);
    return guard_.non_finite_in_a_row();
  }

  // The non-finite guard's part of a training checkpoint (io::save_state keeps it): its counts, the
  // run of skipped steps in progress, whether an earlier micro-batch of the window in progress had
  // a non-finite loss and whether window_start_buffers() holds the model's buffers at that window's
  // start, and the error a run that ended in the last verdict owes the next step.
  // The verdicts on their way are counted first; a window whose losses the device marked is read
  // from the device (a wait).
  train::GuardState guard_state() {
    guard_.settle_quietly(optimizer_);
    const bool device_flag = device_window_loss_non_finite();  // first: an input error it finds is owed
    train::GuardState state = guard_.state();
    state.window_loss_non_finite = micro_step_ > 0 && (state.window_loss_non_finite || device_flag);
    state.window_start_buffers = micro_step_ > 0 && state.window_start_buffers;
    return state;
  }
  // With restore_micro_step, what a loaded training state sets (it replaces the run, its owed
  // error included; state.window_start_buffers is not taken: see use_window_start_buffers). The
  // verdicts on their way are counted first, into the run it replaces.
  void restore_guard_state(const train::GuardState& state) {
    guard_.settle_quietly(optimizer_);
    guard_.restore(state, optimizer_.reducer().size());
  }
  // The model's buffers (batch norm's running statistics; Model::num_buffers values on the model's
  // device) as they were at the start of the accumulation window in progress, which a skipped
  // update puts back when guard_state().window_start_buffers: training checkpoints saved inside a
  // window keep them. A checkpoint's loader writes them here, then calls use_window_start_buffers
  // (after restore_micro_step, which forgets them) to have a skip put them back.
  T* window_start_buffers() noexcept { return guard_.window_start_buffers(); }
  void use_window_start_buffers() noexcept { guard_.use_window_start_buffers(); }

  // Dynamic loss scaling: the scale the next step multiplies the loss's gradient by (1 when off),
  // and the updates in a row made at it (growth_interval of them grow it). Training checkpoints
  // keep both.
  float loss_scale() const noexcept { return scaler_.scale(); }
  int updates_at_loss_scale() const noexcept { return scaler_.updates_at_scale(); }
  void restore_loss_scale(float scale, int updates_at_scale) { scaler_.restore(scale, updates_at_scale); }
  Model& model() noexcept { return model_; }
  Optim& optimizer() noexcept { return optimizer_; }
  // On CUDA, the recorded graphs of the step (cuda::GraphCache: how many, whether on, and why not).
  const backend::StepGraphs<Device>& step_graphs() const noexcept { return pass_.graphs(); }
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
    if (!options.loss_scaling)
      options.loss_scaling = LossScaling{.enabled = loss_scaled_by_default<typename Model::scalar_type>};
    return options;
  }

  // Why the step is not recorded into CUDA graphs, or "" when it may be (TrainingPass adds the
  // network's reasons).
  static std::string graphs_off_reason(const TrainerOptions& options, Optim& optimizer) {
    if (!options.cuda_graphs) return "turned off";
    if (optimizer.reducer().size() > 1)  // it starts its allreduces from backward's callbacks
      return "a data-parallel step launches its allreduces from the host";
    return "";
  }

  // Whether a window's non-finite verdict is decided on the device, the update predicated on it,
  // so that the host does not wait for the device: on a CUDA device, with the guard on, for one
  // process, and without loss scaling, clipping or loss parameters. Otherwise the host reads the
  // verdict in the step (NonFiniteGuard::skips): loss scaling's next scale and clipping's norm
  // depend on what the host reads, and ranks agree through the host.
  bool verdict_on_device() const {
    if constexpr (!backend::verdict_on_device<Device> || has_loss_optimizer)
      return false;
    else
      return guard_.on() && !scaler_.on() && optimizer_.reducer().size() == 1 && optimizer_.max_grad_norm() == 0.0f;
  }

  // An input outside the loss's domain that the device found in an earlier step or in this window
  // (cuda/input_check.hpp), once the host has read it: thrown at the start of the next step, or
  // within a step the host decides before any update. A window in progress (in_window) is lost with
  // it: its gradients and its verdict hold the micro-batches since the bad one, so the model's
  // buffers go back to the window's start and the next step begins a new window. (A step the device
  // decides skips, and its error waits for the next step's start.)
  void throw_owed_input_error(bool in_window) {
    if (!guard_.owes_input_error()) return;
    if (in_window) {
      guard_.restore_buffers(model_);
      micro_step_ = 0;
    }
    guard_.throw_owed_input_error();
  }

  // Whether the device marked a non-finite loss among the micro-batches of the window in progress,
  // when it tests them (a wait for the device); false otherwise. After the guard settled. An input
  // error the device marked there is owed (throw_owed_input_error).
  bool device_window_loss_non_finite() {
    if constexpr (backend::verdict_on_device<Device>)
      if (window_on_device_ && micro_step_ > 0) return guard_.window_loss_non_finite(optimizer_.read_verdict_now());
    return false;
  }

  // f(the model's optimizer, a parametric loss's optimizer if any): the optimizers that finish a
  // step, in the order they step.
  template <class F>
  decltype(auto) with_optimizers(F&& f) {
    if constexpr (has_loss_optimizer)
      return f(optimizer_, *loss_optimizer_);
    else
      return f(optimizer_);
  }

  // The first micro-batch of an accumulation window: its backward writes the model's gradients
  // (nothing zeroes them first), and the guard's window started.
  void start_window() {
    gradients_stale_ = true;
    if constexpr (loss_has_parameters) loss_.zero_grad();
    guard_.start_window(model_);
    window_on_device_ = verdict_on_device();
  }

  // Forward, loss (its gradient times loss_scale() / accumulate) and backward, calling layer_done as
  // layers finish (see Program::backward), and as weight gradients' row blocks do when
  // weight_row_blocks. If it throws before its backward has written stale gradients, they are
  // zeroed: what a failed step leaves is what zero_grad() would.
  // Returns the loss as the loss returned it (backend::LossValue: on a CUDA device, read when
  // converted to T).
  // verdict_on_device: the loss is marked into the optimizer's verdict once backward has returned,
  // the verdict begun (Optimizer::begin_verdict) at the window's first micro-batch.
  template <class X, class Y, class LayerDone>
  auto backward_pass(const X& x, const Y& y, LayerDone&& layer_done, bool weight_row_blocks = false,
                     bool verdict_on_device = false) {
    try {
      return forward_backward(x, y, layer_done, weight_row_blocks, verdict_on_device);
    } catch (...) {
      if (std::exchange(gradients_stale_, false)) model_.zero_grad();
      throw;
    }
  }

  template <class X, class Y, class LayerDone>
  auto forward_backward(const X& x, const Y& y, LayerDone& layer_done, bool weight_row_blocks,
                        bool verdict_on_device) {
    dist::CrossRankSum sync;
    if (options_.sync_batch_norm && optimizer_.reducer().size() > 1) sync = dist::CrossRankSum(optimizer_.reducer());
    const auto output = pass_.forward(x, sync);
    // dL/doutput is scaled by the loss scale and 1/accumulate; a parametric loss adds its
    // parameters' gradients itself, scaled the same.
    const T gradient_scale = static_cast<T>(scaler_.scale()) / static_cast<T>(options_.accumulate);
    if constexpr (loss_has_parameters) loss_.set_gradient_scale(gradient_scale);
    // A loss marked into the verdict leaves its input check there too (BCE's: no wait for it).
    const backend::DeferInputChecks<Device> deferred(verdict_on_device);
    const auto loss = targets_.value_and_grad(loss_, output.values, y, output.gradient);
    pass_.backward(gradient_scale, layer_done, gradients_stale_ ? nn::Gradients::overwrite : nn::Gradients::add,
                   weight_row_blocks);
    gradients_stale_ = false;
    // Once backward has returned, as the host's guard tests the loss: a micro-batch whose backward
    // throws leaves the window's verdict as it was (backward leaves the loss's device values be).
    // Only a lost device fails this launch, after which the window cannot go on anyway.
    if constexpr (backend::verdict_on_device<Device>)
      if (verdict_on_device)
        guard_.mark_loss(micro_step_ == 0 ? optimizer_.begin_verdict() : optimizer_.verdict(), loss, deferred.check());
    return loss;
  }

  Model& model_;
  Loss& loss_;
  Optim& optimizer_;
  LossOptim* loss_optimizer_ = nullptr;  // null without loss parameters
  TrainerOptions options_;
  int micro_step_ = 0;  // position within the current accumulation window
  // The model's gradients hold the last window's: the next backward writes them (backward_pass).
  bool gradients_stale_ = false;
  // The window's losses are marked into the device's verdict (verdict_on_device() at its start).
  bool window_on_device_ = false;
  // mutable: reading its counts may first count a verdict that was on its way from the device.
  mutable train::detail::NonFiniteGuard<Model> guard_;
  train::detail::LossScaler scaler_;
  nn::TrainingPass<Model> pass_;
  loss::detail::TargetStaging<T, Device> targets_;
};

}  // namespace etnn
