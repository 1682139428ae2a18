#pragma once
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
// micro-step, the loader's epoch and position, and the number of ranks. Data order, dropout and
// initialisation derive from seeds and these counters, so no generator state needs saving.
// Resuming gives bitwise the same parameters as the uninterrupted run, with the same number of
// ranks (each rank's share of the data depends on it); in a data-parallel job rank 0 saves (all
// ranks hold the same state) and every rank loads.
#include <charconv>
#include <filesystem>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "checkpoint.hpp"

namespace etnn::io {

namespace detail {

// The trainer's tensors: parameters, optimizer state and (inside an accumulation window) the
// gradients gathered so far.
template <class T, class Trainer>
std::vector<TensorSlot<T>> training_slots(Trainer& trainer) {
  auto& model = trainer.model();
  auto& optimizer = trainer.optimizer();
  using Model = std::remove_reference_t<decltype(model)>;
  std::vector<TensorSlot<T>> slots = parameter_slots<T>(model);
  const auto params = Model::named_parameters();
  const auto names = std::remove_reference_t<decltype(optimizer)>::rule::state_names(optimizer.options());
  for (std::size_t k = 0; k < names.size(); ++k)
    for (const auto& p : params)
      slots.push_back({"optimizer." + names[k] + "." + p.name, std::vector<std::int64_t>(p.shape.begin(), p.shape.end()),
                       optimizer.state() + k * Model::num_params + p.offset, p.numel});
  if (trainer.micro_step() > 0)
    for (const auto& p : params)
      slots.push_back({"grad." + p.name, std::vector<std::int64_t>(p.shape.begin(), p.shape.end()),
                       model.gradients() + p.offset, p.numel});
  return slots;
}

inline long long metadata_integer(const SafetensorsFile& file, const std::filesystem::path& path, const char* key) {
  const auto it = file.metadata.find(key);
  long long value = 0;
  if (it == file.metadata.end() ||
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), value).ec != std::errc{})
    throw IoError("etnn::io::load_state: '" + path.string() + "': metadata '" + key + "' is missing or not an integer");
  return value;
}

}  // namespace detail

template <class Trainer, class Loader>
void save_state(Trainer& trainer, const Loader& loader, const std::filesystem::path& path) {
  using Model = std::remove_reference_t<decltype(trainer.model())>;
  using T = typename Model::value_type;
  const auto slots = detail::training_slots<T>(trainer);
  auto metadata = detail::model_metadata<Model>("etnn-training-state");
  metadata["optimizer_steps"] = std::to_string(trainer.optimizer().steps());
  metadata["micro_step"] = std::to_string(trainer.micro_step());
  metadata["epoch"] = std::to_string(loader.epoch());
  metadata["position"] = std::to_string(loader.position());
  metadata["ranks"] = std::to_string(trainer.optimizer().reducer().size());
  detail::save_slots<T>(path, slots, metadata);
}

template <class Trainer, class Loader>
void load_state(Trainer& trainer, Loader& loader, const std::filesystem::path& path) {
  using Model = std::remove_reference_t<decltype(trainer.model())>;
  using T = typename Model::value_type;
  const SafetensorsFile file = read_safetensors(path);
  const auto fail = [&](const std::string& what) {
    throw IoError("etnn::io::load_state: '" + path.string() + "': " + what);
  };
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != "etnn-training-state")
    fail("not an etnn training state (a model checkpoint loads with etnn::io::load)");
  const long long ranks = detail::metadata_integer(file, path, "ranks");
  if (ranks != trainer.optimizer().reducer().size())
    fail("saved by " + std::to_string(ranks) + " ranks, resumed on " + std::to_string(trainer.optimizer().reducer().size()) +
         "; resume with the same number of ranks (or load the weights alone with etnn::io::load)");
  const long long steps = detail::metadata_integer(file, path, "optimizer_steps");
  const long long micro_step = detail::metadata_integer(file, path, "micro_step");
  const long long epoch = detail::metadata_integer(file, path, "epoch");
  const long long position = detail::metadata_integer(file, path, "position");
  if (steps < 0 || micro_step < 0 || micro_step >= trainer.options().accumulate || position < 0)
    fail("metadata out of range (steps " + std::to_string(steps) + ", micro step " + std::to_string(micro_step) +
         ", position " + std::to_string(position) + ")");
  // The micro-step decides whether accumulated gradients are part of the state.
  const int previous_micro_step = trainer.micro_step();
  trainer.restore_micro_step(static_cast<int>(micro_step));
  try {
    const auto slots = detail::training_slots<T>(trainer);
    detail::load_slots<T>(file, path, slots, "the training state of " + Model::network::describe());
  } catch (...) {
    trainer.restore_micro_step(previous_micro_step);
    throw;
  }
  trainer.optimizer().restore_steps(steps);
  // A finished epoch resumes at the start of the next one.
  if (static_cast<std::size_t>(position) >= loader.size())
    loader.resume(static_cast<int>(epoch) + 1, 0);
  else
    loader.resume(static_cast<int>(epoch), static_cast<std::size_t>(position));
}

}  // namespace etnn::io
