// Checkpoints: safetensors round trips (1000 random shape/dtype combinations, models in float and
// double), conversions, strict validation with one message per malformed case, load mismatches,
// and atomic writes under injected I/O errors and crashes.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"

namespace fs = std::filesystem;
namespace nn = etnn::nn;
using etnn::io::Dtype;

namespace {

using Mlp = decltype(nn::input<6> >> nn::linear<5> >> nn::relu >> nn::linear<3>);

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("etnn-io-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  fs::path operator/(const std::string& name) const { return path / name; }
};

// "t<i>"
std::string tensor_name(std::size_t i) {
  std::string name = "t";
  name += std::to_string(i);
  return name;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// A safetensors file from a header JSON text and a data section.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

// What a reader makes of a file: "ok" with its tensor and data sizes, or its error message.
template <class Read>
std::string outcome(Read read) {
  try {
    const etnn::io::SafetensorsFile file = read();
    return "ok: " + std::to_string(file.tensors.size()) + " tensors, " + std::to_string(file.data.size()) + " bytes";
  } catch (const etnn::IoError& e) {
    return e.what();
  }
}

// parse_safetensors on the bytes of the file at path: the same outcome as read_safetensors.
void check_in_memory_reader(const fs::path& path, const std::string& bytes) {
  const std::span<const unsigned char> span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  CHECK(outcome([&] { return etnn::io::parse_safetensors(span, path.string()); }) ==
        outcome([&] { return etnn::io::read_safetensors(path); }));
}

// The etnn::IoError message of loading `bytes` into an Mlp.
std::string load_error(const TempDir& dir, const std::string& bytes, etnn::io::LoadOptions options = {}) {
  const auto path = dir / "bad.safetensors";
  write_bytes(path, bytes);
  check_in_memory_reader(path, bytes);
  etnn::Model<Mlp> model(0);
  try {
    etnn::io::load(model, path, options);
  } catch (const etnn::IoError& e) {
    return e.what();
  }
  FAIL("expected an etnn::IoError");
  return {};
}

}  // namespace

TEST_CASE("a model round-trips bit for bit, in float and in double, whatever its training") {
  TempDir dir;
  etnn::Model<Mlp> a(1), b(2);
  etnn::io::save(a, dir / "a.safetensors");
  etnn::io::load(b, dir / "a.safetensors");
  CHECK(std::memcmp(a.parameters(), b.parameters(), Mlp::flat_size * sizeof(float)) == 0);

  etnn::Model<Mlp, double> d(3), e(4);
  etnn::io::save(d, dir / "d.safetensors");
  etnn::io::load(e, dir / "d.safetensors");
  CHECK(std::memcmp(d.parameters(), e.parameters(), Mlp::flat_size * sizeof(double)) == 0);
  // Across scalar types: double -> float rounds each value.
  etnn::Model<Mlp> f(5);
  etnn::io::load(f, dir / "d.safetensors");
  for (std::size_t i = 0; i < Mlp::flat_size; ++i) REQUIRE(f.parameters()[i] == static_cast<float>(d.parameters()[i]));

  const auto file = etnn::io::read_safetensors(dir / "a.safetensors");
  CHECK(file.metadata.at("format") == "etnn");
  CHECK(file.metadata.at("network") == "input<6> >> linear<5> >> relu >> linear<3>");
  CHECK(file.metadata.at("scalar") == "float32");
  REQUIRE(file.tensors.size() == 4);
  CHECK(file.tensors[0].name == "0.weight");
  CHECK(file.tensors[0].shape == std::vector<std::int64_t>{5, 6});
  CHECK(file.tensors[3].name == "2.bias");
  // The same file parsed from its bytes in memory.
  const std::string bytes = bytes_of(dir / "a.safetensors");
  const auto parsed = etnn::io::parse_safetensors(
      std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
  CHECK(parsed.metadata == file.metadata);
  CHECK(parsed.data == file.data);
  REQUIRE(parsed.tensors.size() == file.tensors.size());
  for (std::size_t t = 0; t < file.tensors.size(); ++t) {
    CHECK(parsed.tensors[t].name == file.tensors[t].name);
    CHECK(parsed.tensors[t].shape == file.tensors[t].shape);
    CHECK(parsed.tensors[t].begin == file.tensors[t].begin);
    CHECK(parsed.tensors[t].end == file.tensors[t].end);
  }
  CHECK_THROWS_WITH_AS(etnn::io::parse_safetensors(std::span<const unsigned char>(parsed.data.data(), 3)),
                       "etnn::io::load: '<memory>': truncated: shorter than the 8-byte header length", etnn::IoError);
}

TEST_CASE("1000 random shape and dtype combinations round-trip bitwise") {
  TempDir dir;
  etnn::Rng rng(2024);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::size_t count = 1 + rng.below(4);
    std::vector<std::vector<unsigned char>> payloads;
    std::vector<etnn::io::TensorBytes> tensors;
    for (std::size_t t = 0; t < count; ++t) {
      const auto dtype = static_cast<Dtype>(rng.below(4));
      std::vector<std::int64_t> shape(rng.below(4));
      std::size_t numel = 1;
      for (auto& d : shape) {
        d = static_cast<std::int64_t>(rng.below(5));  // zero-sized dimensions included
        numel *= static_cast<std::size_t>(d);
      }
      std::vector<unsigned char> bytes(numel * etnn::io::dtype_size(dtype));
      for (auto& byte : bytes) byte = static_cast<unsigned char>(rng.below(256));
      payloads.push_back(std::move(bytes));
      tensors.push_back({tensor_name(t), dtype, shape, {}});
    }
    for (std::size_t t = 0; t < count; ++t) tensors[t].bytes = payloads[t];
    const auto path = dir / "random.safetensors";
    etnn::io::write_safetensors(path, tensors, {{"trial", std::to_string(trial)}});
    const auto file = etnn::io::read_safetensors(path);
    REQUIRE(file.tensors.size() == count);
    REQUIRE(file.metadata.at("trial") == std::to_string(trial));
    for (std::size_t t = 0; t < count; ++t) {
      const auto* record = file.find(tensor_name(t));
      REQUIRE(record != nullptr);
      REQUIRE(record->dtype == tensors[t].dtype);
      REQUIRE(record->shape == tensors[t].shape);
      REQUIRE(record->end - record->begin == payloads[t].size());
      // (memcmp of an empty vector's null data() is undefined even for 0 bytes: UBSan says so.)
      REQUIRE((payloads[t].empty() || std::memcmp(file.data.data() + record->begin, payloads[t].data(), payloads[t].size()) == 0));
    }
  }
}

TEST_CASE("F16 and BF16 conversions are exact where representable and round to nearest-even") {
  CHECK(etnn::io::f16_to_float(0x3C00) == 1.0f);
  CHECK(etnn::io::f16_to_float(0xC000) == -2.0f);
  CHECK(etnn::io::f16_to_float(0x7BFF) == 65504.0f);
  CHECK(etnn::io::f16_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(std::isinf(etnn::io::f16_to_float(0x7C00)));
  CHECK(std::isnan(etnn::io::f16_to_float(0x7E00)));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {  // every finite half survives float and back
    const auto half = static_cast<std::uint16_t>(h);
    if ((half & 0x7C00) == 0x7C00) continue;
    REQUIRE(etnn::io::float_to_f16(etnn::io::f16_to_float(half)) == half);
  }
  CHECK(etnn::io::float_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie -> even
  CHECK(etnn::io::float_to_f16(1e6f) == 0x7C00);                         // overflow -> inf
#if defined(__FLT16_MAX__)
  // Random floats, across the normal, subnormal and overflow ranges, against the compiler's own
  // float -> _Float16 conversion (round to nearest-even).
  etnn::Rng rng(16);
  for (int i = 0; i < 200000; ++i) {
    const float f = static_cast<float>(rng.uniform(-1, 1)) * std::ldexp(1.0f, static_cast<int>(rng.below(48)) - 30);
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    REQUIRE(etnn::io::float_to_f16(f) == expected);
  }
#endif
  CHECK(etnn::io::bf16_to_float(0x3F80) == 1.0f);
  CHECK(etnn::io::float_to_bf16(1.0f) == 0x3F80);
  CHECK(etnn::io::float_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie -> even
  CHECK(etnn::io::float_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);
  CHECK(std::isnan(etnn::io::bf16_to_float(etnn::io::float_to_bf16(std::nanf("")))));
}

TEST_CASE("loading converts F16 and BF16 tensors to the model's scalar type") {
  TempDir dir;
  etnn::Model<Mlp> model(0);
  std::vector<std::vector<unsigned char>> payloads;
  std::vector<etnn::io::TensorBytes> tensors;
  for (const auto& p : etnn::Model<Mlp>::named_parameters()) {
    const Dtype dtype = p.name.ends_with("weight") ? Dtype::f16 : Dtype::bf16;
    std::vector<unsigned char> bytes;
    for (std::size_t i = 0; i < p.numel; ++i) {
      const float value = static_cast<float>(i) * 0.25f - 1.0f;
      const std::uint16_t h = dtype == Dtype::f16 ? etnn::io::float_to_f16(value) : etnn::io::float_to_bf16(value);
      bytes.push_back(static_cast<unsigned char>(h & 0xFF));
      bytes.push_back(static_cast<unsigned char>(h >> 8));
    }
    payloads.push_back(std::move(bytes));
    tensors.push_back({p.name, dtype, std::vector<std::int64_t>(p.shape.begin(), p.shape.end()), {}});
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) tensors[t].bytes = payloads[t];
  etnn::io::write_safetensors(dir / "half.safetensors", tensors, {});
  etnn::io::load(model, dir / "half.safetensors");
  for (const auto& p : etnn::Model<Mlp>::named_parameters())
    for (std::size_t i = 0; i < p.numel; ++i)
      REQUIRE(model.parameters()[p.offset + i] == static_cast<float>(i) * 0.25f - 1.0f);
}

TEST_CASE("batch norm's buffers are saved and loaded; an I64 num_batches_tracked (PyTorch's) loads") {
  TempDir dir;
  using Net = decltype(etnn::nn::input<3> >> etnn::nn::linear<2> >> etnn::nn::batch_norm);
  etnn::Model<Net> model(0);
  for (const auto& b : etnn::Model<Net>::named_buffers())  // the zeros between tensors stay zero
    for (std::size_t i = 0; i < b.numel; ++i) model.buffers()[b.offset + i] = 0.5f + static_cast<float>(b.offset + i);
  etnn::io::save(model, dir / "bn.safetensors");
  etnn::Model<Net> loaded(1);
  etnn::io::load(loaded, dir / "bn.safetensors");
  CHECK(std::equal(model.buffers(), model.buffers() + etnn::Model<Net>::num_buffers, loaded.buffers()));

  // The same tensors with num_batches_tracked as a little-endian int64 scalar, as torch saves it.
  const auto file = etnn::io::read_safetensors(dir / "bn.safetensors");
  std::vector<etnn::io::TensorBytes> tensors;
  const unsigned char count[8] = {42, 1, 0, 0, 0, 0, 0, 0};  // 298
  for (const auto& t : file.tensors) {
    const bool counter = t.name == "1.num_batches_tracked";
    tensors.push_back({t.name, counter ? Dtype::i64 : t.dtype, t.shape,
                       counter ? std::span<const unsigned char>(count, 8)
                               : std::span<const unsigned char>(file.data.data() + t.begin, t.end - t.begin)});
  }
  etnn::io::write_safetensors(dir / "torch.safetensors", tensors, {});
  etnn::io::load(loaded, dir / "torch.safetensors");
  CHECK(etnn::Model<Net>::named_buffers()[2].offset == 128);  // after two aligned tensors
  CHECK(loaded.buffers()[128] == 298.0f);
}

TEST_CASE("every malformed file is refused with a message naming the file and the problem") {
  TempDir dir;
  const std::string w = "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[5,6],\"data_offsets\":[0,120]}";
  const auto has = [](const std::string& message, const std::string& part) {
    INFO(message);
    CHECK(message.find(part) != std::string::npos);
  };
  has(load_error(dir, "abc"), "truncated: shorter than the 8-byte header length");
  has(load_error(dir, "abc"), "bad.safetensors");
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32 bytes
  has(load_error(dir, huge), "exceeds the 100 MB limit");
  has(load_error(dir, safetensors("{}", "").substr(0, 8) + "{"), "runs past the end of the file");
  has(load_error(dir, safetensors("{\"a\":", "")), "invalid JSON header");
  has(load_error(dir, safetensors("{\"\xff\":1}", "")), "invalid UTF-8");
  has(load_error(dir, safetensors("{\"\xc0\x80\":1}", "")), "invalid UTF-8");  // overlong
  has(load_error(dir, safetensors("{" + w + "," + w + "}", std::string(120, '\0'))), "duplicate key");
  has(load_error(dir, safetensors("[]", "")), "the header must be a JSON object");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x")),
      "tensor 'x': unsupported dtype 'I8'");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", "xxxx")),
      "tensor 'x': data_offsets span 4 bytes but F32 (2,) needs 8");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", "")),
      "data_offsets end before they begin");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", "")),
      "data_offsets must be non-negative integers");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", "")),
      "size overflows 64 bits");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", "12345678")),
      "tensor 'x': gap of 4 bytes before its data");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                                  "12345678")),
      "data overlaps the previous tensor's");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "1234")),
      "truncated: the tensors need 8 data bytes but the file holds 4");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "12345")),
      "trailing bytes: 1 bytes after the last tensor's data");
  has(load_error(dir, safetensors("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", "1234")),
      "unexpected field 'extra'");
  has(load_error(dir, safetensors("{\"__metadata__\":{\"k\":1}}", "")), "__metadata__ value 'k' must be a string");

  // Files that are valid safetensors but do not fit the model: refused for their network, and
  // when that is allowed, for their tensors.
  TempDir other;
  const etnn::io::LoadOptions any_network{.allow_architecture_mismatch = true};
  etnn::Model<decltype(nn::input<6> >> nn::linear<4> >> nn::relu >> nn::linear<3>)> narrower(0);
  etnn::io::save(narrower, other / "narrow.safetensors");
  has(load_error(dir, bytes_of(other / "narrow.safetensors")),
      "saved from the network 'input<6> >> linear<4> >> relu >> linear<3>' but the model is "
      "'input<6> >> linear<5> >> relu >> linear<3>'");
  has(load_error(dir, bytes_of(other / "narrow.safetensors"), any_network),
      "tensor '0.weight' has shape (4, 6), model expects (5, 6)");
  etnn::Model<decltype(nn::input<6> >> nn::linear<5>)> shorter(0);
  etnn::io::save(shorter, other / "short.safetensors");
  has(load_error(dir, bytes_of(other / "short.safetensors"), any_network), "missing tensor '2.weight'");
  etnn::Model<decltype(nn::input<6> >> nn::linear<5> >> nn::relu >> nn::linear<3> >> nn::relu >> nn::linear<3>)> longer(0);
  etnn::io::save(longer, other / "long.safetensors");
  has(load_error(dir, bytes_of(other / "long.safetensors"), any_network), "unexpected tensor '4.weight'");
  CHECK_THROWS_WITH_AS(etnn::io::read_safetensors(dir / "absent.safetensors"), doctest::Contains("cannot read the file"),
                       etnn::IoError);
}

TEST_CASE("the JSON reader refuses what is not strict JSON") {
  const auto error = [](const std::string& text) {
    try {
      etnn::io::json::parse(text);
    } catch (const etnn::io::json::ParseError& e) {
      return std::string(e.what());
    }
    FAIL("expected a ParseError for " << text);
    return std::string();
  };
  CHECK(error(std::string(70, '[') + std::string(70, ']')).find("deeper than 64") != std::string::npos);
  std::string long_array = "[0";
  for (int i = 0; i < 64; ++i) long_array += ",0";
  CHECK(error(long_array + "]").find("longer than 64") != std::string::npos);
  CHECK(error("\"\\ud800\"").find("unpaired surrogate") != std::string::npos);
  CHECK(error("\"\\udc00\\ud800\"").find("unpaired surrogate") != std::string::npos);
  CHECK(error("\"a\nb\"").find("control character") != std::string::npos);
  CHECK(error("012").find("leading zeros") != std::string::npos);
  CHECK(error("1.5").find("only integers") != std::string::npos);
  CHECK(error("{} x").find("after the JSON value") != std::string::npos);
  CHECK(error("{\"a\":1,}").find("expected a string key") != std::string::npos);
  CHECK(error("\"\xed\xa0\x80\"").find("invalid UTF-8") != std::string::npos);  // an encoded surrogate
  CHECK(error("true").find("expected an object") != std::string::npos);
  const auto v = etnn::io::json::parse("{\"k\":[1,-2],\"s\":\"\\u00e9\\ud83d\\ude00\"}");
  CHECK(v.object()->at("k").array()->at(1).integer()->negative);
  CHECK(*v.object()->at("s").string() == "\xc3\xa9\xf0\x9f\x98\x80");
  // Writing a name that is not UTF-8 is refused rather than producing an unreadable file.
  TempDir dir;
  const etnn::io::TensorBytes bad{"\xff", Dtype::f32, {}, {}};
  CHECK_THROWS_WITH_AS(etnn::io::write_safetensors(dir / "bad.safetensors", std::span(&bad, 1), {}),
                       doctest::Contains("not valid UTF-8"), etnn::IoError);
}

TEST_CASE("a failed load leaves the model unchanged") {
  TempDir dir;
  etnn::Model<decltype(nn::input<6> >> nn::linear<5>)> partial(9);
  etnn::io::save(partial, dir / "partial.safetensors");
  etnn::Model<Mlp> model(1);
  const std::vector<float> before(model.parameters(), model.parameters() + Mlp::flat_size);
  CHECK_THROWS_AS(etnn::io::load(model, dir / "partial.safetensors", {.allow_architecture_mismatch = true}),
                  etnn::IoError);
  CHECK(std::equal(before.begin(), before.end(), model.parameters()));
}

TEST_CASE("a checkpoint of another network is refused with both descriptions unless that is allowed") {
  TempDir dir;
  using Tanh = decltype(nn::input<6> >> nn::linear<5> >> nn::tanh >> nn::linear<3>);  // Mlp's tensors
  etnn::Model<Mlp> relu(1);
  etnn::io::save(relu, dir / "relu.safetensors");
  etnn::Model<Tanh> tanh(2);
  const std::vector<float> before(tanh.parameters(), tanh.parameters() + Tanh::flat_size);
  try {
    etnn::io::load(tanh, dir / "relu.safetensors");
    FAIL("expected an etnn::IoError");
  } catch (const etnn::IoError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("etnn::io::load: '" + (dir / "relu.safetensors").string() + "'") != std::string::npos);
    CHECK(message.find("saved from the network 'input<6> >> linear<5> >> relu >> linear<3>' but the model is "
                       "'input<6> >> linear<5> >> tanh >> linear<3>'") != std::string::npos);
    CHECK(message.find("pass {.allow_architecture_mismatch = true} to etnn::io::load") != std::string::npos);
  }
  CHECK(std::equal(before.begin(), before.end(), tanh.parameters()));

  etnn::io::load(tanh, dir / "relu.safetensors", {.allow_architecture_mismatch = true});
  CHECK(std::equal(relu.parameters(), relu.parameters() + Mlp::flat_size, tanh.parameters()));

  // Without etnn's "network" metadata (a file written by PyTorch) only names and shapes count.
  const auto file = etnn::io::read_safetensors(dir / "relu.safetensors");
  std::vector<etnn::io::TensorBytes> tensors;
  for (const auto& t : file.tensors)
    tensors.push_back({t.name, t.dtype, t.shape, {file.data.data() + t.begin, t.end - t.begin}});
  etnn::io::write_safetensors(dir / "torch.safetensors", tensors, {{"format", "pt"}});
  etnn::Model<Tanh> from_torch(3);
  etnn::io::load(from_torch, dir / "torch.safetensors");
  CHECK(std::equal(relu.parameters(), relu.parameters() + Mlp::flat_size, from_torch.parameters()));
}

TEST_CASE("saving is atomic: an I/O error or a crash mid-write leaves the previous file") {
  TempDir dir;
  const auto target = dir / "model.safetensors";
  etnn::Model<Mlp> old_model(1), new_model(2);
  etnn::io::save(old_model, target);
  const std::string previous = bytes_of(target);
  auto& hook = etnn::io::detail::write_fault_hook();

  // A write error (as a full disk gives) after the first bytes.
  hook = [](std::size_t written) {
    if (written > 0) throw etnn::IoError("simulated: no space left on device");
  };
  CHECK_THROWS_WITH_AS(etnn::io::save(new_model, target), doctest::Contains("no space left"), etnn::IoError);
  hook = nullptr;
  CHECK(bytes_of(target) == previous);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 1);  // no temporary left

  // A crash: a child process is killed in the middle of writing.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    hook = [](std::size_t written) {
      if (written > 0) std::raise(SIGKILL);
    };
    etnn::io::save(new_model, target);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(bytes_of(target) == previous);
  etnn::Model<Mlp> reloaded(3);
  etnn::io::load(reloaded, target);
  CHECK(std::equal(old_model.parameters(), old_model.parameters() + Mlp::flat_size, reloaded.parameters()));
}
