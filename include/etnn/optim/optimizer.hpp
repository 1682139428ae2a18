#pragma once
// Optimizer<Rule, Model, Reducer>: one update rule applied to the model's flat parameter buffer
// in one fused pass, after the Reducer has summed the flat gradient buffer across ranks (in
// buckets started during backward); the update divides by the number of ranks, so every rank
// applies the mean gradient.
//
// A Rule provides
//   Options                                   hyper-parameters (designated-initialisable)
//   validate(options)                         throws etnn::Error on a bad value
//   state_slots(options)                      per-parameter state arrays it needs (momentum, ...)
//   state_names(options)                      their names, as PyTorch's optimizer state_dict calls them
//   update<T>(options, params, grads, state, n, step, grad_scale)
//                                             -> an ETNN_HD functor f(i) updating index i with
//                                                the gradient grad_scale * grads[i]
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/error.hpp"
#include "../core/reducer.hpp"
#include "../core/static_checks.hpp"
#include "../cpu/executor.hpp"
#include "../tensor/buffer.hpp"
#include "gradient_buckets.hpp"
#include "rank_agreement.hpp"

namespace etnn::optim {

template <class Rule, class Model, class R = dist::Local>
class Optimizer {
  static_assert(check::reducer<R>());

 public:
  using rule = Rule;
  using Options = typename Rule::Options;
  using model_type = Model;
  using reducer_type = R;
  using T = typename Model::value_type;
  using Device = typename Model::device;

  // A single-process optimizer.
  Optimizer(Model& model, const Options& options)
    requires std::same_as<R, dist::Local>
      : Optimizer(model, options, local_) {}

  // A data-parallel optimizer: parameters (and buffers) are broadcast from rank 0 now, so every rank starts
  // from the same values whatever its seed; gradients are averaged across ranks at every step.
  Optimizer(Model& model, const Options& options, R& reducer, BucketOptions buckets = {})
      : model_(&model), reducer_(&reducer), options_(options),
        buckets_(reducer, model.gradients(), Model::program::param_ends, buckets) {
    Rule::validate(options_);
    detail::require_same_model(reducer, Model::num_params,
                               Model::network::describe() + " in " + (sizeof(T) == 4 ? "float" : "double"));
    const std::size_t slots = Rule::state_slots(options_);
    state_ = Buffer<T, Device>(slots * Model::num_params);
    fill(Device{}, state_.data(), state_.size(), T(0));
    reducer_->broadcast(model_->parameters(), Model::num_params, 0);
    if constexpr (Model::num_buffers > 0) reducer_->broadcast(model_->buffers(), Model::num_buffers, 0);
  }

  // Called by the Trainer as backward finishes layers: the gradients at offsets >= first_final
  // are complete, and their buckets' allreduces can start.
  void gradients_ready_from(std::size_t first_final) { buckets_.ready_from(first_final); }

  // After an exception between gradients_ready_from() and step(): ends the job if reductions are
  // in flight (see GradientBuckets::abandon); a single process just forgets them.
  void abandon_step() noexcept { buckets_.abandon(); }

  // Gradient buckets (each one allreduce per step).
  std::size_t bucket_count() const noexcept { return buckets_.count(); }

  // Sums the gradients across ranks (waiting for the buckets backward started), then updates every
  // parameter with the mean gradient.
  void step() {
    buckets_.reduce_all();
    ++steps_;
    const T grad_scale = T(1) / static_cast<T>(reducer_->size());
    for_each_index(Device{}, Model::num_params,
                   Rule::template update<T>(options_, model_->parameters(), model_->gradients(),
                                            state_.data(), Model::num_params, steps_, grad_scale));
  }

  void zero_grad() { model_->zero_grad(); }

  Model& model() noexcept { return *model_; }
  R& reducer() noexcept { return *reducer_; }
  const Options& options() const noexcept { return options_; }
  // Changes hyper-parameters between steps (learning-rate schedules). The per-parameter state
  // a rule keeps cannot appear or vanish mid-training (e.g. SGD momentum from 0 to 0.9).
  void set_options(const Options& options) {
    Rule::validate(options);
    if (Rule::state_slots(options) != Rule::state_slots(options_))
      throw Error("etnn::optim::Optimizer::set_options: the new options need " +
                  std::to_string(Rule::state_slots(options)) + " state buffers per parameter, the optimizer was built with " +
                  std::to_string(Rule::state_slots(options_)) + "; build a new optimizer instead");
    options_ = options;
  }
  // Updates done so far (a learning-rate schedule's position).
  std::int64_t steps() const noexcept { return steps_; }

  // The per-parameter state (Rule::state_names(options)[k] for parameter i at k * num_params + i),
  // and the step count: what a training checkpoint keeps (etnn::io::save_state).
  T* state() noexcept { return state_.data(); }
  const T* state() const noexcept { return state_.data(); }
  std::size_t state_size() const noexcept { return state_.size(); }
  void restore_steps(std::int64_t steps) noexcept { steps_ = steps; }

 private:
  static inline dist::Local local_{};

  Model* model_;
  R* reducer_;
  Options options_;
  GradientBuckets<R, T> buckets_;
  Buffer<T, Device> state_;
  std::int64_t steps_ = 0;
};

}  // namespace etnn::optim
