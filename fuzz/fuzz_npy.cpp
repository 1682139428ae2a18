// libFuzzer target: etnn::data::load_npy on a features file and a targets file, and load_npz on an
// archive, for four (X, Y) pairs that cover every target kind.
// Input: [1 byte: bit 0 npy pair / npz archive, bits 1-2 the (X, Y) pair]
//        npy pair: [4 bytes little-endian: n] [n bytes: features .npy] [the rest: targets .npy]
//        npz:      [the rest: the archive, with members x.npy and y.npy]
// (make_seeds writes valid inputs in this layout.) The files live in memfds (mem_file.hpp). An
// etnn::IoError is the expected answer to a malformed file; anything else (a crash, a sanitizer
// report, another exception, an inconsistent dataset) is a finding.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <etnn/data/data.hpp>

#include "mem_file.hpp"

namespace {

// What a loader returns must be a consistent dataset of finite features and valid targets.
template <class X, class Y>
void check(const etnn::data::Dataset<X, Y>& data) {
  if (data.features().size() != data.size() * X::size) std::abort();
  if (data.targets().size() != data.size() * etnn::data::target_size<Y>) std::abort();
  for (float v : data.features())
    if (!std::isfinite(v)) std::abort();
  for (auto t : data.targets()) {
    if constexpr (etnn::data::class_targets<Y>) {
      if (t < 0) std::abort();
    } else if constexpr (etnn::data::multi_hot_targets<Y>) {
      if (t != 0.0f && t != 1.0f) std::abort();
    } else if (!std::isfinite(t)) {
      std::abort();
    }
  }
}

template <class X, class Y>
void load(bool archive, const std::string& first, const std::string& second) {
  try {
    if (archive) check(etnn::data::load_npz<X, Y>(first));
    else check(etnn::data::load_npy<X, Y>(first, second));
  } catch (const etnn::IoError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemFile first("first"), second("second");
  if (size < 1) return 0;
  const bool archive = data[0] & 1;
  std::string a, b;
  if (archive) {
    a = first.set(data + 1, size - 1);
  } else {
    if (size < 5) return 0;
    std::uint32_t n = 0;
    std::memcpy(&n, data + 1, 4);  // little-endian hosts only
    const std::size_t first_bytes = std::min<std::size_t>(n, size - 5);
    a = first.set(data + 5, first_bytes);
    b = second.set(data + 5 + first_bytes, size - 5 - first_bytes);
  }
  using etnn::Shape;
  switch ((data[0] >> 1) % 4) {
    case 0: load<Shape<2>, etnn::data::ClassIndices>(archive, a, b); break;
    case 1: load<Shape<2, 3>, Shape<1>>(archive, a, b); break;
    case 2: load<Shape<1>, etnn::data::MultiHot<2>>(archive, a, b); break;
    default: load<Shape<4>, Shape<2, 2>>(archive, a, b); break;
  }
  return 0;
}
