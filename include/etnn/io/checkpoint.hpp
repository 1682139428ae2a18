#pragma once
// Private to io/: include <etnn/io/io.hpp> or <etnn/etnn.hpp>.
// Model checkpoints in safetensors, named as torch.nn.Sequential.state_dict() names them:
//   etnn::io::save(model, "mlp.safetensors");
//   etnn::io::load(model, "mlp.safetensors");   // throws etnn::IoError on any mismatch
//   etnn::io::load(model, "mlp.safetensors", {.allow_architecture_mismatch = true});
// Any optim::ParameterSet saves and loads the same way, e.g. a margin head ("weight").
// A checkpoint holds the parameters and buffers (running statistics), in the model's scalar type
// (F32 or F64), with metadata "format" = "etnn", "format_version", "network" (the network's
// description, optim::describe) and "scalar". It does not depend on how the model was trained
// (devices, ranks). load refuses a file whose "network" is not the model's description: a
// checkpoint of `... >> relu >> ...` has the tensors of `... >> tanh >> ...`, and loading it there
// would silently compute something else; allow_architecture_mismatch loads it anyway, by tensor
// names and shapes. load accepts F64, F32, F16, BF16 and I64 tensors and converts them to the
// model's scalar type (narrowing rounds to nearest), so files written by PyTorch's safetensors,
// which have no "network", load as long as names and shapes match.
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../nn/model.hpp"
#include "../tensor/copy.hpp"
#include "../optim/parameter_set.hpp"
#include "half.hpp"
#include "safetensors.hpp"

namespace etnn::io {

inline constexpr const char* checkpoint_format_version = "1";

static_assert(std::endian::native == std::endian::little,
              "etnn::io writes safetensors (little-endian data) straight from memory");

// One tensor of a checkpoint: its name and shape, and where its values live in memory.
template <class T>
struct TensorSlot {
  std::string name;
  std::vector<std::int64_t> shape;
  T* data;
  std::size_t numel;
};

// What load (and load_state) accepts beyond an exact match.
struct LoadOptions {
  // Load a checkpoint saved from another network (its "network" metadata is not the model's
  // description, e.g. relu where the model has tanh) when every tensor's name and shape fit.
  bool allow_architecture_mismatch = false;
};

namespace detail {

// Refuses `file` when it says it was saved from a network other than the model's. A file without
// etnn's "network" metadata (PyTorch's) is checked by tensor names and shapes alone.
inline void check_architecture(const SafetensorsFile& file, const char* function, const std::filesystem::path& path,
                               const std::string& model_description, LoadOptions options) {
  const auto saved = file.metadata.find("network");
  if (options.allow_architecture_mismatch || saved == file.metadata.end() || saved->second == model_description)
    return;
  throw IoError(std::string(function) + ": '" + path.string() + "': saved from the network '" + saved->second +
                "' but the model is '" + model_description +
                "'; load it into the network it was saved from, or pass {.allow_architecture_mismatch = true} to " +
                function + " to load it by tensor names and shapes");
}

template <class T>
constexpr Dtype dtype_of() {
  return std::is_same_v<std::remove_const_t<T>, double> ? Dtype::f64 : Dtype::f32;
}

template <class T>
constexpr const char* scalar_name() {
  return std::is_same_v<std::remove_const_t<T>, double> ? "float64" : "float32";
}

// A parameter's shape as safetensors stores it.
inline std::vector<std::int64_t> shape_of(const NamedParameter& p) { return {p.shape.begin(), p.shape.end()}; }

// The model's parameters and buffers (running statistics) as checkpoint tensors (T const for a const model).
template <class T, class M>
std::vector<TensorSlot<T>> parameter_slots(M& model) {
  using Model = std::remove_const_t<M>;
  std::vector<TensorSlot<T>> slots;
  for (const auto& p : Model::named_parameters())
    slots.push_back({p.name, shape_of(p), model.parameters() + p.offset, p.numel});
  if constexpr (requires { Model::named_buffers(); })
    for (const auto& b : Model::named_buffers())
      slots.push_back({b.name, shape_of(b), model.buffers() + b.offset, b.numel});
  return slots;
}

// The slots of a model on Device in host memory, where files are read and written: a host model's
// are used in place; a device model's are copied to the host, and after a load write_back() copies
// them to the device.
template <class Device, class T>
class HostSlots {
 public:
  explicit HostSlots(std::vector<TensorSlot<T>> slots) : slots_(std::move(slots)) {
    if constexpr (!std::is_same_v<Device, Cpu>) {
      device_.reserve(slots_.size());
      host_.reserve(slots_.size());
      for (auto& s : slots_) {
        device_.push_back(s.data);
        auto& values = host_.emplace_back(s.numel);
        copy_to_host(Device{}, values.data(), s.data, s.numel);
        s.data = values.data();
      }
    }
  }
  std::span<const TensorSlot<T>> slots() const noexcept { return slots_; }
  void write_back() const {
    if constexpr (!std::is_same_v<Device, Cpu>)
      for (std::size_t i = 0; i < slots_.size(); ++i) copy_from_host(Device{}, device_[i], slots_[i].data, slots_[i].numel);
  }

 private:
  std::vector<TensorSlot<T>> slots_;
  std::vector<T*> device_;
  std::vector<std::vector<std::remove_const_t<T>>> host_;
};

template <class Model>
std::map<std::string, std::string, std::less<>> model_metadata(const char* format) {
  return {{"format", format},
          {"format_version", checkpoint_format_version},
          {"network", optim::describe<Model>()},
          {"scalar", scalar_name<typename Model::value_type>()}};
}

template <class T>
void save_slots(const std::filesystem::path& path, std::span<const TensorSlot<T>> slots,
                const std::map<std::string, std::string, std::less<>>& metadata) {
  std::vector<TensorBytes> tensors;
  tensors.reserve(slots.size());
  for (const auto& s : slots)
    tensors.push_back({s.name, dtype_of<T>(), s.shape,
                       {reinterpret_cast<const unsigned char*>(s.data), s.numel * sizeof(T)}});
  write_safetensors(path, tensors, metadata);
}

// Fills every slot from `file`, converting dtypes. Every slot must be present with its shape and
// nothing else may be: all is checked before any slot is written, so a failure changes nothing.
template <class T>
void load_slots(const SafetensorsFile& file, const std::filesystem::path& path, std::span<const TensorSlot<T>> slots,
                const std::string& model_description) {
  const auto fail = [&](const std::string& what) {
    throw IoError("etnn::io::load: '" + path.string() + "': " + what);
  };
  std::set<std::string, std::less<>> expected;
  for (const auto& s : slots) expected.insert(s.name);
  for (const auto& t : file.tensors)
    if (!expected.contains(t.name)) fail("unexpected tensor '" + t.name + "'; " + model_description + " has no such tensor");
  for (const auto& s : slots) {
    const TensorRecord* t = file.find(s.name);
    if (t == nullptr) fail("missing tensor '" + s.name + "' (" + model_description + ")");
    if (t->shape != s.shape)
      fail("tensor '" + s.name + "' has shape " + shape_string(t->shape) + ", model expects " + shape_string(s.shape));
  }
  for (const auto& s : slots) {
    const TensorRecord& t = *file.find(s.name);
    const unsigned char* bytes = file.data.data() + t.begin;
    for (std::size_t i = 0; i < s.numel; ++i) {
      const unsigned char* at = bytes + i * dtype_size(t.dtype);
      switch (t.dtype) {
        case Dtype::f64: s.data[i] = static_cast<T>(std::bit_cast<double>(read_le<std::uint64_t>(at))); break;
        case Dtype::f32: s.data[i] = static_cast<T>(std::bit_cast<float>(read_le<std::uint32_t>(at))); break;
        case Dtype::f16: s.data[i] = static_cast<T>(f16_to_float(read_le<std::uint16_t>(at))); break;
        case Dtype::bf16: s.data[i] = static_cast<T>(bf16_to_float(read_le<std::uint16_t>(at))); break;
        case Dtype::i64: s.data[i] = static_cast<T>(static_cast<std::int64_t>(read_le<std::uint64_t>(at))); break;
      }
    }
  }
}

}  // namespace detail

template <class Model>
void save(const Model& model, const std::filesystem::path& path) {
  using T = typename Model::value_type;
  const detail::HostSlots<typename Model::device, const T> host(detail::parameter_slots<const T>(model));
  detail::save_slots<const T>(path, host.slots(), detail::model_metadata<Model>("etnn"));
}

template <class Model>
void load(Model& model, const std::filesystem::path& path, LoadOptions options = {}) {
  using T = typename Model::value_type;
  const SafetensorsFile file = read_safetensors(path);
  const std::string description = optim::describe<Model>();
  detail::check_architecture(file, "etnn::io::load", path, description, options);
  const detail::HostSlots<typename Model::device, T> host(detail::parameter_slots<T>(model));
  detail::load_slots<T>(file, path, host.slots(), "the model " + description);
  host.write_back();
}

}  // namespace etnn::io
