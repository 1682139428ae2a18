#pragma once
// Private to io/: include <etnn/io/io.hpp> or <etnn/etnn.hpp>.
// Training checkpoints: everything needed to continue training as if it had never stopped.
//   etnn::io::save_state(trainer, loader, "run.state.safetensors");   // e.g. after a step
//   etnn::io::load_state(trainer, loader, "run.state.safetensors");   // in a new process
//   for (int epoch = loader.epoch(); epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);                 // resumes mid-epoch where the state was saved
//     for (auto batch : loader) trainer.step(batch);
//   }
// The file is safetensors: the parameters under their state_dict names, the optimizer's state as
// "optimizer.<state name>.<parameter>" (PyTorch's names, e.g. momentum_buffer), the gradients
// accumulated so far as "grad.<parameter>" when saved inside an accumulation window, and in the
// metadata the optimizer's step count (the position of any learning-rate schedule), the trainer's
// micro-step, the model's count of training passes (its dropout streams), with loss scaling on the
// loss scale and the updates made at it, the non-finite guard's state (Trainer::guard_state: skipped
// steps, the run in progress and the error it owes the next step, and whether the window in
// progress has had a non-finite loss), the loader's epoch and position, and the number of ranks.
// Inside a window, with the guard on, the model's buffers at the window's start (which a skipped
// update puts back) are kept as "window_start.<buffer>", e.g. "window_start.1.running_mean".
// A loss with parameters of its own (a margin head) adds the same under "loss.": "loss.weight",
// "loss.optimizer.exp_avg.weight", "loss.grad.weight", and "loss_optimizer_steps".
// Data order, dropout and initialisation derive from seeds and these counters, so no generator
// state needs saving.
// Resuming gives bitwise the same parameters as the uninterrupted run, with the same network,
// number of ranks, accumulation and batches per epoch (checked on load; another network, by its
// "network" metadata as etnn::io::load checks it, is allowed with
// load_state(trainer, loader, path, {.allow_architecture_mismatch = true})). In a data-parallel job rank 0 saves
// at an accumulation boundary (then all ranks hold the same state) and every rank loads.
#include <charconv>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "checkpoint.hpp"

namespace etnn::io {  // the public names stay in etnn::io beside save/load

namespace detail {

// The tensors of one parameter set and its optimizer, names prefixed: parameters, optimizer state
// and (inside an accumulation window, `partial`) the gradients gathered so far.
template <class T, class Params, class Optimizer>
void append_training_slots(std::vector<TensorSlot<T>>& slots, Params& params, Optimizer& optimizer, bool partial,
                           const std::string& prefix) {
  for (auto& slot : parameter_slots<T>(params)) {
    slot.name.insert(0, prefix);
    slots.push_back(std::move(slot));
  }
  const auto named = Params::named_parameters();
  const auto names = Optimizer::rule::state_names(optimizer.options());
  for (std::size_t k = 0; k < names.size(); ++k)
    for (const auto& p : named)
      slots.push_back({prefix + "optimizer." + names[k] + "." + p.name, shape_of(p),
                       optimizer.state() + k * Params::flat_size + p.offset, p.numel});
  if (partial)
    for (const auto& p : named)
      slots.push_back({prefix + "grad." + p.name, shape_of(p), params.gradients() + p.offset, p.numel});
}

// The trainer's tensors: the model's, and a parametric loss's under "loss."; with the gradients
// accumulated so far when `partial` (inside an accumulation window), and the model's buffers at the
// window's start when `window_start` (Trainer::window_start_buffers).
template <class T, class Trainer>
std::vector<TensorSlot<T>> training_slots(Trainer& trainer, bool partial, bool window_start) {
  using Model = std::remove_reference_t<decltype(trainer.model())>;
  std::vector<TensorSlot<T>> slots;
  append_training_slots(slots, trainer.model(), trainer.optimizer(), partial, "");
  if constexpr (requires { trainer.loss_optimizer(); })
    append_training_slots(slots, trainer.loss_optimizer().model(), trainer.loss_optimizer(), partial, "loss.");
  if (window_start)  // the guard keeps them only for a model with buffers
    for (const auto& b : Model::named_buffers())
      slots.push_back({"window_start." + b.name, shape_of(b), trainer.window_start_buffers() + b.offset, b.numel});
  return slots;
}

// The metadata value `key` parsed whole by std::from_chars into `value`; false when it is missing
// or not such a number.
template <class Number>
bool metadata_number(const SafetensorsFile& file, const char* key, Number& value) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) return false;
  const char* end = it->second.data() + it->second.size();
  return std::from_chars(it->second.data(), end, value).ptr == end;
}

// The metadata value `key` as an integer in [0, the largest Int].
template <class Int = int>
Int metadata_count(const SafetensorsFile& file, const std::filesystem::path& path, const char* key) {
  long long value = -1;
  if (!metadata_number(file, key, value) || value < 0 || value > std::numeric_limits<Int>::max())
    throw IoError("etnn::io::load_state: '" + path.string() + "': metadata '" + key +
                  "' is missing or not a count");
  return static_cast<Int>(value);
}

// The metadata value `key` as 0 or 1.
inline bool metadata_flag(const SafetensorsFile& file, const std::filesystem::path& path, const char* key) {
  const int value = metadata_count(file, path, key);
  if (value > 1)
    throw IoError("etnn::io::load_state: '" + path.string() + "': metadata '" + key + "' is neither 0 nor 1");
  return value == 1;
}

// The metadata value `key` as a float written by shortest_text (which round-trips it exactly).
inline float metadata_float(const SafetensorsFile& file, const std::filesystem::path& path, const char* key) {
  float value = 0.0f;
  if (!metadata_number(file, key, value))
    throw IoError("etnn::io::load_state: '" + path.string() + "': metadata '" + key + "' is missing or not a number");
  return value;
}

inline std::string shortest_text(float value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

}  // namespace detail

template <class Trainer, class Loader>
void save_state(Trainer& trainer, const Loader& loader, const std::filesystem::path& path) {
  using Model = std::remove_reference_t<decltype(trainer.model())>;
  using T = typename Model::value_type;
  if (trainer.micro_step() > 0 && trainer.optimizer().reducer().size() > 1)
    throw Error("etnn::io::save_state: inside an accumulation window each rank holds its own unreduced gradients; "
                "save at an accumulation boundary (micro step 0) in a data-parallel job");
  const bool partial = trainer.micro_step() > 0;
  const auto guard = trainer.guard_state();
  const detail::HostSlots<typename Model::device, T> host(
      detail::training_slots<T>(trainer, partial, guard.window_start_buffers));
  auto metadata = detail::model_metadata<Model>("etnn-training-state");
  metadata["optimizer_steps"] = std::to_string(trainer.optimizer().steps());
  if constexpr (requires { trainer.loss_optimizer(); })
    metadata["loss_optimizer_steps"] = std::to_string(trainer.loss_optimizer().steps());
  metadata["micro_step"] = std::to_string(trainer.micro_step());
  metadata["training_passes"] = std::to_string(trainer.model().training_passes());
  if (trainer.options().loss_scaling->enabled) {
    metadata["loss_scale"] = detail::shortest_text(trainer.loss_scale());
    metadata["updates_at_loss_scale"] = std::to_string(trainer.updates_at_loss_scale());
  }
  metadata["skipped_steps"] = std::to_string(guard.skipped_steps);
  metadata["non_finite_in_a_row"] = std::to_string(guard.non_finite_in_a_row);
  metadata["first_non_finite"] = guard.first_non_finite;
  metadata["first_ranks_with_non_finite_loss"] = std::to_string(guard.first_ranks_with_non_finite_loss);
  metadata["window_loss_non_finite"] = guard.window_loss_non_finite ? "1" : "0";
  metadata["owed_non_finite_error"] = guard.owed_error;
  metadata["window_start_buffers"] = guard.window_start_buffers ? "1" : "0";
  metadata["epoch"] = std::to_string(loader.epoch());
  metadata["position"] = std::to_string(loader.position());
  metadata["ranks"] = std::to_string(trainer.optimizer().reducer().size());
  metadata["accumulate"] = std::to_string(trainer.options().accumulate);
  metadata["batches_per_epoch"] = std::to_string(loader.size());
  detail::save_slots<T>(path, host.slots(), metadata);
}

template <class Trainer, class Loader>
void load_state(Trainer& trainer, Loader& loader, const std::filesystem::path& path, LoadOptions options = {}) {
  using Model = std::remove_reference_t<decltype(trainer.model())>;
  using T = typename Model::value_type;
  const SafetensorsFile file = read_safetensors(path);
  const auto fail = [&](const std::string& what) {
    throw IoError("etnn::io::load_state: '" + path.string() + "': " + what);
  };
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != "etnn-training-state")
    fail("not an etnn training state (a model checkpoint loads with etnn::io::load)");
  const std::string description = optim::describe<Model>();
  detail::check_architecture(file, "etnn::io::load_state", path, description, options);
  const auto expect = [&](const char* key, long long now, const char* advice) {
    const int saved = detail::metadata_count(file, path, key);
    if (saved != now)
      fail(std::string(key) + " was " + std::to_string(saved) + " when saved and is " + std::to_string(now) + " now; " +
           advice);
  };
  expect("ranks", trainer.optimizer().reducer().size(),
         "resume with the same number of ranks (or load the weights alone with etnn::io::load)");
  expect("accumulate", trainer.options().accumulate, "resume with the same gradient accumulation");
  expect("batches_per_epoch", static_cast<long long>(loader.size()), "resume with the same data and batch size");
  const auto scalar = file.metadata.find("scalar");
  if (scalar == file.metadata.end() || scalar->second != detail::scalar_name<T>())
    fail("saved from a model of another scalar type; resume with the same etnn::Model<Net, T>");
  const int steps = detail::metadata_count(file, path, "optimizer_steps");
  [[maybe_unused]] int loss_steps = 0;
  if constexpr (requires { trainer.loss_optimizer(); })
    loss_steps = detail::metadata_count(file, path, "loss_optimizer_steps");
  const int micro_step = detail::metadata_count(file, path, "micro_step");
  const int epoch = detail::metadata_count(file, path, "epoch");
  const int position = detail::metadata_count(file, path, "position");
  const int passes = detail::metadata_count(file, path, "training_passes");
  // A state saved without loss scaling has no scale: the trainer keeps its own.
  const bool has_loss_scale = file.metadata.contains("loss_scale");
  const float loss_scale = has_loss_scale ? detail::metadata_float(file, path, "loss_scale") : 1.0f;
  const int updates_at_loss_scale = has_loss_scale ? detail::metadata_count(file, path, "updates_at_loss_scale") : 0;
  // The non-finite guard's state (Trainer::guard_state); one saved before it was kept resumes
  // with none.
  auto guard = decltype(trainer.guard_state()){};
  if (file.metadata.contains("skipped_steps")) {
    guard.skipped_steps = detail::metadata_count<std::int64_t>(file, path, "skipped_steps");
    guard.non_finite_in_a_row = detail::metadata_count(file, path, "non_finite_in_a_row");
    guard.first_ranks_with_non_finite_loss = detail::metadata_count(file, path, "first_ranks_with_non_finite_loss");
    const auto text = [&](const char* key) {
      const auto it = file.metadata.find(key);
      if (it == file.metadata.end()) fail(std::string("metadata '") + key + "' is missing");
      return it->second;
    };
    guard.first_non_finite = text("first_non_finite");
    guard.owed_error = text("owed_non_finite_error");
    guard.window_loss_non_finite = detail::metadata_flag(file, path, "window_loss_non_finite");
    // Saved before the window's starting buffers were kept: the window resumes without them.
    guard.window_start_buffers = file.metadata.contains("window_start_buffers") &&
                                 detail::metadata_flag(file, path, "window_start_buffers") && micro_step > 0;
    try {
      guard.check(trainer.optimizer().reducer().size());
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  if (micro_step >= trainer.options().accumulate || epoch == INT_MAX)
    fail("metadata out of range (micro step " + std::to_string(micro_step) + ", epoch " + std::to_string(epoch) + ")");
  // The verdicts on their way are counted, and a window's device-marked loss read, before anything
  // changes: restore_micro_step then finds nothing on its way.
  (void)trainer.guard_state();
  // The micro-step decides whether accumulated gradients are part of the state. The trainer's own
  // is set, with the guard's state, only once everything has loaded.
  const float previous_loss_scale = trainer.loss_scale();
  const int previous_updates_at_loss_scale = trainer.updates_at_loss_scale();
  if (has_loss_scale) {  // checked before anything changes
    try {
      trainer.restore_loss_scale(loss_scale, updates_at_loss_scale);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  try {
    const detail::HostSlots<typename Model::device, T> host(
        detail::training_slots<T>(trainer, micro_step > 0, guard.window_start_buffers));
    detail::load_slots<T>(file, path, host.slots(), "the training state of " + description);
    host.write_back();
  } catch (...) {
    if (has_loss_scale) trainer.restore_loss_scale(previous_loss_scale, previous_updates_at_loss_scale);
    throw;
  }
  trainer.restore_micro_step(micro_step);  // in range: checked above
  trainer.restore_guard_state(guard);      // checked above
  if (guard.window_start_buffers) trainer.use_window_start_buffers();  // loaded with the slots
  trainer.optimizer().restore_steps(steps);
  if constexpr (requires { trainer.loss_optimizer(); }) trainer.loss_optimizer().restore_steps(loss_steps);
  trainer.model().restore_training_passes(static_cast<std::uint64_t>(passes));
  // A finished epoch resumes at the start of the next one.
  if (static_cast<std::size_t>(position) >= loader.size())
    loader.resume(epoch + 1, 0);
  else
    loader.resume(epoch, static_cast<std::size_t>(position));
}

}  // namespace etnn::io
