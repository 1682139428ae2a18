#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Optimizer<Rule, Params, Reducer>: one update rule applied to the flat parameter buffer of a
// ParameterSet (parameter_set.hpp: a model, or a loss with parameters) in one fused pass, after
// the Reducer has summed the flat gradient buffer across ranks (in buckets started during
// backward); the update divides by the number of ranks, so every rank applies the mean gradient.
// The learning rate of each step comes from a schedule (schedule.hpp, constant by default), and
// the mean gradient may be clipped by its global norm (grad_norm.hpp). Before the update it can
// test the reduced gradients for NaN and infinity (gradients_finite, the non-finite guard's test),
// summing the guard's loss flag across ranks meanwhile (start_loss_flag, finish_loss_flag). On a
// CUDA device that test can instead be decided on the device, with the update predicated on it
// (begin_verdict, step_unless_skipped), so that the host does not wait for it: the verdicts of up
// to verdict_slots steps may be on their way to the host at once, and the device picks each
// update's step number from the skips of those before it (picked_update.hpp).
//
// A Rule provides
//   Options                                   hyper-parameters (designated-initialisable)
//   validate(options)                         throws etnn::Error on a bad value
//   state_slots(options)                      per-parameter state arrays it needs (momentum, ...)
//   state_names(options)                      their names, as PyTorch's optimizer state_dict calls them
//   update<T>(options, lr, params, grads, state, n, step, grad_scale, run)
//                                             calls run(f) with an ETNN_HD functor f(i) updating
//                                                index i with the gradient grad_scale * grads[i] and
//                                                the learning rate lr (options.lr as the schedule
//                                                sets it for `step`, counted from 1); options that
//                                                change the formula (momentum, amsgrad) pick f's
//                                                type, so that its loop has no branch; update
//                                                changes nothing itself (a step decided on the
//                                                device calls it once per candidate), and f is a
//                                                trivially copyable struct without const or
//                                                reference members (candidates are assigned into
//                                                one kernel argument: picked_update.hpp)
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/non_finite.hpp"
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../dist/reducer.hpp"
#include "../dist/checks.hpp"
#include "../backend/executor.hpp"
#include "../backend/sum_of_squares.hpp"
#include "../tensor/buffer.hpp"
#include "grad_norm.hpp"
#include "gradient_buckets.hpp"
#include "gradient_storage.hpp"
#include "parameter_set.hpp"
#include "picked_update.hpp"
#include "rank_agreement.hpp"
#include "schedule.hpp"

namespace etnn::optim {

template <class Rule, ParameterSet Params, class R = dist::Local>
class Optimizer {
  static_assert(dist::check::reducer<R>());

 public:
  using rule = Rule;
  using Options = typename Rule::Options;
  using model_type = Params;  // the parameter set it updates (a Model, or a loss with parameters)
  using reducer_type = R;
  using T = typename Params::value_type;
  using Device = typename Params::device;
  static_assert(dist::check::reducer_device<dist::reducer_takes<R, Device>>());
  // The verdicts decided on the device that may be on their way to the host at once: a step
  // waits for one only when every slot holds a verdict not yet counted.
  static constexpr std::size_t verdict_slots = 4;

  // A single-process optimizer.
  Optimizer(Params& model, const Options& options)
    requires std::same_as<R, dist::Local>
      : Optimizer(model, options, local_) {}

  // A data-parallel optimizer: parameters (and buffers) are broadcast from rank 0 now, so every rank starts
  // from the same values whatever its seed; gradients are averaged across ranks at every step.
  Optimizer(Params& model, const Options& options, R& reducer, BucketOptions buckets = {})
      : model_(&model), reducer_(&reducer), options_(options),
        buckets_(reducer, parameter_ends<Params>(), bucket_cuts(), buckets) {
    Rule::validate(options_);
    detail::require_same_model(reducer, Params::num_params,
                               describe<Params>() + " in " + (sizeof(T) == 4 ? "float" : "double"));
    if (buckets.gradient_as_bucket_view) gradient_storage_.keep_in(reducer, model);
    const std::size_t slots = Rule::state_slots(options_);
    state_ = Buffer<T, Device>(slots * Params::flat_size);
    fill(Device{}, state_.data(), state_.size(), T(0));
    reducer_->broadcast(model_->parameters(), Params::flat_size, 0);
    if constexpr (num_buffers<Params>() > 0) reducer_->broadcast(model_->buffers(), num_buffers<Params>(), 0);
  }

  // Called by the Trainer as backward finishes layers: the gradients at offsets >= first_final
  // are complete, and their buckets' allreduces can start.
  void gradients_ready_from(std::size_t first_final) { buckets_.ready_from(model_->gradients(), first_final); }
  // Whether backward should also call gradients_ready_from inside layers, as the row blocks of
  // their weight gradients complete (a bucket ends there: GradientBuckets).
  bool wants_row_blocks() const noexcept { return buckets_.wants_row_blocks(); }

  // After an exception between gradients_ready_from() and step(): ends the job if reductions have
  // started (see GradientBuckets::abandon), or the loss flag's (start_loss_flag); a single process
  // just forgets them.
  void abandon_step() noexcept {
    buckets_.abandon();
    if (flag_in_flight_) reducer_->abort("the non-finite guard's reduction was abandoned by an exception");
    flag_in_flight_ = false;
    reduced_ = false;
  }

  // Sums the gradients across ranks, waiting for the buckets backward started. step() and
  // skip_step() do it unless it was done for this step; calling it first lets the caller read the
  // reduced gradients (the sum over ranks, the same on every rank) and choose between them, as the
  // non-finite guard does (gradients_finite). Every rank must then make the same choice.
  void reduce_gradients() {
    if (reduced_) return;
    buckets_.reduce_all(model_->gradients());
    reduced_ = true;
  }

  // The non-finite guard's collective (train/non_finite_guard.hpp): `loss_flag`, one value per rank
  // (the count of ranks whose loss was non-finite), is summed across ranks in place, its allreduce
  // started before the gradients' reduction so that the two overlap, and waited for after it. A
  // single process sums nothing.
  void start_loss_flag(double* loss_flag) {
    if (reducer_->size() == 1) return;
    flag_pending_ = reducer_->start_allreduce_sum(loss_flag, 1);
    flag_in_flight_ = true;
  }
  void finish_loss_flag() {
    if (!flag_in_flight_) return;
    reducer_->wait(flag_pending_);
    flag_in_flight_ = false;
  }

  // After reduce_gradients(): whether the gradients' sum holds no NaN and no infinity: the
  // reducer's verdict where it checked every sum as it wrote it (dist::Mpi's sums in place), else
  // one read of the sum. The sum is the same on every rank (a NaN on one rank reaches all), so
  // every rank reaches the same verdict without another collective.
  bool gradients_finite() const {
    if (const int checked = buckets_.sums_finite(); checked >= 0) return checked == 1;
    return backend::last_non_finite(Device{}, model_->gradients(), Params::flat_size) == Params::flat_size;
  }

  // Ends the step without an update, as torch.cuda.amp.GradScaler skips optimizer.step() on an
  // inf/NaN gradient: the gradients are reduced (every rank takes part in the same collectives),
  // and the parameters, the optimizer's state and its step count (the schedule's position) are left
  // as they were. Buffers are broadcast from rank 0, as after an update.
  void skip_step() {
    count_verdicts(0);
    reduce_gradients();
    reduced_ = false;
    if constexpr (num_buffers<Params>() > 0)
      if (reducer_->size() > 1) reducer_->broadcast(model_->buffers(), num_buffers<Params>(), 0);
  }

  // A step whose skip the device decides, so that the host does not wait for the verdict (a CUDA
  // device, one process, no clipping: the non-finite guard's path, train/non_finite_guard.hpp):
  //   ...                                   // forward, loss, backward
  //   auto& verdict = opt.begin_verdict();  // zeroed; the caller marks the loss into it
  //   ...                                   // more micro-batches, whose losses the caller marks
  //                                         // into opt.verdict()
  //   opt.step_unless_skipped();            // the gradients marked into it, the update predicated
  //                                         // on it, and it is sent to the host without a wait;
  //                                         // the caller may predicate more on verdict.skip()
  // A caller that marked losses and then decides on the host reads them by read_verdict_now().
  // Verdicts are numbered in the order sent, from 0 (verdicts_sent()); the host counts each into
  // steps() once it has arrived, without waiting for it, and the update's learning rate and step
  // number count the steps that verdicts still on their way let through on the device (picked
  // among candidates: picked_update.hpp). A step waits only when all verdict_slots slots hold
  // verdicts not yet arrived, for the oldest; steps(), learning_rate(), step() and skip_step()
  // wait for every verdict on its way.
  backend::StepVerdict<Device>& begin_verdict()
    requires backend::verdict_on_device<Device>
  {
    check_verdict_on_device("begin_verdict", false);
    count_verdicts(verdict_slots - 1);  // the slot this verdict takes holds one counted
    for (auto& verdict : verdicts_) verdict.reserve();  // every slot's memory in the first step
    verdict().begin();
    verdict_begun_ = true;
    return verdict();
  }
  const backend::StepVerdict<Device>& step_unless_skipped()
    requires backend::verdict_on_device<Device>
  {
    check_verdict_on_device("step_unless_skipped", true);
    count_verdicts(verdict_slots);  // those arrived: fewer candidates
    reduce_gradients();
    reduced_ = false;
    auto& verdict = this->verdict();
    verdict.scan_gradients(model_->gradients(), Params::flat_size);
    last_grad_norm_ = std::numeric_limits<double>::quiet_NaN();
    // Candidate j: the update had j of the steps whose verdicts are on their way applied.
    const auto make = [this](std::size_t j, auto&& run) {
      const std::int64_t steps = steps_ + static_cast<std::int64_t>(j);
      Rule::template update<T>(options_, schedule::learning_rate(schedule_, options_.lr, steps), model_->parameters(),
                               model_->gradients(), state_.data(), Params::flat_size, steps + 1, T(1), run);
    };
    const auto launch = [](const auto& update) { for_each_index(Device{}, Params::flat_size, update); };
    std::array<const unsigned long long*, verdict_slots> earlier{};
    const auto on_their_way = static_cast<std::size_t>(verdicts_sent_ - verdicts_counted_);
    for (std::size_t k = 0; k < on_their_way; ++k) earlier[k] = slot(verdicts_counted_ + k).skip();
    if (!launch_picked_update<verdict_slots>(verdict.skip(), {earlier.data(), on_their_way}, make, launch)) {
      count_verdicts(0);  // candidates of different types (SGD's first step): one left after a wait
      launch_picked_update<verdict_slots>(verdict.skip(), {}, make, launch);
    }
    verdict.send();
    ++verdicts_sent_;
    verdict_begun_ = false;
    return verdict;
  }
  // The verdict begun, as the caller marks it.
  backend::StepVerdict<Device>& verdict() noexcept
    requires backend::verdict_on_device<Device>
  {
    return slot(verdicts_sent_);
  }
  // The verdict begun, sent to the host now and waited for: what the device has marked so far (for
  // a caller that marked losses on the device and then decides on the host). The verdicts on
  // their way are counted first.
  const backend::StepVerdict<Device>& read_verdict_now()
    requires backend::verdict_on_device<Device>
  {
    if (!verdict_begun_) throw Error("etnn::optim::Optimizer::read_verdict_now: no verdict begun (begin_verdict)");
    count_verdicts(0);
    verdict().send();
    verdict().wait();
    return verdict();
  }
  // Verdicts step_unless_skipped() has sent so far; the last verdict_slots of them stay readable
  // (one fewer once begin_verdict() has taken the oldest one's slot).
  std::uint64_t verdicts_sent() const noexcept { return verdicts_sent_; }
  // Verdict number n on the host: waited for when `wait`, else null while it is on its way.
  const backend::StepVerdict<Device>* sent_verdict(std::uint64_t n, bool wait) const
    requires backend::verdict_on_device<Device>
  {
    if (n >= verdicts_sent_ || n + verdict_slots < verdicts_sent_ + (verdict_begun_ ? 1 : 0))
      throw Error("etnn::optim::Optimizer::sent_verdict: verdict " + std::to_string(n) + " is not held (" +
                  std::to_string(verdicts_sent_) + " sent, the last " + std::to_string(verdict_slots) + " kept)");
    const auto& verdict = slot(n);
    if (!wait && !verdict.arrived()) return nullptr;
    verdict.wait();
    return &verdict;
  }

  // Gradient buckets (each one allreduce per step).
  std::size_t bucket_count() const noexcept { return buckets_.count(); }
  // True while the model's gradients live in memory the reducer sums in place
  // (BucketOptions::gradient_as_bucket_view, optim/gradient_storage.hpp).
  bool gradient_as_bucket_view() const noexcept { return gradient_storage_.in_reducer_memory(); }

  // Sums the gradients across ranks (waiting for the buckets backward started; unless
  // reduce_gradients() already did), clips the mean
  // gradient when a maximum norm is set, then updates every parameter with it at the scheduled lr.
  void step() {
    count_verdicts(0);
    reduce_gradients();
    reduced_ = false;
    T grad_scale = T(1) / static_cast<T>(reducer_->size());  // the gradients hold the sum over ranks
    last_grad_norm_ = std::numeric_limits<double>::quiet_NaN();
    if (max_grad_norm_ > 0.0f) {
      // ||mean|| = ||sum|| / ranks; the clip factor joins the gradient scale of the fused update.
      const double ranks = static_cast<double>(reducer_->size());
      last_grad_norm_ = std::sqrt(backend::sum_of_squares(Device{}, model_->gradients(), Params::flat_size)) / ranks;
      const double clip = detail::clip_scale(max_grad_norm_, last_grad_norm_);
      if (!(clip >= 1.0)) grad_scale = static_cast<T>(clip / ranks);
    }
    const double lr = learning_rate();
    ++steps_;
    Rule::template update<T>(options_, lr, model_->parameters(), model_->gradients(), state_.data(),
                             Params::flat_size, steps_, grad_scale,
                             [](const auto& update) { for_each_index(Device{}, Params::flat_size, update); });
    // Each rank's forward updated running statistics from its own batch; like DDP's
    // broadcast_buffers, every rank continues with rank 0's.
    if constexpr (num_buffers<Params>() > 0)
      if (reducer_->size() > 1) reducer_->broadcast(model_->buffers(), num_buffers<Params>(), 0);
  }

  void zero_grad() { model_->zero_grad(); }

  Params& model() noexcept { return *model_; }
  R& reducer() noexcept { return *reducer_; }
  const Options& options() const noexcept { return options_; }
  // Changes hyper-parameters between steps (options().lr is the base lr a schedule scales, see
  // set_schedule). The per-parameter state a rule keeps cannot appear or vanish mid-training
  // (e.g. SGD momentum from 0 to 0.9).
  void set_options(const Options& options) {
    Rule::validate(options);
    if (Rule::state_slots(options) != Rule::state_slots(options_))
      throw Error("etnn::optim::Optimizer::set_options: the new options need " +
                  std::to_string(Rule::state_slots(options)) + " state buffers per parameter, the optimizer was built with " +
                  std::to_string(Rule::state_slots(options_)) + "; build a new optimizer instead");
    options_ = options;
  }
  // Updates done so far (a learning-rate schedule's position). A step whose verdict the device
  // decided counts once that verdict is on the host (it waits for the verdicts on their way).
  std::int64_t steps() const {
    std::int64_t steps = steps_;
    if constexpr (backend::verdict_on_device<Device>) {
      for (std::uint64_t n = verdicts_counted_; n < verdicts_sent_; ++n) {
        slot(n).wait();
        steps += slot(n).skipped() ? 0 : 1;
      }
    }
    return steps;
  }

  // The learning-rate schedule, a function of steps() over the base lr options().lr:
  //   opt.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = 100, .total = 10000});
  // Throws etnn::Error on an invalid schedule (and keeps the previous one).
  void set_schedule(const schedule::Schedule& s) {
    schedule::validate(s);
    schedule_ = s;
  }
  const schedule::Schedule& schedule() const noexcept { return schedule_; }
  // The lr the next step uses.
  double learning_rate() const { return schedule::learning_rate(schedule_, options_.lr, steps()); }

  // Clipping by global norm, as torch.nn.utils.clip_grad_norm_ on the mean gradient before each
  // update; 0 turns it off (the default), infinity measures the norm without clipping.
  void set_max_grad_norm(float max_norm) {
    if (!(max_norm >= 0.0f)) {
      std::string message = "etnn::optim::Optimizer::set_max_grad_norm: the maximum norm must be >= 0 (0 turns "
                            "clipping off), got ";
      message += std::to_string(max_norm);
      throw Error(message);
    }
    max_grad_norm_ = max_norm;
  }
  float max_grad_norm() const noexcept { return max_grad_norm_; }
  // The global norm of the mean gradient at the last step (before clipping); NaN when clipping was
  // off at that step, or before the first step.
  double last_grad_norm() const noexcept { return last_grad_norm_; }

  // The per-parameter state (Rule::state_names(options)[k] for flat index i at k * flat_size + i),
  // and the step count: what a training checkpoint keeps (etnn::io::save_state).
  T* state() noexcept { return state_.data(); }
  const T* state() const noexcept { return state_.data(); }
  std::size_t state_size() const noexcept { return state_.size(); }
  void restore_steps(std::int64_t steps) {
    count_verdicts(0);
    steps_ = steps;
  }

 private:
  static inline dist::Local local_{};

  // Where buckets may end: inside layers too on the CPU, whose backward reports weight gradients'
  // row blocks (nn/weight_row_blocks.hpp); between layers on a device.
  static constexpr std::span<const std::size_t> bucket_cuts() {
    if constexpr (std::is_same_v<Device, Cpu>)
      return gradient_cuts<Params>();
    else
      return parameter_ends<Params>();
  }

  // The ring of verdicts the steps decided on the device fill (nothing where the host decides),
  // each told the parameter tensors' offsets in flat order.
  using Verdicts = std::conditional_t<backend::verdict_on_device<Device>,
                                      std::array<backend::StepVerdict<Device>, verdict_slots>, backend::NoStepVerdict>;
  static Verdicts made_verdicts() {
    if constexpr (backend::verdict_on_device<Device>) {
      std::vector<std::size_t> offsets;
      for (const auto& tensor : tensors_in_flat_order<Params>()) offsets.push_back(tensor.offset);
      if (offsets.empty()) offsets.push_back(0);
      return [&]<std::size_t... s>(std::index_sequence<s...>) {
        return Verdicts{((void)s, backend::StepVerdict<Device>(offsets))...};
      }(std::make_index_sequence<verdict_slots>{});
    } else {
      return {};
    }
  }
  // The slot of verdict number n.
  auto& slot(std::uint64_t n) noexcept { return verdicts_[n % verdict_slots]; }
  const auto& slot(std::uint64_t n) const noexcept { return verdicts_[n % verdict_slots]; }

  // A verdict decided on the device reads no gradient on the host: one process, no clipping; and
  // step_unless_skipped tests the gradients into the verdict begin_verdict began for its step.
  void check_verdict_on_device(const char* who, bool begun) const {
    if (reducer_->size() > 1 || max_grad_norm_ > 0.0f)
      throw Error(std::string("etnn::optim::Optimizer::") + who +
                  ": a verdict decided on the device needs one process and no gradient clipping (both read the "
                  "gradients on the host)");
    if (begun && !verdict_begun_)
      throw Error(std::string("etnn::optim::Optimizer::") + who + ": no verdict begun (begin_verdict)");
  }

  // Counts the verdicts on their way into steps_, oldest first: each that has arrived, and, waiting
  // for it, the oldest while more than most_on_their_way remain.
  void count_verdicts(std::size_t most_on_their_way) {
    if constexpr (backend::verdict_on_device<Device>) {
      for (; verdicts_counted_ < verdicts_sent_; ++verdicts_counted_) {
        const auto& verdict = slot(verdicts_counted_);
        if (verdicts_sent_ - verdicts_counted_ <= most_on_their_way && !verdict.arrived()) return;
        verdict.wait();
        if (!verdict.skipped()) ++steps_;
      }
    }
  }

  Params* model_;
  R* reducer_;
  Options options_;
  detail::GradientStorage<R, Params> gradient_storage_;  // before buckets_: it outlives their reductions
  GradientBuckets<R, T> buckets_;
  Buffer<T, Device> state_;
  std::int64_t steps_ = 0;  // not counting the steps whose verdicts are on their way
  [[no_unique_address]] Verdicts verdicts_ = made_verdicts();  // verdict n in verdicts_[n % verdict_slots]
  std::uint64_t verdicts_sent_ = 0;     // by step_unless_skipped(); the next begun is this number
  std::uint64_t verdicts_counted_ = 0;  // of those, counted into steps_ (the rest are on their way)
  bool verdict_begun_ = false;  // begin_verdict() began one that step_unless_skipped() has not sent
  schedule::Schedule schedule_;
  float max_grad_norm_ = 0.0f;
  double last_grad_norm_ = std::numeric_limits<double>::quiet_NaN();
  bool reduced_ = false;  // reduce_gradients() ran for the step in progress
  typename R::Pending flag_pending_{};  // the guard's loss flag, summed across ranks
  bool flag_in_flight_ = false;
};

}  // namespace etnn::optim
