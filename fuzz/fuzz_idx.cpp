// libFuzzer target: etnn::data::load_idx on an image file and a label file, raw or gzipped.
// Input: [1 byte: the requested item shape] [4 bytes little-endian: n] [n bytes: the image file]
//        [the rest: the label file]   (make_seeds writes valid pairs in this layout)
// The two files live in memfds (mem_file.hpp). An etnn::IoError is the expected answer to a
// malformed file; anything else (a crash, a sanitizer report, another exception, an inconsistent
// dataset) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <etnn/data/data.hpp>

#include "mem_file.hpp"

namespace {

template <class S>
void load(const std::string& images, const std::string& labels) {
  try {
    const auto data = etnn::data::load_idx<S>(images, labels, 10);
    // What load_idx returns must be a consistent dataset.
    if (data.size() == 0 || data.features().size() != data.size() * S::size) std::abort();
    for (std::size_t i = 0; i < data.size(); ++i)
      if (data.label(i) < 0 || data.label(i) >= 10) std::abort();
  } catch (const etnn::IoError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemFile image_file("images"), label_file("labels");
  if (size < 5) return 0;
  std::uint32_t n = 0;
  std::memcpy(&n, data + 1, 4);  // little-endian hosts only (etnn::io requires one)
  const std::size_t image_bytes = std::min<std::size_t>(n, size - 5);
  const std::string& images = image_file.set(data + 5, image_bytes);
  const std::string& labels = label_file.set(data + 5 + image_bytes, size - 5 - image_bytes);
  switch (data[0] % 4) {
    case 0: load<etnn::Shape<1>>(images, labels); break;
    case 1: load<etnn::Shape<4>>(images, labels); break;
    case 2: load<etnn::Shape<2, 3>>(images, labels); break;
    default: load<etnn::Shape<1, 28, 28>>(images, labels); break;
  }
  return 0;
}
