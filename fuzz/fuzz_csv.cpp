// libFuzzer target: etnn::data::load_csv on a table, for four (X, Y, options) choices that cover every
// target kind, column selection, another delimiter and non-finite features.
// Input: [1 byte: the choice] [the rest: the CSV file]   (make_seeds writes valid tables)
//   0: Shape<2>, class indices in column "y"           1: Shape<1>, Shape<2> targets {"y", "z"}
//   2: Shape<2>, MultiHot<2> {"z", "y"}, features {"b", "a"}, ';'-separated
//   3: Shape<3>, class indices in "y", nan and inf allowed in features
// The file lives in a memfd (mem_file.hpp). An etnn::IoError is the expected answer to a malformed
// table; anything else (a crash, a sanitizer report, another exception, an inconsistent dataset) is
// a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <etnn/data/data.hpp>

#include "mem_file.hpp"

namespace {

template <class X, class Y>
void load(const std::string& path, const etnn::data::CsvOptions& options) {
  try {
    const auto data = etnn::data::load_csv<X, Y>(path, options);
    if (data.features().size() != data.size() * X::size) std::abort();
    if (data.targets().size() != data.size() * etnn::data::target_size<Y>) std::abort();
    if (!options.allow_non_finite) {
      for (float v : data.features())
        if (!std::isfinite(v)) std::abort();
    }
  } catch (const etnn::IoError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemFile file("table");
  if (size < 1) return 0;
  const std::string& path = file.set(data + 1, size - 1);
  using etnn::Shape;
  switch (data[0] % 4) {
    case 0: load<Shape<2>, etnn::data::ClassIndices>(path, {.targets = {"y"}}); break;
    case 1: load<Shape<1>, Shape<2>>(path, {.targets = {"y", "z"}}); break;
    case 2:
      load<Shape<2>, etnn::data::MultiHot<2>>(path, {.targets = {"z", "y"}, .features = {"b", "a"}, .delimiter = ';'});
      break;
    default: load<Shape<3>, etnn::data::ClassIndices>(path, {.targets = {"y"}, .allow_non_finite = true}); break;
  }
  return 0;
}
