// load_idx: valid raw, float32 and gzipped files, every malformed case, and the real Fashion-MNIST test set.
// Built three ways (tests/CMakeLists.txt): zlib linked (ETNN_WITH_ZLIB=1), zlib loaded at run time
// (no macro, no -lz) and without zlib (ETNN_WITH_ZLIB=0); the gzip files are made here without
// zlib, so every build makes the same ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <etnn/data/data.hpp>

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

// A fresh directory under the system temp dir, removed with its files at scope exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("etnn_test_idx_" + std::to_string(std::random_device{}()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  fs::path operator/(const std::string& name) const { return path / name; }
};

void put_be32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(v >> shift));
}

// An IDX file: 0x00 0x00 type ndims, the dims big-endian, then data.
Bytes idx(unsigned char type, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes out{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

fs::path write(const fs::path& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  return path;
}

#if defined(ETNN_ZLIB_LINKED) || defined(ETNN_ZLIB_LOADED)
constexpr bool has_gzip = true;
#else
constexpr bool has_gzip = false;
#endif

std::uint32_t crc32(const Bytes& bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_le32(Bytes& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<unsigned char>(v >> shift));
}

// `bytes` as one gzip member of stored (uncompressed) deflate blocks of at most 65535 bytes, as
// RFC 1951 and 1952 define them: valid gzip that takes no zlib to write.
Bytes gzip(const Bytes& bytes) {
  Bytes out{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};  // magic, deflate, no flags, no time, unknown OS
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 65535);
    const bool last = at + n == bytes.size();
    out.push_back(last ? 1 : 0);  // BFINAL, BTYPE 00 (stored), then byte-aligned
    out.push_back(static_cast<unsigned char>(n)), out.push_back(static_cast<unsigned char>(n >> 8));
    out.push_back(static_cast<unsigned char>(~n)), out.push_back(static_cast<unsigned char>(~n >> 8));
    out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
               bytes.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  } while (at < bytes.size());
  put_le32(out, crc32(bytes));
  put_le32(out, static_cast<std::uint32_t>(bytes.size()));
  return out;
}

fs::path write_gz(const fs::path& path, const Bytes& bytes) { return write(path, gzip(bytes)); }

// The message of the etnn::IoError that f throws; fails the test when it throws nothing.
template <class F>
std::string io_error(F&& f) {
  try {
    f();
  } catch (const etnn::IoError& e) {
    return e.what();
  }
  FAIL("expected an etnn::IoError");
  return {};
}

// 3 items of 2x2 pixels and their labels.
const Bytes pixels{0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
const Bytes classes{2, 0, 1};

struct ValidPair {
  TempDir dir;
  fs::path images = write(dir / "images-idx3-ubyte", idx(0x08, {3, 2, 2}, pixels));
  fs::path labels = write(dir / "labels-idx1-ubyte", idx(0x08, {3}, classes));
};

template <class S>
void check_valid(const etnn::data::Dataset<S>& data) {
  REQUIRE(data.size() == 3);
  CHECK(data.num_classes() == 3);
  REQUIRE(data.features().size() == pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) CHECK(data.features()[i] == static_cast<float>(pixels[i]) / 255.0f);
  CHECK(data.sample(1)[0] == 1.0f / 255.0f);
  CHECK(data.features()[1] == 1.0f);
  for (std::size_t i = 0; i < classes.size(); ++i) CHECK(data.label(i) == classes[i]);
}

}  // namespace

TEST_CASE("load_idx reads unsigned-byte images as x / 255 for any shape of the item size") {
  ValidPair files;
  check_valid(etnn::data::load_idx<etnn::Shape<4>>(files.images, files.labels));
  check_valid(etnn::data::load_idx<etnn::Shape<1, 2, 2>>(files.images, files.labels));
  check_valid(etnn::data::load_idx<etnn::Shape<2, 2>>(files.images, files.labels));
}

TEST_CASE("load_idx keeps float32 images as stored") {
  TempDir dir;
  const std::vector<float> values{1.5f, -2.0f, 0.25f, 1e6f, 0.0f, -0.125f};
  Bytes data;
  for (float v : values) put_be32(data, std::bit_cast<std::uint32_t>(v));
  const auto images = write(dir / "images", idx(0x0D, {2, 3}, data));
  const auto labels = write(dir / "labels", idx(0x08, {2}, {7, 3}));
  const auto set = etnn::data::load_idx<etnn::Shape<3>>(images, labels);
  REQUIRE(set.size() == 2);
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(set.features()[i] == values[i]);
  CHECK(set.label(0) == 7);
  CHECK(set.num_classes() == 8);
}

TEST_CASE("load_idx inflates gzipped files, by name or by magic" * doctest::skip(!has_gzip)) {
  TempDir dir;
  const auto images = write_gz(dir / "images-idx3-ubyte.gz", idx(0x08, {3, 2, 2}, pixels));
  const auto labels = write_gz(dir / "labels-gzipped-without-suffix", idx(0x08, {3}, classes));
  check_valid(etnn::data::load_idx<etnn::Shape<1, 2, 2>>(images, labels));
  // The same images compressed (fixed Huffman codes) by Python's gzip.compress(..., mtime=0).
  const auto compressed =
      write(dir / "compressed.gz", {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60, 0xe0, 0x60,
                                    0x66, 0x60, 0x60, 0x00, 0x61, 0x26, 0x30, 0xfe, 0x6f, 0x9c, 0xc6, 0xc8, 0xc4, 0xcc,
                                    0xc2, 0x25, 0x22, 0xa7, 0x01, 0x00, 0xe2, 0xa0, 0x0b, 0x24, 0x1c, 0x00, 0x00, 0x00});
  check_valid(etnn::data::load_idx<etnn::Shape<4>>(compressed, labels));
  // Members concatenated (`cat a.gz b.gz`) read as one stream, as gzip -d reads them.
  const Bytes whole = idx(0x08, {3, 2, 2}, pixels);
  Bytes members = gzip(Bytes(whole.begin(), whole.begin() + 10));
  const Bytes rest = gzip(Bytes(whole.begin() + 10, whole.end()));
  members.insert(members.end(), rest.begin(), rest.end());
  check_valid(etnn::data::load_idx<etnn::Shape<4>>(write(dir / "members.gz", members), labels));
  // Over several stored blocks and several of the reader's chunks.
  Bytes big(70000 * 4);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 7919 % 251);
  const auto big_images = write_gz(dir / "big.gz", idx(0x08, {70000, 4}, big));
  const auto big_labels = write_gz(dir / "big-labels.gz", idx(0x08, {70000}, Bytes(70000, 3)));
  const auto set = etnn::data::load_idx<etnn::Shape<4>>(big_images, big_labels);
  REQUIRE(set.size() == 70000);
  CHECK(set.features()[279999] == static_cast<float>(big[279999]) / 255.0f);
}

TEST_CASE("load_idx rejects corrupt, truncated and overlong gzip streams" * doctest::skip(!has_gzip)) {
  TempDir dir;
  Bytes data(400);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7919 % 251);
  const auto labels = write(dir / "labels", idx(0x08, {100}, Bytes(100, 1)));
  const Bytes gz = gzip(idx(0x08, {100, 2, 2}, data));
  CHECK_NOTHROW(etnn::data::load_idx<etnn::Shape<4>>(write(dir / "good.gz", gz), labels));
  const auto error = [&](const std::string& name, const Bytes& bytes) {
    const std::string message = io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(write(dir / name, bytes), labels); });
    CHECK(message.find(name) != std::string::npos);
    return message;
  };

  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF;  // the CRC-32 of the gzip trailer
  CHECK(error("bad_crc.gz", bad_crc).find("corrupt gzip data (zlib: incorrect data check)") != std::string::npos);
  Bytes bad_block = gz;
  bad_block[10] = 7;  // BTYPE 11, reserved
  CHECK(error("bad_block.gz", bad_block).find("corrupt gzip data (zlib: invalid block type)") != std::string::npos);
  Bytes garbage = gz;
  garbage.push_back('x'), garbage.push_back('y');  // bytes after the member that start no other member
  CHECK(error("garbage.gz", garbage).find("corrupt gzip data (zlib: incorrect header check)") != std::string::npos);

  const std::string cut = error("cut.gz", Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
  CHECK(cut.find("truncated gzip data: the file ends inside the compressed stream") != std::string::npos);
  CHECK(error("empty.gz", {}).find("truncated gzip data") != std::string::npos);

  const auto trailing = write_gz(dir / "trailing.gz", idx(0x08, {100, 2, 2}, Bytes(401, 0)));
  CHECK(io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(trailing, labels); }).find("trailing bytes") !=
        std::string::npos);

  // A header promising ~4e9 one-value items from a tiny stream fails without allocating for them.
  const auto huge = write_gz(dir / "huge.gz", idx(0x08, {0xFFFFFFFFu}, Bytes(10, 0)));
  const auto huge_labels = write(dir / "huge_labels", idx(0x08, {0xFFFFFFFFu}, {}));
  CHECK(io_error([&] { etnn::data::load_idx<etnn::Shape<1>>(huge, huge_labels); }).find("truncated") !=
        std::string::npos);
}

TEST_CASE("load_idx without zlib names the fix for gzipped files" * doctest::skip(has_gzip)) {
  TempDir dir;
  const auto images = write_gz(dir / "images.gz", idx(0x08, {3, 2, 2}, pixels));
  const auto labels = write(dir / "labels", idx(0x08, {3}, classes));
  const std::string message = io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(images, labels); });
  INFO(message);
  CHECK(message.find("images.gz': the file is gzipped and this program was compiled with -DETNN_WITH_ZLIB=0") !=
        std::string::npos);
  CHECK(message.find("-DETNN_WITH_ZLIB=1 -lz") != std::string::npos);
  CHECK(message.find("gunzip the file") != std::string::npos);
}

#if defined(ETNN_ZLIB_LOADED)
TEST_CASE("zlib loaded at run time: a missing or wrong library names the fix") {
  const std::string missing = etnn::data::detail::load_zlib("libz-missing.so.1").error;
  INFO(missing);
  CHECK(missing.find("zlib could not be loaded at run time (libz-missing.so.1") != std::string::npos);
  CHECK(missing.find("apt-get install zlib1g") != std::string::npos);
  CHECK(missing.find("-DETNN_WITH_ZLIB=1 -lz") != std::string::npos);
  const std::string wrong = etnn::data::detail::load_zlib("libm.so.6").error;
  INFO(wrong);
  CHECK(wrong.find("libm.so.6 lacks zlib's inflate functions") != std::string::npos);
  CHECK(etnn::data::detail::load_zlib(etnn::data::detail::zlib_library).error.empty());
}
#endif

TEST_CASE("load_idx names the file and the problem for every malformed input") {
  TempDir dir;
  ValidPair valid;
  // Loads `images` (an IDX image file's bytes) with the valid labels, as Shape<S...>.
  const auto error = [&]<class S = etnn::Shape<4>>(const Bytes& images, S = {}) {
    const auto path = write(dir / "bad-images", images);
    return io_error([&] { etnn::data::load_idx<S>(path, valid.labels); });
  };
  const auto has = [](const std::string& message, const std::string& part) {
    INFO(message);
    CHECK(message.find(part) != std::string::npos);
  };

  Bytes short_data = pixels;
  short_data.pop_back();
  const std::string truncated = error(idx(0x08, {3, 2, 2}, short_data));
  has(truncated, "truncated: the header (3, 2, 2) promises 12 data bytes but only 11 follow it");
  has(truncated, "bad-images");
  Bytes long_data = pixels;
  long_data.push_back(0);
  has(error(idx(0x08, {3, 2, 2}, long_data)), "trailing bytes: the header (3, 2, 2) promises 12 data bytes but 13");
  has(error({0, 0, 8}), "truncated: shorter than the 4-byte IDX magic");
  has(error({0, 0, 8, 3, 0, 0, 0, 3, 0}), "truncated: the file ends inside the 3 header dimensions");
  has(error({'P', 'K', 8, 3}), "wrong magic: the file starts with 0x50 0x4B");
  has(error(idx(0x0B, {3, 2, 2}, pixels)), "unsupported type byte 0x0B");
  has(error(idx(0x08, {}, {})), "the header has 0 dimensions but IDX images have 1 to 4");
  has(error(idx(0x08, {3, 1, 1, 2, 2}, pixels)), "the header has 5 dimensions");
  has(error(idx(0x08, {3, 0, 2}, {})), "dimension 1 of (3, 0, 2) is 0");
  has(error(idx(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}), etnn::Shape<1>{}), "overflow 64-bit sizes");
  has(error(idx(0x08, {3, 2, 2}, pixels), etnn::Shape<3>{}),
      "items are 2x2 = 4 values but the requested shape etnn::Shape<3> has 3");
  has(error(idx(0x08, {3, 2, 2}, pixels), etnn::Shape<1, 28, 28>{}),
      "items are 2x2 = 4 values but the requested shape etnn::Shape<1, 28, 28> has 784");
  has(error(idx(0x08, {2, 2, 2}, Bytes(8, 0))),
      "holds 2 images but '" + valid.labels.string() + "' holds 3 labels");

  // Label files: one dimension of type 0x08.
  const auto labels_error = [&](const Bytes& labels) {
    const auto path = write(dir / "bad-labels", labels);
    return io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(valid.images, path); });
  };
  has(labels_error(idx(0x08, {3, 2, 2}, pixels)),
      "bad-labels': the header (3, 2, 2) has 3 dimensions but IDX labels have exactly 1 (N): this looks like an "
      "image file; are the two paths swapped?");
  has(labels_error(idx(0x08, {3, 1, 1, 2, 2}, pixels)), "the header has 5 dimensions but IDX labels have exactly 1 (N)");
  has(labels_error(idx(0x0D, {3}, Bytes(12, 0))), "unsupported type byte 0x0D; etnn reads labels of type 0x08");
  has(labels_error(idx(0x08, {3}, {1, 2})), "truncated");
  // The pair the wrong way round: the label file is seen first when the requested items are not
  // one value, the image file (as labels) when they are.
  const std::string both_paths = "are the two paths swapped? images were given as '" + valid.labels.string() +
                                 "' and labels as '" + valid.images.string() + "': pass the image file first";
  const std::string swapped = io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(valid.labels, valid.images); });
  has(swapped, "load_idx: '" + valid.labels.string() +
                   "': this looks like a label file (one dimension (3) of unsigned bytes), not images; " + both_paths);
  CHECK(swapped.find("request a shape") == std::string::npos);
  const std::string swapped_one = io_error([&] { etnn::data::load_idx<etnn::Shape<1>>(valid.labels, valid.images); });
  has(swapped_one, "load_idx: '" + valid.images.string() + "': the header (3, 2, 2) has 3 dimensions");
  has(swapped_one, "this looks like an image file; " + both_paths);
  // Labels outside the number of classes the caller names.
  const auto out_of_range = write(dir / "ten-classes", idx(0x08, {3}, {2, 12, 1}));
  has(io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(valid.images, out_of_range, 10); }),
      "label 12 of item 1 is outside [0, 10)");
  CHECK(etnn::data::load_idx<etnn::Shape<4>>(valid.images, valid.labels, 3).num_classes() == 3);

  // ~4e9 promised one-value items in a 16-byte file: refused before anything is reserved for them.
  const auto huge_labels = write(dir / "huge-labels", idx(0x08, {0xFFFFFFFFu}, {}));
  const auto huge = write(dir / "huge-images", idx(0x08, {0xFFFFFFFFu}, {1, 2, 3, 4, 5, 6, 7, 8}));
  has(io_error([&] { etnn::data::load_idx<etnn::Shape<1>>(huge, huge_labels); }),
      "truncated: the header (4294967295) promises 4294967295 data bytes but only 8 follow it");

  const std::string missing = io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(dir / "nope", valid.labels); });
  has(missing, "cannot read the file");
  has(missing, "nope");
  has(io_error([&] { etnn::data::load_idx<etnn::Shape<4>>(dir.path, valid.labels); }), "cannot read the file");
}

TEST_CASE("load_idx reads the Fashion-MNIST test set when it is installed") {
  const fs::path root = "/usr/share/datasets/fashion-mnist";
  const fs::path images = root / "t10k-images-idx3-ubyte.gz";
  const fs::path labels = root / "t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images) || !fs::exists(labels)) {
    MESSAGE("skipped: " << images << " not found (install dataset-fashion-mnist)");
    return;
  }
  if (!has_gzip) {
    MESSAGE("skipped: the Fashion-MNIST files are gzipped and this build has no zlib");
    return;
  }
  const auto test = etnn::data::load_idx<etnn::Shape<1, 28, 28>>(images, labels);
  CHECK(test.size() == 10000);
  CHECK(test.num_classes() == 10);
  CHECK(std::ranges::all_of(test.labels(), [](int label) { return label >= 0 && label <= 9; }));
  CHECK(test.label(0) == 9);  // the first test image is an ankle boot
  const auto [lo, hi] = std::ranges::minmax(test.features());
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
  CHECK(etnn::data::mean(test) == doctest::Approx(0.2868).epsilon(0.001));
  CHECK(etnn::data::stddev(test) == doctest::Approx(0.3524).epsilon(0.001));
  CHECK(io_error([&] { etnn::data::load_idx<etnn::Shape<28, 29>>(images, labels); })
            .find("items are 28x28 = 784 values but the requested shape etnn::Shape<28, 29> has 812") !=
        std::string::npos);
}
