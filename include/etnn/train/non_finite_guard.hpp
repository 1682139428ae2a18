#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// train::detail::NonFiniteGuard<Model>: the Trainer's non-finite guard. A step whose loss or
// reduced gradient holds a NaN or an infinity is skipped: parameters, optimizer state and the
// model's buffers stay as they were at the start of the step; after max_non_finite_in_a_row such
// steps in a row it throws etnn::NonFiniteError naming the first parameter tensor backward gave a
// non-finite gradient. The host decides (skips()), or, on a CUDA device, the device does
// (mark_loss, restore_buffers_if_skipped, with Optimizer::begin_verdict and step_unless_skipped)
// and the host counts the verdicts as they arrive, some steps later (settle()). There, a loss
// that leaves its input check on the device (BCE's probabilities: cuda/input_check.hpp) marks a
// bad input into the verdict: that step and those enqueued before the host reads it skip, none of
// them counted, and the guard owes the loss's own etnn::Error, which the Trainer throws.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "../backend/non_finite.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../backend/executor.hpp"
#include "../expr/expression.hpp"
#include "../optim/parameter_set.hpp"
#include "../tensor/buffer.hpp"

namespace etnn::train {

// What a training checkpoint keeps of the guard (io::save_state), so that a resumed run skips,
// counts and throws as the uninterrupted run would: the counts, the run in progress's first
// non-finite tensor and how many ranks had a non-finite loss in its first step (the error's
// message), whether an earlier micro-batch of the accumulation window in progress had a
// non-finite loss (which skips that window's update), and, on a CUDA device, the error a run
// that ended in the last verdict owes the next step, or a loss's input error a verdict marked
// (the message; empty for none; a resumed run throws either as an etnn::NonFiniteError).
struct GuardState {
  std::int64_t skipped_steps = 0;
  int non_finite_in_a_row = 0;
  std::string first_non_finite;
  int first_ranks_with_non_finite_loss = 0;
  bool window_loss_non_finite = false;
  std::string owed_error;
  // The window in progress keeps the model's buffers (batch norm's running statistics) as they
  // were at its start, in Trainer::window_start_buffers(), to put back if its update is skipped
  // (what guard_state says; restoring a state leaves it to Trainer::use_window_start_buffers).
  bool window_start_buffers = false;

  // Throws unless a run in a job of `ranks` ranks can reach this state.
  void check(int ranks) const {
    if (skipped_steps < 0 || non_finite_in_a_row < 0 || first_ranks_with_non_finite_loss < 0 ||
        first_ranks_with_non_finite_loss > ranks || skipped_steps < non_finite_in_a_row)
      throw Error("etnn::Trainer: a non-finite guard state of " + std::to_string(skipped_steps) + " skipped steps, " +
                  std::to_string(non_finite_in_a_row) + " of them the latest in a row, and " +
                  std::to_string(first_ranks_with_non_finite_loss) + " of " + std::to_string(ranks) +
                  " ranks with a non-finite loss is not a state a run reaches");
  }
};

}  // namespace etnn::train

namespace etnn::train::detail {

// How much of the verdicts on their way NonFiniteGuard::settle counts.
enum class Settle {
  arrived,      // those on the host, without a wait
  before_step,  // those on the host, and, waiting, whatever a step must count before it starts
  all,          // every one, waiting
};

// The name of the tensor of Params holding flat index i ("element i" between tensors).
template <optim::ParameterSet Params>
std::string tensor_at(std::size_t i) {
  for (const auto& p : Params::named_parameters())
    if (i >= p.offset && i < p.offset + p.numel) return p.name;
  return "element " + std::to_string(i);
}

// Where the layer (optim::parameter_ends) holding flat index i begins.
template <optim::ParameterSet Params>
std::size_t layer_begin(std::size_t i) {
  const auto ends = optim::parameter_ends<Params>();
  const auto layer_end = std::upper_bound(ends.begin(), ends.end(), i);
  return layer_end == ends.begin() ? 0 : *(layer_end - 1);
}

// The parameter tensor of Params whose gradient backward computed first among those holding a
// NaN or an infinity; "" when every gradient is finite. Backward runs from the output and a NaN
// arising in a layer reaches every layer before it: so the layer nearest the output with one, and
// within that layer its first such tensor.
template <optim::ParameterSet Params>
std::string non_finite_tensor(const typename Params::value_type* gradients) {
  using Device = typename Params::device;
  const std::size_t last = backend::last_non_finite(Device{}, gradients, Params::flat_size);
  if (last == Params::flat_size) return {};
  return tensor_at<Params>(backend::first_non_finite(Device{}, gradients, layer_begin<Params>(last), last + 1));
}

// The same answer from a verdict decided on the device (cuda::StepVerdict), which kept for each
// tensor in flat order the first non-finite index from its offset to the next tensor's (the zeros
// after a layer's last tensor are that layer's, so each range lies in one layer): the last tensor
// with one lies in the layer of the last non-finite gradient, and the least index kept from that
// layer's beginning is the layer's first.
template <optim::ParameterSet Params, class Verdict>
std::string non_finite_tensor_of(const Verdict& verdict) {
  std::optional<std::size_t> in_last;
  for (std::size_t p = 0; p < verdict.tensors(); ++p)
    if (const auto i = verdict.first_non_finite(p)) in_last = i;
  if (!in_last) return {};
  const std::size_t begin = layer_begin<Params>(*in_last);
  std::size_t first = *in_last;
  for (std::size_t p = 0; p < verdict.tensors(); ++p)
    if (const auto i = verdict.first_non_finite(p); i && *i >= begin) first = std::min(first, *i);
  return tensor_at<Params>(first);
}

// The model's buffers back to the start of the window on the device, when the verdict the device
// decided (*skip) skips the step.
template <class T>
struct RestoreIfSkipped {
  const unsigned long long* skip;
  T* buffers;
  const T* saved;
  ETNN_HD void operator()(std::size_t i) const {
    if (*skip != 0) buffers[i] = saved[i];
  }
};

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
    // The alignment gaps between buffers are zero, as the model's: a checkpoint loads the named
    // buffers alone into the copy (window_start_buffers), and a skipped update puts all of it back.
    if constexpr (Model::num_buffers > 0) fill(Device{}, saved_buffers_.data(), Model::num_buffers, T(0));
    if constexpr (backend::verdict_on_device<Device>)
      if (on_) fill(Device{}, input_error_owed_.data(), 1, 0ull);
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
  // A window resumed midway (a training checkpoint's) has no copy of its starting buffers, unless
  // the checkpoint wrote them into window_start_buffers() (use_window_start_buffers then says so).
  void resume_window() noexcept { buffers_saved_ = false; }
  // The model's buffers at the start of the window (Model::num_buffers values on its device).
  T* window_start_buffers() noexcept { return saved_buffers_.data(); }
  void use_window_start_buffers() noexcept { buffers_saved_ = Model::num_buffers > 0 && on_; }
  // The guard's part of a training checkpoint (the verdicts on their way counted first, by the
  // caller). window_loss_non_finite is the host's flag: a window whose losses the device marks has
  // it in the device's verdict. An owed input error is kept as the owed error's message (a loaded
  // state throws it as a NonFiniteError, which is an etnn::Error).
  train::GuardState state() const {
    return {skipped_steps_, non_finite_in_a_row_, first_non_finite_, first_ranks_with_non_finite_loss_,
            loss_non_finite_, owed_error_.empty() ? owed_input_error_ : owed_error_, buffers_saved_};
  }
  // A training state loaded, in a job of `ranks` ranks (as the checkpoint's): it replaces the
  // run, its owed error included (the verdicts on their way were counted before, by
  // settle_quietly).
  // A state no run reaches (GuardState::check) changes nothing.
  void restore(const train::GuardState& state, int ranks) {
    state.check(ranks);
    skipped_steps_ = state.skipped_steps;
    non_finite_in_a_row_ = state.non_finite_in_a_row;
    first_non_finite_ = state.first_non_finite;
    first_ranks_with_non_finite_loss_ = state.first_ranks_with_non_finite_loss;
    ranks_ = ranks;
    loss_non_finite_ = state.window_loss_non_finite;
    owed_error_ = state.owed_error;
    owed_input_error_.clear();
    if constexpr (backend::verdict_on_device<Device>)
      if (on_) fill(Device{}, input_error_owed_.data(), 1, 0ull);  // the steps from here apply
  }
  // Each micro-batch's mean loss.
  void check_loss(T loss) noexcept { loss_non_finite_ |= !std::isfinite(loss); }
  // Micro-batches' losses the device tested (Optimizer::read_verdict_now).
  void check_loss_flag(bool non_finite) noexcept { loss_non_finite_ |= non_finite; }

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

  // A step decided on the device (the Trainer's path on a CUDA device, Optimizer::begin_verdict):
  // the loss's values marked into the verdict once backward has returned (before later launches
  // reuse their memory), and, once the optimizer has marked the gradients and sent the verdict
  // (verdict_sent, told Optimizer::verdicts_sent()), the model's buffers put back predicated on it.
  // settle() counts the verdict when the host has it.
  // input_check: what the loss left on the device (cuda::DeferInputChecks::check()).
  template <class Verdict, class Loss, class InputCheck>
  void mark_loss(Verdict& verdict, const Loss& loss, const InputCheck& input_check) {
    verdict.scan_loss(loss, input_check, input_error_owed_.data());
  }
  // A window's verdict the host read before the window's end (Optimizer::read_verdict_now): whether
  // its micro-batches' losses were non-finite; an input error marked in it is owed
  // (throw_owed_input_error).
  template <class Verdict>
  bool window_loss_non_finite(const Verdict& verdict) {
    take_input_error(verdict);
    return verdict.loss_non_finite();
  }
  template <class Verdict>
  void restore_buffers_if_skipped(const Verdict& verdict, Model& model) {
    if constexpr (Model::num_buffers > 0)
      if (buffers_saved_)
        for_each_index(Device{}, Model::num_buffers,
                       RestoreIfSkipped<T>{verdict.skip(), model.buffers(), saved_buffers_.data()});
  }
  void verdict_sent(std::uint64_t verdicts_sent) noexcept {
    if (next_verdict_ == verdicts_end_) next_verdict_ = verdicts_sent - 1;
    verdicts_end_ = verdicts_sent;
  }

  // Counts the steps whose verdicts the device decided, oldest first, as end_window() counts a
  // step, once the host has them (Optimizer::sent_verdict; `how` says which). A run of
  // max_in_a_row skipped steps ends in the error here, as does an error settle_quietly() found.
  // The Trainer settles before_step at the start of each step: whatever could end a run (a wait
  // once max_in_a_row - non_finite_in_a_row verdicts are on their way, for the oldest) and
  // whatever holds the slot the step's verdict takes; so the error leaves the step's batch
  // untouched, and a settle after enqueuing the step's forward and backward (arrived) never
  // throws.
  // An input error a verdict marked is owed (throw_owed_input_error): the Trainer throws it before
  // the step's forward, or mid-step before any update, ending the window in progress.
  template <class Optimizer>
  void settle(Optimizer& optimizer, Settle how) {
    if (!owed_error_.empty()) throw NonFiniteError(std::exchange(owed_error_, std::string()));
    count_arrived(optimizer, how);
  }
  // settle(all) for a reader of the counts (on the stepping thread: it counts): the error that ends
  // a run, or an input error, waits for the next step.
  template <class Optimizer>
  void settle_quietly(Optimizer& optimizer) {
    try {
      if (!owed_error_.empty()) return;
      count_arrived(optimizer, Settle::all);
    } catch (const NonFiniteError& e) {
      owed_error_ = e.what();
    }
  }
  // Whether an input error found in a verdict is owed (the loss's etnn::Error), and throws it.
  bool owes_input_error() const noexcept { return !owed_input_error_.empty(); }
  void throw_owed_input_error() {
    if (!owed_input_error_.empty()) throw Error(std::exchange(owed_input_error_, std::string()));
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

  // Whether `on_their_way` more verdicts could complete a run of max_in_a_row skipped steps.
  bool could_end_run(std::uint64_t on_their_way) const noexcept {
    return max_in_a_row_ > 0 && static_cast<std::uint64_t>(non_finite_in_a_row_) + on_their_way >=
                                    static_cast<std::uint64_t>(max_in_a_row_);
  }

  // settle()'s counting, which throws only the error that ends a run (an input error found is owed).
  template <class Optimizer>
  void count_arrived(Optimizer& optimizer, Settle how) {
    if constexpr (backend::verdict_on_device<Device>) {
      for (; next_verdict_ < verdicts_end_;) {
        const std::uint64_t on_their_way = verdicts_end_ - next_verdict_;
        const bool needed = how == Settle::all || (how == Settle::before_step && (could_end_run(on_their_way) ||
                                                                                   on_their_way >= Optimizer::verdict_slots));
        const auto* verdict = optimizer.sent_verdict(next_verdict_, needed);
        if (verdict == nullptr) return;
        ++next_verdict_;
        count<typename Optimizer::model_type>(*verdict);
      }
    }
  }

  // An input error marked in a verdict becomes the owed one (the first, if several), and the device
  // stops skipping steps for it: the steps enqueued after this read are the next error's to skip.
  template <class Verdict>
  bool take_input_error(const Verdict& verdict) {
    std::string error = verdict.input_error();
    if (error.empty()) return false;
    if (owed_input_error_.empty()) owed_input_error_ = std::move(error);
    fill(Device{}, input_error_owed_.data(), 1, 0ull);
    return true;
  }

  // A verdict the device decided, on the host. A step that marked an input error, or skipped after
  // one, counts as not taken: its batch is lost with the error, as the host's check loses it.
  template <class Params, class Verdict>
  void count(const Verdict& verdict) {
    if (take_input_error(verdict) || verdict.skipped_after_input_error()) return;
    if (!verdict.skipped()) {
      non_finite_in_a_row_ = 0;
      return;
    }
    if (non_finite_in_a_row_ == 0) {
      ranks_ = 1;
      first_ranks_with_non_finite_loss_ = verdict.loss_non_finite() ? 1 : 0;
      first_non_finite_ = non_finite_tensor_of<Params>(verdict);
    }
    count_skipped();
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
  // The Trainer's verdicts decided on the device, by the optimizer's numbers: [next_verdict_,
  // verdicts_end_) are not counted yet.
  std::uint64_t next_verdict_ = 0;
  std::uint64_t verdicts_end_ = 0;
  std::string owed_error_;  // the message of the NonFiniteError settle_quietly() found
  std::string owed_input_error_;  // a loss's message for an input a verdict marked (take_input_error)
  // On the device: 1 from a step that marks an input error until the host has read it, which the
  // steps enqueued meanwhile skip for (cuda::StepVerdict).
  Buffer<unsigned long long, Device> input_error_owed_{backend::verdict_on_device<Device> ? 1u : 0u};
  int first_ranks_with_non_finite_loss_ = 0;
};

}  // namespace etnn::train::detail
