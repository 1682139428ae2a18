#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// train::detail::NonFiniteGuard<Model>: the Trainer's non-finite guard. A step whose loss or
// reduced gradient holds a NaN or an infinity is skipped: parameters, optimizer state and the
// model's buffers stay as they were at the start of the step; after max_non_finite_in_a_row such
// steps in a row it throws etnn::NonFiniteError naming the first parameter tensor backward gave a
// non-finite gradient.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../backend/non_finite.hpp"
#include "../core/error.hpp"
#include "../backend/executor.hpp"
#include "../expr/expression.hpp"
#include "../optim/parameter_set.hpp"
#include "../tensor/buffer.hpp"

namespace etnn::train::detail {

// The parameter tensor of Params whose gradient backward computed first among those holding a
// NaN or an infinity; "" when every gradient is finite. Backward runs from the output and a NaN
// arising in a layer reaches every layer before it: so the layer nearest the output with one, and
// within that layer its first such tensor.
template <optim::ParameterSet Params>
std::string non_finite_tensor(const typename Params::value_type* gradients) {
  using Device = typename Params::device;
  const std::size_t last = backend::last_non_finite(Device{}, gradients, Params::flat_size);
  if (last == Params::flat_size) return {};
  const auto ends = optim::parameter_ends<Params>();
  const auto layer_end = std::upper_bound(ends.begin(), ends.end(), last);
  const std::size_t begin = layer_end == ends.begin() ? 0 : *(layer_end - 1);
  const std::size_t first = backend::first_non_finite(Device{}, gradients, begin, last + 1);
  for (const auto& p : Params::named_parameters())
    if (first >= p.offset && first < p.offset + p.numel) return p.name;
  return "element " + std::to_string(first);
}

template <class Model>
class NonFiniteGuard {
  using T = typename Model::value_type;
  using Device = typename Model::device;

 public:
  // on: TrainerOptions::skip_non_finite; max_in_a_row: TrainerOptions::max_non_finite_in_a_row.
  NonFiniteGuard(bool on, int max_in_a_row) : on_(on), max_in_a_row_(max_in_a_row) {
    if (max_in_a_row < 0)
      throw Error("etnn::Trainer: max_non_finite_in_a_row must be >= 0 (0: never throw), got " +
                  std::to_string(max_in_a_row));
  }

  bool on() const noexcept { return on_; }
  // Steps skipped so far (loss-scale overflows included), and how many of the latest ones in a row
  // (0 after an update, and after the error that a run of max_in_a_row ends with).
  std::int64_t skipped_steps() const noexcept { return skipped_steps_; }
  int non_finite_in_a_row() const noexcept { return non_finite_in_a_row_; }

  // The first micro-batch of an accumulation window: the model's buffers kept (the forward passes
  // update running statistics) and the window's loss flag cleared.
  void start_window(const Model& model) {
    loss_non_finite_ = false;
    if constexpr (Model::num_buffers > 0) {
      if (on_) {
        assign(Device{}, saved_buffers_.data(), expr::ref(model.buffers(), Model::num_buffers));
        buffers_saved_ = true;
      }
    }
  }
  // A window resumed midway (a training checkpoint's) has no copy of its starting buffers.
  void resume_window() noexcept { buffers_saved_ = false; }
  // Each micro-batch's mean loss.
  void check_loss(T loss) noexcept { loss_non_finite_ |= !std::isfinite(loss); }

  // The guard's test, after backward: whether any rank's loss in this window was non-finite (a
  // count summed across ranks, its allreduce overlapping the gradients' reductions) or the
  // gradients summed across ranks hold a NaN or an infinity (Optimizer::gradients_finite; a
  // parametric loss's are read only while the model's are finite). Every rank reaches the same
  // verdict. last_loss is the window's last micro-batch loss (a T, or a loss on its way from the
  // device that converts to T when read): on a single process it is read after the gradients'
  // test, whose read of the device's results brings it along (no wait of its own); across ranks
  // before, for its flag. Reduces the gradients of the model's optimizer and of a parametric
  // loss's. Off, it skips nothing and reads nothing.
  template <class LastLoss, class ModelOptimizer, class... LossOptimizer>
  bool skips(const LastLoss& last_loss, ModelOptimizer& optimizer, LossOptimizer&... loss_optimizer) {
    if (!on_) return false;
    ranks_ = optimizer.reducer().size();
    if (ranks_ > 1) check_loss(static_cast<T>(last_loss));
    ranks_with_non_finite_loss_ = loss_non_finite_ ? 1.0 : 0.0;
    optimizer.start_loss_flag(&ranks_with_non_finite_loss_);
    optimizer.reduce_gradients();
    (loss_optimizer.reduce_gradients(), ...);
    optimizer.finish_loss_flag();
    bool gradients_finite = optimizer.gradients_finite();
    ((gradients_finite = gradients_finite && loss_optimizer.gradients_finite()), ...);
    if (ranks_ == 1) {
      check_loss(static_cast<T>(last_loss));
      ranks_with_non_finite_loss_ = loss_non_finite_ ? 1.0 : 0.0;
    }
    if (gradients_finite && loss_finite_on_every_rank()) return false;
    if (non_finite_in_a_row_ == 0) {  // the first of a run: what the error will report
      first_ranks_with_non_finite_loss_ = static_cast<int>(ranks_with_non_finite_loss_);
      first_non_finite_ =
          gradients_finite ? std::string() : first_non_finite_gradient(optimizer.model(), loss_optimizer.model()...);
    }
    return true;
  }
  // In the window skips() tested.
  bool loss_finite_on_every_rank() const noexcept { return ranks_with_non_finite_loss_ == 0.0; }

  // A skipped step: the model's buffers back to the start of the window.
  void restore_buffers(Model& model) {
    if constexpr (Model::num_buffers > 0)
      if (buffers_saved_) assign(Device{}, model.buffers(), expr::ref(saved_buffers_.data(), Model::num_buffers));
  }

  // After each update window: an update ends a run of skipped steps; a skipped step is counted, and
  // a run of max_in_a_row of them ends in an error. An overflow (a skipped step that loss scaling
  // explains) is what loss scaling expects now and then: counted, it neither joins nor ends a run.
  void end_window(bool skipped, bool overflow) {
    if (overflow)
      ++skipped_steps_;
    else if (skipped)
      count_skipped();
    else
      non_finite_in_a_row_ = 0;
  }

 private:
  // The parameter tensor whose gradient backward computed first among those holding a NaN or an
  // infinity: a parametric loss's (computed before the model's backward), else the model's.
  template <class... Loss>
  static std::string first_non_finite_gradient(const Model& model, const Loss&... loss) {
    std::string name;
    ((name = non_finite_tensor<Loss>(loss.gradients())), ...);
    if (!name.empty()) return name.insert(0, "loss.");
    return non_finite_tensor<Model>(model.gradients());
  }

  // A skipped step: counted; a run of max_in_a_row of them ends in an error.
  void count_skipped() {
    ++skipped_steps_;
    ++non_finite_in_a_row_;
    if (max_in_a_row_ == 0 || non_finite_in_a_row_ < max_in_a_row_) return;
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
      message += "; the loss was non-finite on ";
      message += std::to_string(first_ranks_with_non_finite_loss_);
      message += " of ";
      message += std::to_string(ranks_);
      message += ranks_ == 1 ? " rank" : " ranks";
    }
    message += ". Lower the learning rate, clip gradients (Optimizer::set_max_grad_norm), look for NaN or "
               "infinity in the data, or raise TrainerOptions::max_non_finite_in_a_row";
    non_finite_in_a_row_ = 0;
    throw NonFiniteError(message);
  }

  bool on_;
  int max_in_a_row_;
  bool loss_non_finite_ = false;             // a micro-batch of this window had a non-finite loss
  double ranks_with_non_finite_loss_ = 0.0;  // summed across ranks in place
  int ranks_ = 1;                            // in the job
  Buffer<T, Device> saved_buffers_{Model::num_buffers};  // the model's buffers at the start of the window
  bool buffers_saved_ = false;
  std::int64_t skipped_steps_ = 0;
  int non_finite_in_a_row_ = 0;
  std::string first_non_finite_;  // in the run's first step: the tensor; empty when only the loss was
  int first_ranks_with_non_finite_loss_ = 0;
};

}  // namespace etnn::train::detail
