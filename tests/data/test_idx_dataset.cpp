// IdxDataset: a dataset over the memory cap streams its samples from disk (raw files by offset,
// gzipped ones through an inflated temporary copy) and gives the DataLoader, the statistics and
// evaluate exactly what the in-memory path gives, for every kind of target.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

namespace fs = std::filesystem;

namespace {

const fs::path fashion = "/usr/share/datasets/fashion-mnist";

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("etnn_test_idx_dataset_" + std::to_string(std::random_device{}()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// An IDX file of n items of `dims` unsigned bytes, values (i * 7 + v) % 251; labels i % 10.
void write_idx(const fs::path& images, const fs::path& labels, std::uint32_t n, std::uint32_t h, std::uint32_t w) {
  const auto be32 = [](std::ofstream& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.put(static_cast<char>(v >> shift));
  };
  std::ofstream img(images, std::ios::binary), lab(labels, std::ios::binary);
  img.write("\0\0\x08\x03", 4);
  be32(img, n), be32(img, h), be32(img, w);
  lab.write("\0\0\x08\x01", 4);
  be32(lab, n);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t v = 0; v < h * w; ++v) img.put(static_cast<char>((i * 7 + v) % 251));
    lab.put(static_cast<char>(i % 10));
  }
}

// Every batch of one epoch, features and labels, from a shuffled loader.
template <class D>
std::pair<std::vector<float>, std::vector<int>> epoch_of(const D& data) {
  etnn::data::DataLoader loader(data, {.batch = 32, .shuffle = true, .seed = 9});
  loader.set_epoch(3);
  std::vector<float> x;
  std::vector<int> y;
  for (auto batch : loader) {
    x.insert(x.end(), batch.x.data(), batch.x.data() + batch.x.size());
    y.insert(y.end(), batch.y.begin(), batch.y.end());
  }
  return {x, y};
}

template <class S>
void check_same_as_in_memory(const fs::path& images, const fs::path& labels) {
  auto reference = etnn::data::load_idx<S>(images, labels, 10);
  etnn::data::IdxDataset<S> streamed(images, labels, {.num_classes = 10, .memory_cap = 0});
  etnn::data::IdxDataset<S> held(images, labels, {.num_classes = 10});
  CHECK(streamed.streaming());
  CHECK(!held.streaming());
  // By default only a streamed dataset is prefetched, and only where a CPU is free for the worker.
  const int threads = etnn::num_threads();
  for (const int t : {1, etnn::usable_cpus()}) {
    etnn::set_num_threads(t);  // without threads in the build, num_threads() stays 1
    CHECK(etnn::data::DataLoader(streamed, {.batch = 32}).prefetches() == (etnn::usable_cpus() > etnn::num_threads()));
    CHECK_FALSE(etnn::data::DataLoader(held, {.batch = 32}).prefetches());
  }
  etnn::set_num_threads(threads);
  REQUIRE(streamed.size() == reference.size());
  CHECK(streamed.num_classes() == reference.num_classes());
  // Statistics in the same order: the same doubles.
  const double mean = etnn::data::mean(reference), stddev = etnn::data::stddev(reference);
  CHECK(etnn::data::mean(streamed) == mean);
  CHECK(etnn::data::stddev(streamed) == stddev);
  reference.normalize(static_cast<float>(mean), static_cast<float>(stddev));
  streamed.normalize(static_cast<float>(mean), static_cast<float>(stddev));
  held.normalize(static_cast<float>(mean), static_cast<float>(stddev));
  const auto want = epoch_of(reference);
  CHECK(epoch_of(streamed) == want);
  CHECK(epoch_of(held) == want);
  // evaluate reads a streamed dataset by copies: the same accuracy.
  using Net = decltype(etnn::nn::input<S::dims[0], S::dims[1], S::dims[2]> >> etnn::nn::flatten >> etnn::nn::linear<10>);
  etnn::Model<Net> model(1);
  CHECK(etnn::evaluate(model, streamed, etnn::metrics::accuracy, 100) ==
        etnn::evaluate(model, reference, etnn::metrics::accuracy, 100));
}

}  // namespace

TEST_CASE("IdxDataset over its memory cap streams a raw file with the in-memory path's batches") {
  TempDir dir;
  write_idx(dir.path / "images", dir.path / "labels", 333, 5, 6);
  check_same_as_in_memory<etnn::Shape<1, 5, 6>>(dir.path / "images", dir.path / "labels");
}

TEST_CASE("IdxDataset streams a gzipped file (Fashion-MNIST's test set) with the in-memory path's batches") {
#if defined(ETNN_ZLIB_LINKED) || defined(ETNN_ZLIB_LOADED)
  const auto images = fashion / "t10k-images-idx3-ubyte.gz", labels = fashion / "t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images)) {
    MESSAGE("skipped: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  check_same_as_in_memory<etnn::Shape<1, 28, 28>>(images, labels);
#else
  MESSAGE("skipped: this build has no zlib");
#endif
}

TEST_CASE("IdxDataset reports a damaged streamed file and a bad normalisation clearly") {
  TempDir dir;
  write_idx(dir.path / "images", dir.path / "labels", 20, 2, 2);
  fs::resize_file(dir.path / "images", fs::file_size(dir.path / "images") - 1);
  CHECK_THROWS_WITH_AS((etnn::data::IdxDataset<etnn::Shape<4>>(dir.path / "images", dir.path / "labels",
                                                               {.memory_cap = 0})),
                       doctest::Contains("promises 80 data bytes but 79 follow it"), etnn::IoError);
  write_idx(dir.path / "images", dir.path / "labels", 20, 2, 2);
  etnn::data::IdxDataset<etnn::Shape<4>> data(dir.path / "images", dir.path / "labels", {.memory_cap = 0});
  CHECK_THROWS_WITH_AS(data.normalize(0.5f, 0.0f), doctest::Contains("stddev > 0"), etnn::Error);
}

TEST_CASE("IdxDataset says that swapped image and label paths look swapped, loaded whole or streamed") {
  TempDir dir;
  const fs::path images = dir.path / "images", labels = dir.path / "labels";
  write_idx(images, labels, 20, 2, 2);
  const std::string both = "are the two paths swapped? images were given as '" + labels.string() + "' and labels as '" +
                           images.string() + "': pass the image file first";
  CHECK_THROWS_WITH_AS((etnn::data::IdxDataset<etnn::Shape<4>>(labels, images)),
                       doctest::Contains(("this looks like a label file (one dimension (20) of unsigned bytes), "
                                          "not images; " + both).c_str()),
                       etnn::IoError);
  // One-value items: the images pass as such, so it is the labels, read before streaming, that tell.
  CHECK_THROWS_WITH_AS((etnn::data::IdxDataset<etnn::Shape<1>>(labels, images, {.memory_cap = 0})),
                       doctest::Contains(("this looks like an image file; " + both).c_str()), etnn::IoError);
}

TEST_CASE_TEMPLATE("every kind of target streams over the memory cap exactly as in memory", Y,
                   etnn::data::ClassIndices, etnn::Shape<2>, etnn::data::MultiHot<3>) {
  using S = etnn::Shape<1, 4, 5>;
  namespace data = etnn::data;
  TempDir dir;
  const auto images = dir.path / "images", labels = dir.path / "labels";
  write_idx(images, labels, 150, 4, 5);
  std::vector<data::target_value<Y>> targets(150 * data::target_size<Y>);
  for (std::size_t v = 0; v < targets.size(); ++v) {
    if constexpr (data::class_targets<Y>)
      targets[v] = static_cast<int>(v % 4);
    else if constexpr (data::multi_hot_targets<Y>)
      targets[v] = static_cast<float>(v % 5 == 0);
    else
      targets[v] = 0.01f * static_cast<float>(v) - 1.0f;
  }
  const auto reference = data::load_idx_with_targets<S, Y>(images, targets);
  using Dataset = data::IdxDataset<S, Y>;
  using Targets = std::vector<data::target_value<Y>>;
  const Dataset streamed(images, targets, {.memory_cap = 0}), held(images, targets);
  CHECK(streamed.streaming());
  CHECK(!held.streaming());
  REQUIRE(streamed.size() == 150);
  CHECK(etnn::data::mean(streamed) == etnn::data::mean(reference));
  // The same batches, targets with their samples, from each.
  const auto epoch = [](const auto& set) {
    data::DataLoader loader(set, {.batch = 16, .shuffle = true, .seed = 2});
    std::vector<float> x;
    std::vector<data::target_value<Y>> y;
    for (auto batch : loader) {
      x.insert(x.end(), batch.x.data(), batch.x.data() + batch.x.size());
      if constexpr (data::class_targets<Y>)
        y.insert(y.end(), batch.y.begin(), batch.y.end());
      else
        y.insert(y.end(), batch.y.data(), batch.y.data() + batch.y.size());
    }
    return std::pair(x, y);
  };
  CHECK(epoch(streamed) == epoch(reference));
  CHECK(epoch(held) == epoch(reference));
  // Refusals: a target count that does not match the images, a value that does not fit the kind.
  CHECK_THROWS_WITH_AS(Dataset(images, Targets(7), {.memory_cap = 0}),
                       doctest::Contains("holds 150 images but 7 target values were given"), etnn::IoError);
  auto bad = targets;
  if constexpr (data::class_targets<Y>)
    bad[3] = -1;
  else
    bad[3] = data::multi_hot_targets<Y> ? 0.5f : std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(Dataset(images, bad, {.memory_cap = 0}), etnn::ShapeError);
  if constexpr (data::class_targets<Y>) {
    CHECK_THROWS_WITH_AS(data::IdxDataset<S>(images, targets, {.num_classes = 3, .memory_cap = 0}),
                         doctest::Contains("a label is 3, outside [0, 3)"), etnn::IoError);
    CHECK(epoch(data::IdxDataset<S>(images, labels, {.memory_cap = 0})) != epoch(streamed));  // file labels differ
  }
}
