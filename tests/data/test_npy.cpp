// load_npy and load_npz: every dtype, format versions 1.0 to 3.0, the header syntax numpy writes,
// the target kinds and their shapes, stored, deflated and zip64 archives, and every malformed case
// with its message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <etnn/data/data.hpp>

#if defined(ETNN_ZLIB_LINKED)
#include <zlib.h>  // to deflate test data; a program with zlib loaded at run time inflates only
#endif

#include "support/files.hpp"
#include "support/numpy_files.hpp"

namespace {

using etnn::Shape;
using etnn::data::ClassIndices;
using etnn::data::MultiHot;
using etnn_test::Bytes;
using etnn_test::check_io_error;
using etnn_test::le_bytes;
using etnn_test::npy;
using etnn_test::npy_dict;
using etnn_test::npy_with_header;
using etnn_test::TempDir;
using etnn_test::write_file;
using etnn_test::zip;

const Bytes three_labels = npy("<i8", "(3,)", le_bytes<std::int64_t>({2, 0, 1}));

// load_npy<X, Y> of a features file and a targets file written from bytes.
template <class X, class Y = ClassIndices>
etnn::data::Dataset<X, Y> load(const TempDir& dir, const Bytes& x, const Bytes& y, etnn::data::NpyOptions options = {}) {
  return etnn::data::load_npy<X, Y>(write_file(dir / "x.npy", x), write_file(dir / "y.npy", y), options);
}

// Checks that loading features x (with three labels) throws an IoError naming x.npy and parts.
void check_features_error(const Bytes& x, std::initializer_list<std::string_view> parts) {
  TempDir dir;
  check_io_error([&] { load<Shape<2>>(dir, x, three_labels); }, {"etnn::data::load_npy: '", "x.npy'"});
  check_io_error([&] { load<Shape<2>>(dir, x, three_labels); }, parts);
}

template <class T>
void check_feature_dtype(const char* descr, std::initializer_list<T> values) {
  CAPTURE(descr);
  TempDir dir;
  const auto data = load<Shape<2>>(dir, npy(descr, "(3, 2)", le_bytes<T>(values)), three_labels);
  REQUIRE(data.size() == 3);
  std::size_t i = 0;
  for (T v : values) CHECK(data.features()[i++] == static_cast<float>(v));
  CHECK(data.labels()[0] == 2);
}

template <class T>
void check_label_dtype(const char* descr, std::initializer_list<T> labels) {
  CAPTURE(descr);
  TempDir dir;
  const Bytes x = npy("<f4", "(3, 2)", le_bytes<float>({0, 1, 2, 3, 4, 5}));
  const auto data = load<Shape<2>>(dir, x, npy(descr, "(3,)", le_bytes<T>(labels)));
  std::size_t i = 0;
  for (T v : labels) CHECK(data.labels()[i++] == static_cast<int>(v));
}

}  // namespace

TEST_CASE("load_npy reads every supported dtype as features, converted to float") {
  check_feature_dtype<float>("<f4", {0.5f, -1.25f, 3e38f, 1e-30f, 0.0f, 7.0f});
  check_feature_dtype<double>("<f8", {0.1, -2.5, 1e30, 0.0, 1.0 / 3.0, 5.0});
  check_feature_dtype<std::int8_t>("|i1", {-128, 127, 0, 1, -1, 5});
  check_feature_dtype<std::int16_t>("<i2", {-32768, 32767, 0, 1, -1, 300});
  check_feature_dtype<std::int32_t>("<i4", {std::numeric_limits<std::int32_t>::min(), 16777217, 0, 1, -1, 70000});
  check_feature_dtype<std::int64_t>("<i8", {std::numeric_limits<std::int64_t>::max(), -5, 0, 1, 1 << 30, 9});
  check_feature_dtype<std::uint8_t>("|u1", {0, 255, 1, 2, 3, 4});
  check_feature_dtype<std::uint16_t>("<u2", {0, 65535, 1, 2, 3, 4});
  check_feature_dtype<std::uint32_t>("<u4", {0, 4294967295u, 1, 2, 3, 4});
  check_feature_dtype<std::uint64_t>("<u8", {0, std::numeric_limits<std::uint64_t>::max(), 1, 2, 3, 4});
  check_feature_dtype<std::uint8_t>("|b1", {0, 1, 1, 0, 1, 1});
  check_feature_dtype<std::uint8_t>("<u1", {9, 8, 7, 6, 5, 4});  // '<' is as good as '|' for one byte
}

TEST_CASE("load_npy reads class labels of every integer dtype, bool, and floats holding whole numbers") {
  check_label_dtype<std::int8_t>("|i1", {1, 0, 127});
  check_label_dtype<std::int16_t>("<i2", {1, 0, 32767});
  check_label_dtype<std::int32_t>("<i4", {1, 0, 2147483646});
  check_label_dtype<std::int64_t>("<i8", {1, 0, 2147483646});
  check_label_dtype<std::uint8_t>("|u1", {1, 0, 255});
  check_label_dtype<std::uint16_t>("<u2", {1, 0, 65535});
  check_label_dtype<std::uint32_t>("<u4", {1, 0, 2147483646});
  check_label_dtype<std::uint64_t>("<u8", {1, 0, 2147483646});
  check_label_dtype<std::uint8_t>("|b1", {1, 0, 1});
  check_label_dtype<float>("<f4", {1.0f, 0.0f, 9.0f});
  check_label_dtype<double>("<f8", {1.0, 0.0, 2147483646.0});
}

TEST_CASE("load_npy reads format versions 1.0, 2.0 and 3.0 and the header syntax Python allows") {
  TempDir dir;
  const Bytes values = le_bytes<float>({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    CAPTURE(major);
    const auto data = load<Shape<2>>(dir, npy("<f4", "(3, 2)", values, major), three_labels);
    CHECK(data.features()[5] == 6.0f);
  }
  for (const std::string dict : {"{'shape': (3, 2), 'fortran_order': False, 'descr': '<f4'}",
                                 "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(3,2,),}",
                                 "{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 3L , 2L ) }  \n\n",
                                 "{'descr': '<f4', 'fortran_order': True, 'shape': (6,)}"}) {
    CAPTURE(dict);
    const bool flat = dict.find("(6,)") != std::string::npos;  // Fortran order of one dimension is C order
    if (flat) {
      const auto data = load<Shape<1>>(dir, npy_with_header(dict, values), npy("<i8", "(6,)", Bytes(48, 0)));
      CHECK(data.features()[5] == 6.0f);
    } else {
      CHECK(load<Shape<2>>(dir, npy_with_header(dict, values), three_labels).features()[5] == 6.0f);
    }
  }
}

TEST_CASE("load_npy accepts features as (n, X...) or flattened, and each target kind's shapes") {
  TempDir dir;
  const Bytes six = le_bytes<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Bytes two_labels = npy("<i8", "(2, 1)", le_bytes<std::int64_t>({3, 4}));
  CHECK(load<Shape<2, 3>>(dir, npy("<f4", "(2, 2, 3)", six), two_labels).label(1) == 4);
  CHECK(load<Shape<2, 3>>(dir, npy("<f4", "(2, 6)", six), two_labels).sample(1)[0] == 7.0f);
  CHECK(load<Shape<1>>(dir, npy("<f4", "(12,)", six), npy("<i8", "(12,)", Bytes(96, 0))).size() == 12);

  const Bytes x = npy("<f4", "(2, 6)", six);
  const auto real = load<Shape<6>, Shape<2>>(dir, x, npy("<f8", "(2, 2)", le_bytes<double>({0.5, -1, 2, 3})));
  CHECK(real.target(1)[0] == 2.0f);
  CHECK(load<Shape<6>, Shape<1>>(dir, x, npy("<f4", "(2,)", le_bytes<float>({0.25f, 4}))).target(0)[0] == 0.25f);
  CHECK(load<Shape<6>, Shape<2, 2>>(dir, x, npy("<f4", "(2, 4)", Bytes(32, 0))).size() == 2);
  const auto multi = load<Shape<6>, MultiHot<3>>(dir, x, npy("|b1", "(2, 3)", Bytes{1, 0, 1, 0, 0, 1}));
  CHECK(multi.target(1)[2] == 1.0f);
  CHECK(load<Shape<6>, MultiHot<3>>(dir, x, npy("|u1", "(2, 3)", Bytes{1, 0, 1, 0, 0, 1})).target(0)[0] == 1.0f);
  CHECK(load<Shape<6>>(dir, npy("<f4", "(0, 6)", {}), npy("<i8", "(0,)", {})).size() == 0);
}

TEST_CASE("load_npy names the file and the fix for a malformed or unsupported file") {
  TempDir dir;
  const Bytes values = le_bytes<float>({1, 2, 3, 4, 5, 6});
  const Bytes good = npy("<f4", "(3, 2)", values);
  check_io_error([&] { etnn::data::load_npy<Shape<2>>(dir / "missing.npy", dir / "y.npy"); },
                 {"'", "missing.npy'", "cannot read the file", "check the path"});
  check_features_error(Bytes{'h', 'e', 'l', 'l', 'o', ',', '1', '\n'}, {"not a .npy file", "np.save"});
  check_features_error(zip({{"x.npy", good}}), {"ZIP archive", "load_npz"});
  Bytes v4 = good;
  v4[6] = 4;
  check_features_error(v4, {"format version 4.0", "1.0, 2.0 and 3.0"});
  check_features_error(Bytes(good.begin(), good.begin() + 9), {"truncated", "header length"});
  Bytes long_header = good;
  long_header[8] = 0xFF;
  long_header[9] = 0x7F;
  check_features_error(long_header, {"header length 32767 runs past the end", "save it again"});
  Bytes v2_huge = npy("<f4", "(3, 2)", values, 2);
  v2_huge[11] = 0xFF;
  check_features_error(v2_huge, {"header length", "runs past the end"});

  const auto header_error = [&](const std::string& dict, std::string_view what) {
    CAPTURE(dict);
    check_features_error(npy_with_header(dict, values), {"malformed header", what, "np.save"});
  };
  header_error("{'descr': '<f4', 'fortran_order': False}", "'shape' is missing");
  header_error("{'descr': '<f4', 'shape': (3, 2)}", "'fortran_order' is missing");
  header_error("{'fortran_order': False, 'shape': (3, 2)}", "'descr' is missing");
  header_error(npy_dict("<f4", "(3, 2)") + "x", "after the closing '}'");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'extra': 1}", "unknown key 'extra'");
  header_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}", "'descr' appears twice");
  header_error("{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 2)}", "True or False");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", "(n,)");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (03, 2)}", "leading zero");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 2)}", "non-negative integer");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "64 bits");
  header_error("{'descr': '<f4, 'fortran_order': False, 'shape': (3, 2)}", "expected '}' (at character 17 of \"{'descr'");
  header_error("{'descr' '<f4', 'fortran_order': False, 'shape': (3, 2)}", "expected ':'");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)", "expected '}'");
  header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'x", "not closed");
  header_error("{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (3, 2)}", "escapes");
  header_error("['descr', '<f4']", "expected '{'");

  check_features_error(npy_with_header("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (3,)}",
                                       values),
                       {"structured array", "a['x']"});
  check_features_error(npy_with_header(npy_dict("<f4", "(3, 2)", true), values),
                       {"Fortran-ordered", "np.ascontiguousarray(a)"});
  check_features_error(npy(">f4", "(3, 2)", values), {"'>f4' is big-endian", "a.astype('<f4')"});
  check_features_error(npy(">i8", "(3, 2)", values), {"a.astype('<i8')"});
  check_features_error(npy("|O", "(3, 2)", values), {"object array", "a.astype('<f4')"});
  check_features_error(npy("<f2", "(3, 2)", values), {"dtype '<f2' is not supported", "a.astype('<f4')"});
  check_features_error(npy("<c8", "(3, 2)", values), {"dtype '<c8' is not supported"});
  check_features_error(npy("<U3", "(3, 2)", values), {"dtype '<U3' is not supported"});
  check_features_error(npy("|f4", "(3, 2)", values), {"byte order '|'", "'<f4'"});
  check_features_error(npy("=f4", "(3, 2)", values), {"byte order '='"});

  check_features_error(npy("<f4", "(4294967296, 4294967296, 16)", values), {"overflows 64-bit sizes"});
  check_features_error(npy("<f4", "(3, 2)", Bytes(values.begin(), values.end() - 1)),
                       {"truncated", "(3, 2)", "needs 24 data bytes but 23 follow"});
  Bytes longer = values;
  longer.push_back(0);
  check_features_error(npy("<f4", "(3, 2)", longer), {"trailing bytes", "needs 24 data bytes but 25 follow"});
  check_features_error(npy("|b1", "(3, 2)", Bytes{0, 1, 2, 0, 1, 1}), {"value 2", "bool byte of 2"});
  check_features_error(npy("<f8", "(3, 2)", le_bytes<double>({0, 1, 1e300, 0, 0, 0})),
                       {"value 2 (row 1, position 0) is 1e+300", "beyond float's range"});
  check_features_error(npy("<f4", "(3, 2)", le_bytes<float>({0, 1, 2, NAN, 0, 0})),
                       {"value 3 (row 1, position 1) is nan", "allow_non_finite"});
  CHECK(std::isinf(load<Shape<2>>(dir, npy("<f4", "(3, 2)", le_bytes<float>({0, INFINITY, 0, 0, 0, 0})), three_labels,
                                  {.allow_non_finite = true})
                       .features()[1]));
  check_features_error(npy("<f4", "(3, 3)", Bytes(36, 0)),
                       {"the features have shape (3, 3)", "samples of shape (2) need (n, 2)"});
  check_features_error(npy("<f4", "(6,)", values), {"(6,)", "need (n, 2)"});
  check_features_error(npy("<f4", "()", Bytes(4, 0)), {"shape ()"});
}

TEST_CASE("load_npy checks the targets against the target kind and the features") {
  TempDir dir;
  const Bytes x = npy("<f4", "(3, 2)", le_bytes<float>({1, 2, 3, 4, 5, 6}));
  const auto targets_error = [&]<class Y = ClassIndices>(const Bytes& y, std::initializer_list<std::string_view> parts,
                                                         Y = {}) {
    check_io_error([&] { load<Shape<2>, Y>(dir, x, y); }, {"etnn::data::load_npy: '", "y.npy'"});
    check_io_error([&] { load<Shape<2>, Y>(dir, x, y); }, parts);
  };
  targets_error(npy("<i8", "(3,)", le_bytes<std::int64_t>({0, std::int64_t{1} << 40, 1})),
                {"value 1 (row 1, position 0) is 1099511627776", "outside [0, INT_MAX)"});
  targets_error(npy("<i4", "(3,)", le_bytes<std::int32_t>({0, -1, 1})), {"is -1", "outside [0, INT_MAX)"});
  targets_error(npy("<i4", "(3,)", le_bytes<std::int32_t>({0, 2147483647, 1})), {"outside [0, INT_MAX)"});
  targets_error(npy("<f8", "(3,)", le_bytes<double>({0, 1.5, 1})), {"is 1.5", "not a whole number"});
  targets_error(npy("<f4", "(3,)", le_bytes<float>({0, NAN, 1})), {"is nan", "not a whole number"});
  targets_error(npy("<i8", "(3, 2)", Bytes(48, 0)),
                {"the targets have shape (3, 2)", "class-index targets", "need (n,) or (n, 1)"});
  targets_error(npy("<i8", "(2,)", Bytes(16, 0)), {"'", "x.npy' holds 3 samples but '", "y.npy' holds 2 targets"});
  targets_error(npy("|u1", "(3, 3)", Bytes{0, 1, 0, 2, 0, 0, 1, 1, 1}), {"value 3 (row 1, position 0) is 2", "not 0 or 1"},
                MultiHot<3>{});
  targets_error(npy("|u1", "(3, 2)", Bytes(6, 0)), {"multi-hot targets (etnn::data::MultiHot<3>) need (n, 3)"},
                MultiHot<3>{});
  targets_error(npy("<f4", "(3, 2)", le_bytes<float>({0, 1, INFINITY, 0, 0, 0})), {"is inf", "targets must be finite"},
                Shape<2>{});
  targets_error(npy("<f4", "(3, 3)", Bytes(36, 0)), {"real-valued targets (2) need (n, 2)"}, Shape<2>{});
}

namespace {

template <class Y = ClassIndices>
etnn::data::Dataset<Shape<2>, Y> load_archive(const TempDir& dir, const Bytes& archive,
                                              const etnn::data::NpzOptions& options = {}) {
  return etnn::data::load_npz<Shape<2>, Y>(write_file(dir / "d.npz", archive), options);
}

void check_archive_error(const Bytes& archive, std::initializer_list<std::string_view> parts) {
  TempDir dir;
  check_io_error([&] { load_archive(dir, archive); }, {"etnn::data::load_npz: '", "d.npz'"});
  check_io_error([&] { load_archive(dir, archive); }, parts);
}

const Bytes x_npy = npy("<f8", "(3, 2)", le_bytes<double>({1, 2, 3, 4, 5, 6}));

}  // namespace

TEST_CASE("etnn::data::detail::crc32_of is ZIP's CRC-32") {
  const std::string check = "123456789";
  CHECK(etnn::data::detail::crc32_of({reinterpret_cast<const unsigned char*>(check.data()), check.size()}) == 0xCBF43926u);
}

TEST_CASE("load_npz reads stored, zip64 and named members, and lists the members when one is missing") {
  TempDir dir;
  for (bool zip64 : {false, true}) {
    CAPTURE(zip64);
    const auto data = load_archive(dir, zip({{"x.npy", x_npy}, {"y.npy", three_labels}}, zip64));
    CHECK(data.features()[5] == 6.0f);
    CHECK(data.label(0) == 2);
  }
  const Bytes named = zip({{"labels.npy", three_labels}, {"images.npy", x_npy}});
  CHECK(load_archive(dir, named, {.features = "images", .targets = "labels"}).label(2) == 1);
  check_archive_error(named, {"no array 'x' (member 'x.npy')", "holds 'labels.npy', 'images.npy'", "NpzOptions"});
  check_archive_error(zip({}), {"no array 'x'", "holds no members"});
  check_io_error([&] { load_archive(dir, zip({{"x.npy", x_npy}, {"y.npy", Bytes{1, 2}}})); },
                 {"d.npz' member 'y.npy'", "not a .npy file"});
}

TEST_CASE("load_npz reads deflated members (np.savez_compressed) with zlib, and names the fix without it") {
  TempDir dir;
  const Bytes archive = zip({{"x.npy", x_npy, true}, {"y.npy", three_labels, true}});
#if defined(ETNN_ZLIB_LINKED) || defined(ETNN_ZLIB_LOADED)
  CHECK(load_archive(dir, archive).features()[0] == 1.0f);
  // Corrupt deflate data: a reserved block type.
  Bytes bad = archive;
  bad[30 + 5] = 0x07;
  check_archive_error(bad, {"member 'x.npy'", "deflated data is corrupt"});
#else
  check_archive_error(archive, {"member 'x.npy' is deflated (np.savez_compressed) and this program was compiled",
                                "-DETNN_WITH_ZLIB=1 -lz", "or write the archive with np.savez"});
#endif
#if defined(ETNN_ZLIB_LINKED)
  // Compressed blocks, as numpy's zlib writes them.
  Bytes compressed(x_npy.size() + 64);
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  z.next_in = const_cast<unsigned char*>(x_npy.data());
  z.avail_in = static_cast<uInt>(x_npy.size());
  z.next_out = compressed.data();
  z.avail_out = static_cast<uInt>(compressed.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  compressed.resize(z.total_out);
  deflateEnd(&z);
  const Bytes rebuilt = zip({{"x.npy", x_npy, true, compressed}});
  const auto compressed_x = etnn::data::load_npz<Shape<2>, Shape<2>>(
      write_file(dir / "c.npz", rebuilt), {.features = "x", .targets = "x"});
  CHECK(compressed_x.features()[3] == 4.0f);
  CHECK(compressed_x.target(2)[1] == 6.0f);
#endif
}

TEST_CASE("load_npz validates the archive's records against its length") {
  const Bytes good = zip({{"x.npy", x_npy}, {"y.npy", three_labels}});
  check_archive_error(Bytes(10, 0), {"not a ZIP archive", "fewer than the 22"});
  check_archive_error(x_npy, {"no end-of-central-directory record", "load_npy"});
  check_archive_error(Bytes(good.begin(), good.end() - 1), {"no end-of-central-directory record"});
  check_archive_error(Bytes(good.begin() + 1, good.end()), {"central directory", "does not end where"});
  const std::size_t end = good.size() - 22;
  const std::size_t directory = etnn::data::detail::load_le<std::uint32_t>(good.data() + end + 16);
  const auto patched = [&](std::size_t at, std::initializer_list<unsigned char> bytes) {
    Bytes b = good;
    std::copy(bytes.begin(), bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
    return b;
  };
  check_archive_error(patched(end + 4, {1}), {"multi-part"});
  check_archive_error(patched(end + 10, {0xFF, 0xFF}), {"zip64", "no zip64 locator"});
  check_archive_error(patched(end + 10, {200}), {"200 members cannot fit", "corrupt"});
  check_archive_error(patched(end + 10, {1}), {"bytes after its last entry"});
  check_archive_error(patched(directory, {'X'}), {"central directory entry 0 is missing"});
  check_archive_error(patched(directory + 8, {1}), {"member 'x.npy' is encrypted"});
  check_archive_error(patched(directory + 10, {12}), {"compression method 12", "stored (0) and deflated (8)"});
  check_archive_error(patched(directory + 16, {0}), {"CRC-32 does not match"});
  check_archive_error(patched(directory + 20, {0xFF, 0xFF, 0xFF, 0x7F}), {"run past the member area"});
  check_archive_error(patched(directory + 24, {1}), {"sizes differ"});
  check_archive_error(patched(directory + 24, {0xFF, 0xFF, 0xFF, 0xFF}), {"no zip64 extra field"});
  check_archive_error(patched(directory + 28, {0xFF}), {"run past the directory"});
  check_archive_error(patched(directory + 42, {5}), {"no local header at offset 5"});
  check_archive_error(patched(30, {'z'}), {"local header names another member"});
  Bytes zip64 = zip({{"x.npy", x_npy}}, true);
  zip64[zip64.size() - 22 - 20 + 8] ^= 0x40;
  check_archive_error(zip64, {"zip64 locator points at offset", "no zip64 end record"});
}
