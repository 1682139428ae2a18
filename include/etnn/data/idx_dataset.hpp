#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// IdxDataset<S, Y>: an IDX image file (raw or gzipped, as load_idx reads it) with targets of the
// kind Y (data/targets.hpp), whose features stay on disk when they would take more memory than a
// cap: each sample is then read by offset (pread at header + i * item bytes) when a DataLoader
// gathers it. Below the cap it is loaded whole, as load_idx loads it. Either way a DataLoader gives
// the same batches, bit for bit.
//   etnn::data::IdxDataset<etnn::Shape<1, 28, 28>> train(images, labels, {.num_classes = 10,
//                                                        .memory_cap = 256 << 20});
//   train.normalize(etnn::data::mean(train), etnn::data::stddev(train));   // one pass over the file
//   etnn::data::DataLoader loader(train, {.batch = 64, .shuffle = true});
//   etnn::data::IdxDataset<etnn::Shape<784>, etnn::Shape<1>> scores(images, std::move(values));
// Class indices come from an IDX label file or from memory; other targets from memory (one row of
// target_size<Y> values per image). Targets are always in memory. A gzipped image file that must stream is
// inflated once into an unnamed temporary file (deleted when the dataset is), since compressed data
// cannot be read by offset.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"
#include "idx.hpp"

namespace etnn::data {

struct IdxOptions {
  int num_classes = 0;                         // > 0: every label must lie in [0, num_classes)
  std::uint64_t memory_cap = std::uint64_t{1} << 30;  // bytes of float features kept in memory at most
};

template <ShapeType S, class Y = ClassIndices>
class IdxDataset {
  static_assert(check::target_kind<TargetKind<Y>>());

 public:
  using shape = S;
  using target_kind = Y;
  using target_type = target_value<Y>;

  // Class indices from an IDX label file of the same length.
  IdxDataset(const std::filesystem::path& images, const std::filesystem::path& labels, IdxOptions options = {})
    requires class_targets<Y>
  {
    detail::IdxFile image_file(images);
    header_ = detail::read_idx_header(image_file, detail::IdxKind::images);
    detail::check_item_shape<S>(image_file, header_, images, &labels);
    open(images, image_file, detail::read_idx_labels(labels, images, header_.count(), options.num_classes), options);
  }

  // Targets given in memory: target_size<Y> values per image (class indices below
  // options.num_classes when that is > 0).
  IdxDataset(const std::filesystem::path& images, std::vector<target_type> targets, IdxOptions options = {}) {
    detail::IdxFile image_file(images);
    header_ = detail::read_idx_header(image_file, detail::IdxKind::images);
    detail::check_item_shape<S>(image_file, header_, images, nullptr);
    detail::check_idx_targets<Y>(image_file, targets, header_.count(), options.num_classes);
    open(images, image_file, std::move(targets), options);
  }

  std::size_t size() const noexcept { return targets().size() / target_size<Y>; }
  std::span<const target_type> targets() const noexcept { return in_memory_ ? in_memory_->targets() : targets_; }
  // First of the target_size<Y> target values of sample i.
  const target_type* target(std::size_t i) const noexcept { return targets().data() + i * target_size<Y>; }
  int label(std::size_t i) const noexcept
    requires class_targets<Y>
  {
    return targets()[i];
  }
  int num_classes() const noexcept
    requires class_targets<Y>
  {
    return in_memory_ ? in_memory_->num_classes() : num_classes_;
  }
  std::span<const int> labels() const noexcept
    requires class_targets<Y>
  {
    return targets();
  }
  // True when samples are read from disk as they are needed.
  bool streaming() const noexcept { return !in_memory_; }

  // The S::size values of sample i (normalised if normalize() was called), into out. Safe to call
  // from several threads at once.
  void copy_sample(std::size_t i, float* out) const {
    if (in_memory_) {
      std::copy_n(in_memory_->sample(i), S::size, out);
      return;
    }
    std::array<unsigned char, S::size * 4> bytes;
    const std::size_t n = S::size * header_.value_bytes();
    const auto offset = static_cast<off_t>(data_offset_ + i * n);
    for (std::size_t done = 0; done < n;) {
      const ssize_t got = ::pread(fileno(file_.get()), bytes.data() + done, n - done, offset + static_cast<off_t>(done));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        throw IoError(where_ + ": cannot read sample " + std::to_string(i) + " (" +
                      (got < 0 ? std::string(std::strerror(errno)) : std::string("unexpected end of file")) +
                      "); was the file changed while training?");
      }
      done += static_cast<std::size_t>(got);
    }
    for (std::size_t v = 0; v < S::size; ++v) {
      const float x = detail::idx_feature(header_, bytes.data() + v * header_.value_bytes());
      out[v] = normalized_ ? (x - mean_) / stddev_ : x;
    }
  }

  // x = (x - mean) / stddev, as Dataset::normalize (applied as samples are read when streaming).
  void normalize(float mean, float stddev) {
    if (in_memory_) return in_memory_->normalize(mean, stddev);
    detail::check_normalization(mean, stddev, "etnn::data::IdxDataset::normalize");
    if (normalized_) {
      throw Error("etnn::data::IdxDataset::normalize: a streamed dataset is normalised once; "
                  "combine the statistics into one call");
    }
    mean_ = mean, stddev_ = stddev, normalized_ = true;
  }

 private:
  // The image file, its header read and checked, with checked targets: loaded whole when its
  // features fit the memory cap, else streamed.
  void open(const std::filesystem::path& images, detail::IdxFile& image_file, std::vector<target_type> targets,
            const IdxOptions& options) {
    if (header_.count() * S::size * sizeof(float) <= options.memory_cap) {
      in_memory_ = Dataset<S, Y>(detail::read_idx_features(image_file, header_), std::move(targets));
      return;
    }
    targets_ = std::move(targets);
    num_classes_ = check_targets<Y>(targets_, "etnn::data::IdxDataset");
    open_stream(images, image_file);
  }

  // A raw file is read in place after its header; gzipped data is inflated into a temporary file.
  void open_stream(const std::filesystem::path& images, detail::IdxFile& image_file) {
    where_ = image_file.where();
    if (const auto remaining = image_file.remaining()) {
      if (*remaining != header_.data_bytes)
        image_file.fail("the header " + header_.dims_string() + " promises " + std::to_string(header_.data_bytes) +
                        " data bytes but " + std::to_string(*remaining) + " follow it; the file is damaged");
      file_ = open_for_reading(images);
      data_offset_ = 4 + 4 * static_cast<std::uint64_t>(header_.rank);
    } else {
      file_ = UniqueFile(std::tmpfile());
      if (!file_) image_file.fail("cannot create a temporary file to inflate into (" + std::string(std::strerror(errno)) + ")");
      std::array<unsigned char, detail::idx_chunk> chunk;
      std::uint64_t written = 0;
      while (written < header_.data_bytes) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), header_.data_bytes - written));
        const std::size_t got = image_file.read(chunk.data(), want);
        if (got < want) image_file.fail("truncated: the gzipped data ends before the header's " + header_.dims_string());
        if (std::fwrite(chunk.data(), 1, got, file_.get()) != got || std::fflush(file_.get()) != 0)
          image_file.fail("cannot write the inflated data to a temporary file (" + std::string(std::strerror(errno)) + ")");
        written += got;
      }
      unsigned char extra = 0;
      if (image_file.read(&extra, 1) != 0) image_file.fail("trailing bytes after the header's " + header_.dims_string());
      data_offset_ = 0;
    }
    if (!file_) image_file.fail("cannot open the file again to stream it (" + std::string(std::strerror(errno)) + ")");
  }

  std::optional<Dataset<S, Y>> in_memory_;  // below the cap: everything, as load_idx gives it
  detail::IdxHeader header_;
  std::vector<target_type> targets_;        // streaming: the targets
  int num_classes_ = 0;                     // streaming class indices: the largest label + 1
  UniqueFile file_;                      // streaming: the image data
  std::uint64_t data_offset_ = 0;
  std::string where_;
  bool normalized_ = false;
  float mean_ = 0, stddev_ = 1;
};

// Mean and population standard deviation of a streamed dataset's values, in one pass each over
// the samples (in the order Dataset's versions sum, so the results are the same).
template <ShapeType S, class Y>
double mean(const IdxDataset<S, Y>& data) {
  if (data.size() == 0) throw Error("etnn::data::mean: the dataset is empty; there is no statistic to compute");
  std::array<float, S::size> x;
  double sum = 0.0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    data.copy_sample(i, x.data());
    for (float v : x) sum += v;
  }
  return sum / static_cast<double>(data.size() * S::size);
}

template <ShapeType S, class Y>
double stddev(const IdxDataset<S, Y>& data) {
  const double m = mean(data);
  std::array<float, S::size> x;
  double sum = 0.0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    data.copy_sample(i, x.data());
    for (float v : x) sum += (v - m) * (v - m);
  }
  return std::sqrt(sum / static_cast<double>(data.size() * S::size));
}

}  // namespace etnn::data
