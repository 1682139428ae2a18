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
// A step whose loss or reduced gradient holds a NaN or an infinity is skipped (the non-finite
// guard, on by default): parameters, optimizer state and buffers stay as they were, and after
// max_non_finite_in_a_row such steps in a row the step throws etnn::NonFiniteError.
// An etnn::fp16 model's loss is scaled (dynamic loss scaling, TrainerOptions::loss_scaling).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>

#include "../backend/non_finite.hpp"
#include "../core/cross_rank_sum.hpp"
#include "../core/error.hpp"
#include "../core/precision.hpp"
#include "../core/static_checks.hpp"
#include "../cpu/executor.hpp"
#if defined(__CUDACC__)
#include "../cuda/executor.hpp"
#include "../cuda/graph.hpp"
#endif
#include "../loss/parametric.hpp"
#include "../loss/targets.hpp"
#include "../optim/parameter_set.hpp"
#include "../tensor/tensor.hpp"
#include "../tensor/staging.hpp"

namespace etnn {

// Dynamic loss scaling (torch.cuda.amp.GradScaler, with its defaults). Each step multiplies the
// loss's gradient by the scale S before backward, so that gradients too small for fp16 products
// (below 2^-24) survive them; the gradients reduced across ranks are divided by S before the
// update (one pass over them), so the update, clipping and gradients() after the step see the
// true gradients. A step whose gradients overflow (the loss finite, S above 1) is skipped by the
// non-finite guard and S multiplied by backoff_factor; after growth_interval updates in a row, S
// is multiplied by growth_factor (while it stays finite). Powers of two (the default factors)
// make the scaling exact: a model that never overflows trains as it would unscaled.
struct LossScaling {
  bool enabled = true;
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;   // > 1
  float backoff_factor = 0.5f;  // in (0, 1)
  int growth_interval = 2000;   // >= 1
};

struct TrainerOptions {
  int accumulate = 1;  // micro-batches per optimizer step (gradient accumulation)
  // Data parallel: batch norm's statistics over the global batch of all ranks (PyTorch's
  // nn.SyncBatchNorm: N ranks with batch b then train as one process with batch N b), instead of
  // each rank's own batch (DDP's default). Costs a few small allreduces per batch-norm layer.
  bool sync_batch_norm = false;
  // The non-finite guard: before each update, the loss of every micro-batch on every rank (one
  // all-reduced count) and the gradients summed across ranks (one read) are tested; a NaN or an
  // infinity skips the update (Optimizer::skip_step) and restores the model's buffers (batch
  // norm's running statistics) to the start of the step.
  bool skip_non_finite = true;
  // Skipped steps in a row after which step() throws etnn::NonFiniteError naming the first
  // parameter tensor backward gave a non-finite gradient; 0 never throws.
  int max_non_finite_in_a_row = 3;
  // On etnn::Cuda: record the forward and the backward pass of each batch size into CUDA graphs
  // and replay them (cuda/graph.hpp); false launches every kernel each step.
  bool cuda_graphs = true;
  // Dynamic loss scaling; unset: on with LossScaling's defaults for an etnn::fp16 model, off
  // otherwise. It needs the non-finite guard (skip_non_finite), which skips overflowing steps. A
  // step skipped while the scale is above 1 and the loss finite is an overflow: it backs the scale
  // off and does not count toward max_non_finite_in_a_row. Other skipped steps (a non-finite loss,
  // or non-finite gradients at a scale of 1 or less) leave the scale and count as usual.
  std::optional<LossScaling> loss_scaling{};
};

namespace detail {
// The Trainer's LossOptim for a loss without parameters.
struct NoLossOptimizer {};

// How a host model runs the pieces of a step that a device model may record (cuda::GraphCache).
struct EagerSteps {
  explicit EagerSteps(const std::string&) {}
  void clear() {}
  template <class Key, class Work>
  void run(const Key&, Work&& work) {
    work();
  }
};

#if defined(__CUDACC__)
template <class Device>
using StepGraphs = std::conditional_t<std::is_same_v<Device, Cuda>, cuda::GraphCache, EagerSteps>;
#else
template <class Device>
using StepGraphs = EagerSteps;
#endif
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
  using reducer_type = typename Optim::reducer_type;

  Trainer(Model& model, Loss& loss, Optim& optimizer, TrainerOptions options = {})
      : model_(model), loss_(loss), optimizer_(optimizer), options_(checked(options)),
        loss_scale_(initial_loss_scale(options_)), graphs_(graphs_off_reason(options, optimizer)) {}

  // loss_optimizer updates the loss's own parameters (a parametric loss only).
  Trainer(Model& model, Loss& loss, Optim& optimizer, LossOptim& loss_optimizer, TrainerOptions options = {})
    requires has_loss_optimizer
      : model_(model), loss_(loss), optimizer_(optimizer), loss_optimizer_(&loss_optimizer),
        options_(checked(options)), loss_scale_(initial_loss_scale(options_)),
        graphs_(graphs_off_reason(options, optimizer)) {
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
    graphs_.clear();  // they point into the workspace and scratch replaced here
    workspace_ = Buffer<T, Device>(program::workspace_per_sample * rows);
    scratch_ = Buffer<T, Device>(program::template scratch_values<Device>(batch));
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
    if (micro_step_ == 0) start_window();
    if (!last) {
      const T loss = backward_pass(x, y, [](std::size_t) {});
      loss_non_finite_ |= !std::isfinite(loss);
      ++micro_step_;
      return loss;
    }
    T loss{};
    bool skipped = false;
    try {
      loss = backward_pass(x, y, [this](std::size_t first) { optimizer_.gradients_ready_from(first); });
      loss_non_finite_ |= !std::isfinite(loss);
      skipped = options_.skip_non_finite && non_finite_step();
      if (!skipped && loss_scaling_on()) unscale_gradients();
      if (skipped) {
        if constexpr (Model::num_buffers > 0)
          if (buffers_saved_)
            assign(Device{}, model_.buffers(), expr::ref(saved_buffers_.data(), Model::num_buffers));
        optimizer_.skip_step();
        if constexpr (has_loss_optimizer) loss_optimizer_->skip_step();
      } else {
        optimizer_.step();
        if constexpr (has_loss_optimizer) loss_optimizer_->step();
      }
      micro_step_ = 0;
    } catch (...) {
      optimizer_.abandon_step();  // reductions in flight: the job cannot continue consistently
      if constexpr (has_loss_optimizer) loss_optimizer_->abandon_step();
      if (flag_in_flight_) optimizer_.reducer().abort("the non-finite guard's reduction was abandoned by an exception");
      throw;
    }
    if (loss_scaling_on()) {
      const bool overflow = skipped && overflowed();
      update_loss_scale(skipped, overflow);
      if (overflow) {  // what loss scaling expects now and then: not a non-finite run
        ++skipped_steps_;
        return loss;
      }
    }
    if (skipped)
      count_skipped();
    else
      non_finite_in_a_row_ = 0;
    return loss;
  }

  // Forward, loss and backward without an update and without communication: adds to the model's
  // gradients (and a parametric loss's) dL/dparams of this batch's mean loss, divided by
  // `accumulate` (so that k calls sum to the mean over the k batches) and multiplied by
  // loss_scale() (1 unless loss scaling is on: divide by it before an update). For custom loops;
  // does not move the accumulation window.
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
    buffers_saved_ = false;  // a window resumed midway has no copy of its starting buffers
  }

  // Steps the non-finite guard has skipped so far (loss-scale overflows included), and how many of
  // the latest ones in a row (0 after an update, and after the error that a run of
  // max_non_finite_in_a_row ends with; overflows neither count nor end a run).
  std::int64_t skipped_steps() const noexcept { return skipped_steps_; }
  int non_finite_in_a_row() const noexcept { return non_finite_in_a_row_; }

  // Dynamic loss scaling: the scale the next step multiplies the loss's gradient by (1 when off),
  // and the updates in a row made at it (growth_interval of them grow it). Training checkpoints
  // keep both.
  float loss_scale() const noexcept { return loss_scale_; }
  int updates_at_loss_scale() const noexcept { return updates_at_scale_; }
  void restore_loss_scale(float scale, int updates_at_scale) {
    if (!loss_scaling_on())
      throw Error("etnn::Trainer: a loss scale (" + std::to_string(scale) +
                  ") for a trainer without loss scaling; turn TrainerOptions::loss_scaling on to resume it");
    if (!(scale > 0.0f) || !std::isfinite(scale))
      throw Error("etnn::Trainer: the loss scale must be finite and > 0, got " + std::to_string(scale));
    const int interval = options_.loss_scaling->growth_interval;
    if (updates_at_scale < 0 || updates_at_scale >= interval)
      throw Error("etnn::Trainer: " + std::to_string(updates_at_scale) + " updates at the loss scale, outside [0, " +
                  std::to_string(interval) + ") (growth_interval)");
    loss_scale_ = scale;
    updates_at_scale_ = updates_at_scale;
  }
  Model& model() noexcept { return model_; }
  Optim& optimizer() noexcept { return optimizer_; }
  // On CUDA, the recorded graphs of the step (cuda::GraphCache: how many, whether on, and why not).
  const detail::StepGraphs<Device>& step_graphs() const noexcept { return graphs_; }
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
    if (options.max_non_finite_in_a_row < 0)
      throw Error("etnn::Trainer: max_non_finite_in_a_row must be >= 0 (0: never throw), got " +
                  std::to_string(options.max_non_finite_in_a_row));
    if (!options.loss_scaling)
      options.loss_scaling = LossScaling{.enabled = loss_scaled_by_default<typename Model::scalar_type>};
    const LossScaling& scaling = *options.loss_scaling;
    if (scaling.enabled) {
      const auto bad = [](const char* what, double value) {
        throw Error(std::string("etnn::Trainer: loss scaling's ") + what + ", got " + std::to_string(value));
      };
      if (!(scaling.init_scale > 0.0f) || !std::isfinite(scaling.init_scale))
        bad("init_scale must be finite and > 0", scaling.init_scale);
      if (!(scaling.growth_factor > 1.0f) || !std::isfinite(scaling.growth_factor))
        bad("growth_factor must be finite and > 1", scaling.growth_factor);
      if (!(scaling.backoff_factor > 0.0f && scaling.backoff_factor < 1.0f))
        bad("backoff_factor must be in (0, 1)", scaling.backoff_factor);
      if (scaling.growth_interval < 1) bad("growth_interval must be >= 1", scaling.growth_interval);
      if (!options.skip_non_finite)
        throw Error("etnn::Trainer: loss scaling skips the steps whose gradients overflow, which needs the non-finite "
                    "guard: leave skip_non_finite on, or turn loss scaling off");
    }
    return options;
  }

  static float initial_loss_scale(const TrainerOptions& options) {
    return options.loss_scaling->enabled ? options.loss_scaling->init_scale : 1.0f;
  }
  bool loss_scaling_on() const noexcept { return options_.loss_scaling->enabled; }

  // A skipped step that scaling explains: the loss was finite on every rank and the scale, above
  // 1, made the gradients overflow.
  bool overflowed() const noexcept { return ranks_with_non_finite_loss_ == 0.0 && loss_scale_ > 1.0f; }

  // The reduced gradients (the model's and a parametric loss's) divided by the loss scale.
  void unscale_gradients() {
    const T inverse = T(1) / static_cast<T>(loss_scale_);
    assign(Device{}, model_.gradients(), expr::ref(model_.gradients(), Model::num_params) * inverse);
    if constexpr (has_loss_optimizer)
      assign(Device{}, loss_.gradients(), expr::ref(loss_.gradients(), Loss::num_params) * inverse);
  }

  // After each update window: an overflow backs the scale off (so it stays above
  // min(init_scale, backoff_factor)); an update counts toward growth; another skipped step changes
  // nothing.
  void update_loss_scale(bool skipped, bool overflow) {
    const LossScaling& scaling = *options_.loss_scaling;
    if (overflow) {
      loss_scale_ *= scaling.backoff_factor;
      updates_at_scale_ = 0;
    } else if (!skipped && ++updates_at_scale_ == scaling.growth_interval) {
      const float grown = loss_scale_ * scaling.growth_factor;
      if (std::isfinite(grown)) loss_scale_ = grown;
      updates_at_scale_ = 0;
    }
  }

  // The first micro-batch of an accumulation window: gradients zeroed; for the guard, the buffers
  // kept (the forward passes update running statistics) and the window's loss flag cleared.
  void start_window() {
    model_.zero_grad();
    if constexpr (loss_has_parameters) loss_.zero_grad();
    loss_non_finite_ = false;
    if constexpr (Model::num_buffers > 0) {
      if (options_.skip_non_finite) {
        assign(Device{}, saved_buffers_.data(), expr::ref(model_.buffers(), Model::num_buffers));
        buffers_saved_ = true;
      }
    }
  }

  // The guard's test, after backward: whether any rank's loss in this window was non-finite (a
  // count summed across ranks, its allreduce overlapping the gradients') or the gradients summed
  // across ranks hold a NaN or an infinity (the same sum on every rank: a NaN on one rank reaches
  // all, so this needs no extra collective). Every rank reaches the same verdict. Reduces the
  // gradients (Optimizer::reduce_gradients).
  bool non_finite_step() {
    auto& reducer = optimizer_.reducer();
    ranks_with_non_finite_loss_ = loss_non_finite_ ? 1.0 : 0.0;
    const bool distributed = reducer.size() > 1;
    if (distributed) {
      flag_pending_ = reducer.start_allreduce_sum(&ranks_with_non_finite_loss_, 1);
      flag_in_flight_ = true;
    }
    optimizer_.reduce_gradients();
    if constexpr (has_loss_optimizer) loss_optimizer_->reduce_gradients();
    if (distributed) {
      reducer.wait(flag_pending_);
      flag_in_flight_ = false;
    }
    bool gradients_finite =
        backend::last_non_finite(Device{}, model_.gradients(), Model::num_params) == Model::num_params;
    if constexpr (has_loss_optimizer)
      gradients_finite = gradients_finite &&
                         backend::last_non_finite(Device{}, loss_.gradients(), Loss::num_params) == Loss::num_params;
    if (gradients_finite && ranks_with_non_finite_loss_ == 0.0) return false;
    if (non_finite_in_a_row_ == 0) {  // the first of a run: what the error will report
      first_ranks_with_non_finite_loss_ = static_cast<int>(ranks_with_non_finite_loss_);
      first_non_finite_ = gradients_finite ? std::string() : first_non_finite_gradient();
    }
    return true;
  }

  // The parameter tensor whose gradient backward computed first among those holding a NaN or an
  // infinity: a parametric loss's (computed before the model's backward), else the model's layer
  // nearest the output with one (backward runs from the output; a NaN arising in a layer reaches
  // every layer before it), and within that layer its first such tensor.
  std::string first_non_finite_gradient() const {
    if constexpr (has_loss_optimizer) {
      std::string name = non_finite_tensor<Loss>(loss_.gradients());
      if (!name.empty()) return name.insert(0, "loss.");
    }
    return non_finite_tensor<Model>(model_.gradients());
  }

  template <class Params>
  static std::string non_finite_tensor(const T* gradients) {
    const std::size_t last = backend::last_non_finite(Device{}, gradients, Params::num_params);
    if (last == Params::num_params) return {};
    const auto ends = optim::parameter_ends<Params>();
    const auto layer_end = std::upper_bound(ends.begin(), ends.end(), last);
    const std::size_t begin = layer_end == ends.begin() ? 0 : *(layer_end - 1);
    const std::size_t first = backend::first_non_finite(Device{}, gradients, begin, last + 1);
    for (const auto& p : Params::named_parameters())
      if (first >= p.offset && first < p.offset + p.numel) return p.name;
    return "element " + std::to_string(first);
  }

  // A skipped step: counted; a run of max_non_finite_in_a_row of them ends in an error.
  void count_skipped() {
    ++skipped_steps_;
    ++non_finite_in_a_row_;
    if (options_.max_non_finite_in_a_row == 0 || non_finite_in_a_row_ < options_.max_non_finite_in_a_row) return;
    std::string message = "etnn::Trainer: ";
    message += std::to_string(non_finite_in_a_row_);
    message += " steps in a row with non-finite ";
    message += first_non_finite_.empty() ? "losses" : "gradients";
    message += " (each skipped: the parameters are those before the first); first non-finite: ";
    if (first_non_finite_.empty()) {
      message += "the loss (the gradients were finite)";
    } else {
      message += "'";
      message += first_non_finite_;
      message += "' (of the gradients backward computed, the first with a NaN or an infinity)";
    }
    if (first_ranks_with_non_finite_loss_ > 0) {
      const int ranks = optimizer_.reducer().size();
      message += "; the loss was non-finite on ";
      message += std::to_string(first_ranks_with_non_finite_loss_);
      message += " of ";
      message += std::to_string(ranks);
      message += ranks == 1 ? " rank" : " ranks";
    }
    message += ". Lower the learning rate, clip gradients (Optimizer::set_max_grad_norm), look for NaN or "
               "infinity in the data, or raise TrainerOptions::max_non_finite_in_a_row";
    non_finite_in_a_row_ = 0;
    throw NonFiniteError(message);
  }

  // Forward, loss (its gradient times loss_scale() / accumulate) and backward, calling layer_done as
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
    // Where the activations are does not depend on the pass, so a replayed graph needs only this.
    activations_ = program::locate(staged.data(), workspace_.data(), capacity_);
    graphs_.run(step_key(0, run.training, batch, staged.data()), [&] {
      program::forward_train(Device{}, run, staged.data(), workspace_.data(), capacity_, batch, activations_);
    });
    const TensorView<const T, output_shape, Device> output(activations_.back(), batch);
    T* output_grad = program::output_gradient(workspace_.data(), capacity_);
    // dL/doutput is scaled by the loss scale and 1/accumulate; a parametric loss adds its
    // parameters' gradients itself, scaled the same.
    const T gradient_scale = static_cast<T>(loss_scale_) / static_cast<T>(options_.accumulate);
    if constexpr (loss_has_parameters) loss_.set_gradient_scale(gradient_scale);
    const T loss = loss_value_and_grad(output, y, output_grad);
    if (gradient_scale != T(1)) {
      const std::size_t n = static_cast<std::size_t>(batch) * output_shape::size;
      assign(Device{}, output_grad, expr::ref(output_grad, n) * gradient_scale);
    }
    graphs_.run(step_key(1, run.training, batch, staged.data()), [&] {
      program::backward(Device{}, run, model_.gradients(), workspace_.data(), capacity_, batch, activations_,
                        layer_done);
    });
    return loss;
  }

  // Why the step is not recorded into CUDA graphs, or "" when it is. Graphs record what a pass
  // launches, not the host's part of it, with the arguments of the recording.
  static std::string graphs_off_reason(const TrainerOptions& options, Optim& optimizer) {
    if (!options.cuda_graphs) return "turned off";
    if (optimizer.reducer().size() > 1)  // it starts its allreduces from backward's callbacks
      return "a data-parallel step launches its allreduces from the host";
    if constexpr (program::draws_random) return "the network draws random numbers (dropout): each pass differs";
    return "";
  }

  // A graph of the step holds pointers and sizes: the input's address and the batch, besides the
  // trainer's and the model's own buffers, which stay put. The mode selects kernels (batch norm's
  // statistics), so eval-mode passes are parts of their own: 0 forward, 1 backward, 2 and 3 the
  // same in eval mode. Nothing else a recorded pass reads changes between steps: a network that
  // draws random numbers is not recorded, and in one process the bucket callbacks do nothing.
  static std::tuple<int, int, const void*> step_key(int part, bool training, int batch, const void* input) {
    return {training ? part : part + 2, batch, input};
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
  // The non-finite guard.
  bool loss_non_finite_ = false;             // a micro-batch of this window had a non-finite loss
  double ranks_with_non_finite_loss_ = 0.0;  // summed across ranks in place
  typename reducer_type::Pending flag_pending_{};
  bool flag_in_flight_ = false;
  Buffer<T, Device> saved_buffers_{Model::num_buffers};  // the model's buffers at the start of the window
  bool buffers_saved_ = false;
  std::int64_t skipped_steps_ = 0;
  int non_finite_in_a_row_ = 0;
  std::string first_non_finite_;  // in the run's first step: the tensor; empty when only the loss was
  int first_ranks_with_non_finite_loss_ = 0;
  float loss_scale_ = 1.0f;    // dynamic loss scaling; 1 when off
  int updates_at_scale_ = 0;  // updates in a row at loss_scale_
  Buffer<T, Device> workspace_;
  Buffer<T, Device> scratch_;  // the layers' scratch (im2col columns, per-channel sums)
  int capacity_ = 0;
  Buffer<T, Device> input_staging_;
  Buffer<T, Device> target_staging_;
  typename program::template Activations<T> activations_{};
  detail::StepGraphs<Device> graphs_;
};

}  // namespace etnn
