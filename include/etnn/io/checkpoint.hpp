#pragma once
// Model checkpoints in safetensors, named as torch.nn.Sequential.state_dict() names them:
//   etnn::io::save(model, "mlp.safetensors");
//   etnn::io::load(model, "mlp.safetensors");   // throws etnn::IoError on any mismatch
// A checkpoint holds the parameters only, in the model's scalar type (F32 or F64), with metadata
// "format" = "etnn", "format_version", "network" (the network's description) and "scalar". It does
// not depend on how the model was trained (devices, ranks). load accepts F64, F32, F16 and BF16
// tensors and converts them to the model's scalar type (narrowing rounds to nearest), so files
// written by PyTorch's safetensors load as long as names and shapes match.
#include <bit>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "half.hpp"
#include "safetensors.hpp"

namespace etnn::io {

inline constexpr const char* checkpoint_format_version = "1";

static_assert(std::endian::native == std::endian::little,
              "etnn::io writes safetensors (little-endian data) straight from memory");

template <class Model>
void save(const Model& model, const std::filesystem::path& path) {
  using T = typename Model::value_type;
  const auto params = Model::named_parameters();
  std::vector<TensorBytes> tensors;
  tensors.reserve(params.size());
  for (const auto& p : params) {
    tensors.push_back({p.name, std::is_same_v<T, double> ? Dtype::f64 : Dtype::f32,
                       std::vector<std::int64_t>(p.shape.begin(), p.shape.end()),
                       {reinterpret_cast<const unsigned char*>(model.parameters() + p.offset), p.numel * sizeof(T)}});
  }
  write_safetensors(path, tensors,
                    {{"format", "etnn"},
                     {"format_version", checkpoint_format_version},
                     {"network", Model::network::describe()},
                     {"scalar", std::is_same_v<T, double> ? "float64" : "float32"}});
}

template <class Model>
void load(Model& model, const std::filesystem::path& path) {
  using T = typename Model::value_type;
  const SafetensorsFile file = read_safetensors(path);
  const auto fail = [&](const std::string& what) {
    throw IoError("etnn::io::load: '" + path.string() + "': " + what);
  };
  const auto params = Model::named_parameters();
  std::set<std::string, std::less<>> expected;
  for (const auto& p : params) expected.insert(p.name);
  for (const auto& t : file.tensors)
    if (!expected.contains(t.name))
      fail("unexpected tensor '" + t.name + "'; the model " + Model::network::describe() + " has no such parameter");
  // Validate every tensor before changing any parameter: a failed load leaves the model as it was.
  for (const auto& p : params) {
    const TensorRecord* t = file.find(p.name);
    if (t == nullptr) fail("missing tensor '" + p.name + "' (model " + Model::network::describe() + ")");
    const std::vector<std::int64_t> shape(p.shape.begin(), p.shape.end());
    if (t->shape != shape)
      fail("tensor '" + p.name + "' has shape " + detail::shape_string(t->shape) + ", model expects " +
           detail::shape_string(shape));
  }
  for (const auto& p : params) {
    const TensorRecord& t = *file.find(p.name);
    const unsigned char* bytes = file.data.data() + t.begin;
    T* out = model.parameters() + p.offset;
    for (std::size_t i = 0; i < p.numel; ++i) {
      const unsigned char* at = bytes + i * dtype_size(t.dtype);
      switch (t.dtype) {
        case Dtype::f64: out[i] = static_cast<T>(std::bit_cast<double>(read_le<std::uint64_t>(at))); break;
        case Dtype::f32: out[i] = static_cast<T>(std::bit_cast<float>(read_le<std::uint32_t>(at))); break;
        case Dtype::f16: out[i] = static_cast<T>(f16_to_float(read_le<std::uint16_t>(at))); break;
        case Dtype::bf16: out[i] = static_cast<T>(bf16_to_float(read_le<std::uint16_t>(at))); break;
      }
    }
  }
}

}  // namespace etnn::io
