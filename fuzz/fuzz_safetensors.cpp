// libFuzzer target: etnn::io::parse_safetensors (the length prefix, the JSON header, dtypes,
// shapes and data offsets) on the input as a whole file, then loading what it accepts into two
// small models (a float MLP and a double one with batch-norm buffers), which converts every dtype.
// An etnn::IoError is the expected answer to a malformed file; anything else (a crash, a sanitizer
// report, another exception, an accepted file that is inconsistent) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include <etnn/etnn.hpp>

#include "fuzz_models.hpp"

namespace {

template <class Model>
void load_into(const etnn::io::SafetensorsFile& file) {
  using T = typename Model::value_type;
  static Model model{0};
  const auto slots = etnn::io::detail::parameter_slots<T>(model);
  try {
    etnn::io::detail::load_slots<T>(file, "fuzz input", std::span<const etnn::io::TensorSlot<T>>(slots), "fuzz model");
  } catch (const etnn::IoError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  etnn::io::SafetensorsFile file;
  try {
    file = etnn::io::parse_safetensors(std::span<const unsigned char>(data, size), "fuzz input");
  } catch (const etnn::IoError&) {
    return 0;
  }
  // What parse_safetensors accepts tiles its data exactly, in offset order.
  std::uint64_t expected = 0;
  for (const auto& t : file.tensors) {
    if (t.begin != expected || t.end < t.begin) std::abort();
    expected = t.end;
  }
  if (expected != file.data.size()) std::abort();
  load_into<fuzz::FloatModel>(file);
  load_into<fuzz::DoubleModel>(file);
  return 0;
}
