#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// load_idx<S>(images, labels): a Dataset<S> from a pair of IDX files (the MNIST / Fashion-MNIST format),
// and load_idx_with_targets<S, Y>(images, targets): an IDX image file with targets of any kind given
// in memory (data/targets.hpp), a Dataset<S, Y>. Both read raw or gzipped files (zlib linked or loaded at run time: gzip.hpp). An IDX file is, all integers big-endian:
//   magic  0x00 0x00 <type> <ndims>       type 0x08 = unsigned byte, 0x0D = float32
//   dims   ndims x uint32                  images (N, 28, 28), labels (N)
//   data   N * item values, row-major      nothing after it
// Unsigned-byte pixels become x / 255 in [0, 1] (torchvision's ToTensor); float32 values are kept as stored.
// Any S with S::size equal to the per-item size is accepted: Shape<784> or Shape<1, 28, 28> for 28x28 items.
#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"
#include "../core/shape.hpp"
#include "dataset.hpp"
#include "gzip.hpp"

namespace etnn::data::detail {

// Bytes handed to IdxFile::read at a time; a multiple of every value size.
inline constexpr std::size_t idx_chunk = std::size_t{1} << 16;

// The bytes of one file, inflated on the fly when it is gzipped (its name ends in .gz or it
// starts with the gzip magic 1f 8b).
class IdxFile {
 public:
  explicit IdxFile(const std::filesystem::path& path) : where_(where_of(path)) {
    std::error_code ec;
    const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (ec) throw IoError(where_ + ": cannot read the file (" + ec.message() + "); check the path");
    file_ = open_for_reading(path);
    if (!file_) fail("cannot open the file (" + std::string(std::strerror(errno)) + "); check its permissions");
    std::array<unsigned char, 2> head{};
    const std::size_t got = std::fread(head.data(), 1, head.size(), file_.get());
    const bool gzipped = path.extension() == ".gz" || (got == 2 && head[0] == 0x1f && head[1] == 0x8b);
    std::rewind(file_.get());
    if (gzipped)
      gz_ = std::make_unique<GzipReader>(std::move(file_), where_);
    else
      size_ = bytes;
  }

  // "etnn::data::load_idx: 'path'": the start of every message about this file.
  const std::string& where() const noexcept { return where_; }
  static std::string where_of(const std::filesystem::path& path) {
    return "etnn::data::load_idx: '" + path.string() + "'";
  }
  [[noreturn]] void fail(const std::string& what) const { throw IoError(where_ + ": " + what); }

  // Bytes left after what read() has delivered: known for a raw file, unknown for a gzipped one.
  std::optional<std::uint64_t> remaining() const noexcept {
    if (!size_) return std::nullopt;
    return *size_ > offset_ ? *size_ - offset_ : 0;
  }

  // Reads n <= idx_chunk bytes into dst; returns fewer only at the end of the (decompressed) data.
  std::size_t read(unsigned char* dst, std::size_t n) {
    const std::size_t got = gz_ ? gz_->read(dst, n) : read_raw(dst, n);
    offset_ += got;
    return got;
  }

 private:
  std::size_t read_raw(unsigned char* dst, std::size_t n) {
    const std::size_t got = std::fread(dst, 1, n, file_.get());
    if (got < n && std::ferror(file_.get())) fail("read error (" + std::string(std::strerror(errno)) + ")");
    return got;
  }

  std::string where_;
  UniqueFile file_;                 // a raw file, or null once a gzipped one is open
  std::unique_ptr<GzipReader> gz_;  // a gzipped file (a GzipReader cannot move)
  std::optional<std::uint64_t> size_;  // raw files only
  std::uint64_t offset_ = 0;
};

enum class IdxKind { images, labels };

// The part of an IDX file before its data, validated; every size is overflow-checked.
struct IdxHeader {
  unsigned char type = 0;
  int rank = 0;
  std::array<std::uint32_t, 4> dims{};
  std::uint64_t item_values = 1;  // dims[1] * ... * dims[rank - 1]
  std::uint64_t data_bytes = 0;   // dims[0] * item_values * value_bytes

  std::uint64_t count() const noexcept { return dims[0]; }
  std::size_t value_bytes() const noexcept { return type == 0x0D ? 4 : 1; }

  // "(10000, 28, 28)"
  std::string dims_string() const { return join(0, ", ", "(") + ")"; }
  // "28x28 = 784" for items of several dimensions, "784" for items of one, "1" for scalars.
  std::string item_string() const {
    if (rank == 1) return "1";
    if (rank == 2) return std::to_string(item_values);
    return join(1, "x", "") + " = " + std::to_string(item_values);
  }

 private:
  std::string join(int first, const char* separator, std::string out) const {
    for (int d = first; d < rank; ++d) {
      out += (d > first ? separator : "") + std::to_string(dims[static_cast<std::size_t>(d)]);
    }
    return out;
  }
};

inline std::uint32_t load_be32(const unsigned char* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

inline IdxHeader read_idx_header(IdxFile& file, IdxKind kind) {
  std::array<unsigned char, 16> bytes{};
  if (file.read(bytes.data(), 4) < 4) {
    file.fail("truncated: shorter than the 4-byte IDX magic; the file is incomplete or not an IDX file");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    char got[16];
    std::snprintf(got, sizeof got, "0x%02X 0x%02X", bytes[0], bytes[1]);
    file.fail(std::string("wrong magic: the file starts with ") + got +
              " but IDX files start with 0x00 0x00; pass an IDX file such as train-images-idx3-ubyte(.gz)");
  }
  IdxHeader header;
  header.type = bytes[2];
  const bool images = kind == IdxKind::images;
  if (header.type != 0x08 && !(images && header.type == 0x0D)) {
    char got[8];
    std::snprintf(got, sizeof got, "0x%02X", header.type);
    file.fail(std::string("unsupported type byte ") + got + "; etnn reads " +
              (images ? "images of type 0x08 (unsigned byte) or 0x0D (float32)"
                      : "labels of type 0x08 (unsigned byte)"));
  }
  header.rank = bytes[3];
  // Labels of 2 to 4 dimensions pass here: read_idx_labels, which knows both paths, says that
  // such a file looks like images.
  if (header.rank < 1 || header.rank > 4) {
    file.fail("the header has " + std::to_string(header.rank) + " dimensions but IDX " +
              (images ? "images have 1 to 4" : "labels have exactly 1 (N)"));
  }
  const std::size_t dim_bytes = 4 * static_cast<std::size_t>(header.rank);
  if (file.read(bytes.data(), dim_bytes) < dim_bytes) {
    file.fail("truncated: the file ends inside the " + std::to_string(header.rank) + " header dimensions");
  }
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t data_values = 1;
  for (std::size_t i = 0; i < static_cast<std::size_t>(header.rank); ++i) {
    header.dims[i] = load_be32(bytes.data() + 4 * i);
  }
  for (int d = 0; d < header.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (header.dims[i] == 0) {
      file.fail("dimension " + std::to_string(d) + " of " + header.dims_string() +
                " is 0; an IDX file must hold at least one item of at least one value");
    }
    // Each factor is < 2^32, so checking before multiplying keeps every product exact.
    if (data_values > max / header.value_bytes() / header.dims[i]) {
      file.fail("the header dimensions " + header.dims_string() + " overflow 64-bit sizes; the file is corrupt");
    }
    data_values *= header.dims[i];
    if (d > 0) header.item_values *= header.dims[i];
  }
  header.data_bytes = data_values * header.value_bytes();
  return header;
}

// Reads the header's data, converting each value (its value_bytes() big-endian bytes) with convert,
// and checks that the data ends exactly there. A raw file's length is checked against the header
// before anything is reserved; gzipped data is buffered as it inflates, so memory follows the bytes
// actually present, never the header's promise.
template <class T, class Convert>
std::vector<T> read_idx_data(IdxFile& file, const IdxHeader& header, Convert convert) {
  const auto size_error = [&](std::uint64_t got, bool exact) {
    const std::string promise = "the header " + header.dims_string() + " promises " +
                                std::to_string(header.data_bytes) + " data bytes but ";
    if (got < header.data_bytes) {
      file.fail("truncated: " + promise + "only " + std::to_string(got) +
                " follow it; the file is incomplete, download it again");
    }
    file.fail("trailing bytes: " + promise + (exact ? std::to_string(got) : std::string("more")) +
              " follow it; the header dimensions are wrong or another file was appended");
  };
  std::vector<unsigned char> bytes;
  if (const auto remaining = file.remaining()) {
    if (*remaining != header.data_bytes) size_error(*remaining, true);
    bytes.reserve(static_cast<std::size_t>(header.data_bytes));
  }
  while (bytes.size() < header.data_bytes) {
    const std::size_t done = bytes.size();
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(idx_chunk, header.data_bytes - done));
    bytes.resize(done + want);
    const std::size_t got = file.read(bytes.data() + done, want);
    if (got < want) size_error(done + got, true);
  }
  unsigned char extra = 0;
  if (file.read(&extra, 1) != 0) size_error(header.data_bytes + 1, false);
  const std::size_t value_bytes = header.value_bytes();
  std::vector<T> out(bytes.size() / value_bytes);
  for (std::size_t v = 0; v < out.size(); ++v) out[v] = convert(bytes.data() + v * value_bytes);
  return out;
}

// The end of a message about a file of the wrong kind: the pair given the wrong way round.
inline std::string swapped_paths(const std::filesystem::path& images, const std::filesystem::path& labels) {
  return "; are the two paths swapped? images were given as '" + images.string() + "' and labels as '" +
         labels.string() + "': pass the image file first";
}

// Fails when the header read as images' is a label file's: one dimension (N) of unsigned bytes.
// Called when the items do not fit the requested shape, so one-value items stay loadable.
inline void check_not_labels(const IdxFile& image_file, const IdxHeader& header, const std::filesystem::path& images,
                             const std::filesystem::path& labels) {
  if (header.rank == 1 && header.type == 0x08)
    image_file.fail("this looks like a label file (one dimension " + header.dims_string() +
                    " of unsigned bytes), not images" + swapped_paths(images, labels));
}

// The labels of an IDX label file that must hold `count` items (the images of the file `images`),
// each in [0, num_classes) when num_classes > 0.
inline std::vector<int> read_idx_labels(const std::filesystem::path& labels, const std::filesystem::path& images,
                                        std::uint64_t count, int num_classes) {
  IdxFile label_file(labels);
  const IdxHeader label_header = read_idx_header(label_file, IdxKind::labels);
  if (label_header.rank != 1) {
    label_file.fail("the header " + label_header.dims_string() + " has " + std::to_string(label_header.rank) +
                    " dimensions but IDX labels have exactly 1 (N): this looks like an image file" +
                    swapped_paths(images, labels));
  }
  if (count != label_header.count()) {
    throw IoError(IdxFile::where_of(images) + " holds " + std::to_string(count) + " images but '" + labels.string() +
                  "' holds " + std::to_string(label_header.count()) +
                  " labels; pass the matching pair (train-images with train-labels, t10k-images with t10k-labels)");
  }
  std::vector<int> classes =
      read_idx_data<int>(label_file, label_header, [](const unsigned char* p) { return int{*p}; });
  if (num_classes > 0) {
    const auto bad = std::find_if(classes.begin(), classes.end(), [&](int c) { return c >= num_classes; });
    if (bad != classes.end())
      label_file.fail("label " + std::to_string(*bad) + " of item " + std::to_string(bad - classes.begin()) +
                      " is outside [0, " + std::to_string(num_classes) + "); is this the label file of a dataset with " +
                      std::to_string(num_classes) + " classes?");
  }
  return classes;
}

// The requested shape as the user spells it: "etnn::Shape<1, 28, 28>".
template <ShapeType S>
std::string shape_name() {
  std::string name = "etnn::Shape" + S::to_string();
  std::replace(name.begin(), name.end(), '(', '<');
  std::replace(name.begin(), name.end(), ')', '>');
  return name;
}

// Fails unless the image file's items hold S::size values; with the label file's path (labels
// non-null) it first says so when the two look swapped.
template <ShapeType S>
void check_item_shape(const IdxFile& image_file, const IdxHeader& header, const std::filesystem::path& images,
                      const std::filesystem::path* labels) {
  if (header.item_values == S::size) return;
  if (labels != nullptr) check_not_labels(image_file, header, images, *labels);
  image_file.fail("items are " + header.item_string() + " values but the requested shape " + shape_name<S>() +
                  " has " + std::to_string(S::size) + "; request a shape of that many values, e.g. etnn::Shape<" +
                  std::to_string(header.item_values) + ">");
}

// One IDX value as a feature: an unsigned byte x becomes x / 255, a float32 is kept.
inline float idx_feature(const IdxHeader& header, const unsigned char* p) noexcept {
  return header.type == 0x08 ? static_cast<float>(*p) / 255.0f : std::bit_cast<float>(load_be32(p));
}

// Every value of the image file, after its header, as features.
inline std::vector<float> read_idx_features(IdxFile& image_file, const IdxHeader& header) {
  return read_idx_data<float>(image_file, header, [&](const unsigned char* p) { return idx_feature(header, p); });
}

// Fails unless `targets` holds one row of target_size<Y> values for each of the `count` items of
// the image file, each fitting its kind (and, for class indices with num_classes > 0, below it).
template <TargetKind Y>
void check_idx_targets(const IdxFile& image_file, std::span<const target_value<Y>> targets, std::uint64_t count,
                       int num_classes) {
  if (targets.size() != count * target_size<Y>)
    image_file.fail("holds " + std::to_string(count) + " images but " + std::to_string(targets.size()) +
                    " target values were given; pass " + std::to_string(target_size<Y>) + " per image");
  const int classes = check_targets<Y>(targets, "etnn::data::load_idx_with_targets");
  if (num_classes > 0 && classes > num_classes)
    image_file.fail("a label is " + std::to_string(classes - 1) + ", outside [0, " + std::to_string(num_classes) +
                    "); pass labels below num_classes");
}

}  // namespace etnn::data::detail

namespace etnn::data {

// A Dataset<S> from an IDX image file and an IDX label file of the same length, each raw or gzipped.
// With num_classes > 0 every label must lie in [0, num_classes) (10 for MNIST and Fashion-MNIST).
// Throws etnn::IoError naming the file for anything missing, malformed or inconsistent.
template <ShapeType S>
Dataset<S> load_idx(const std::filesystem::path& images, const std::filesystem::path& labels, int num_classes = 0) {
  detail::IdxFile image_file(images);
  const detail::IdxHeader image_header = detail::read_idx_header(image_file, detail::IdxKind::images);
  detail::check_item_shape<S>(image_file, image_header, images, &labels);
  std::vector<float> features = detail::read_idx_features(image_file, image_header);
  std::vector<int> classes = detail::read_idx_labels(labels, images, image_header.count(), num_classes);
  return Dataset<S>(std::move(features), std::move(classes));
}

// A Dataset<S, Y> from an IDX image file and targets of the kind Y given in memory, one row of
// target_size<Y> values per image, e.g. real values computed for each image:
//   auto data = etnn::data::load_idx_with_targets<etnn::Shape<784>, etnn::Shape<1>>(images, std::move(t));
template <ShapeType S, class Y>
Dataset<S, Y> load_idx_with_targets(const std::filesystem::path& images, std::vector<target_value<Y>> targets) {
  detail::IdxFile image_file(images);
  const detail::IdxHeader image_header = detail::read_idx_header(image_file, detail::IdxKind::images);
  detail::check_item_shape<S>(image_file, image_header, images, nullptr);
  detail::check_idx_targets<Y>(image_file, targets, image_header.count(), 0);
  return Dataset<S, Y>(detail::read_idx_features(image_file, image_header), std::move(targets));
}

}  // namespace etnn::data
