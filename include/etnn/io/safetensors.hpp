#pragma once
// Private to io/: include <etnn/io/io.hpp> or <etnn/etnn.hpp>.
// The safetensors format (huggingface/safetensors):
//   [8 bytes: N, little-endian u64] [N bytes: JSON header, UTF-8, may end in spaces] [data]
//   header: {"__metadata__": {"key": "value", ...},
//            "name": {"dtype": "F32", "shape": [10, 512], "data_offsets": [begin, end]}, ...}
//   offsets are relative to the data section; the tensors tile it exactly, without gaps or
//   overlaps, in offset order; data is little-endian and row-major.
// read_safetensors (a file) and parse_safetensors (its bytes in memory) validate all of it before
// anything is sized from the file's numbers.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"
#include "atomic_file.hpp"
#include "json.hpp"

namespace etnn::io {

// I64 is read for counters such as batch norm's num_batches_tracked, which PyTorch stores as int64.
enum class Dtype { f64, f32, f16, bf16, i64 };

constexpr std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::f64: return "F64";
    case Dtype::f32: return "F32";
    case Dtype::f16: return "F16";
    case Dtype::bf16: return "BF16";
    case Dtype::i64: return "I64";
  }
  return "?";
}
constexpr std::size_t dtype_size(Dtype d) {
  return d == Dtype::f64 || d == Dtype::i64 ? 8 : d == Dtype::f32 ? 4 : 2;
}

struct TensorRecord {
  std::string name;
  Dtype dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;  // byte offsets in the data section
  std::uint64_t end;
};

struct SafetensorsFile {
  std::vector<TensorRecord> tensors;  // in offset order
  std::map<std::string, std::string, std::less<>> metadata;
  std::vector<unsigned char> data;

  const TensorRecord* find(std::string_view name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

// Headers above this size are refused (the reference implementation's limit).
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

namespace detail {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

class HeaderReader {
 public:
  // source names the bytes in messages: a file's path, or what the caller calls a buffer.
  explicit HeaderReader(const std::string& source) : where_("etnn::io::load: '" + source + "': ") {}

  [[noreturn]] void fail(const std::string& what) const { throw IoError(where_ + what); }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const {
    fail("tensor '" + name + "': " + what);
  }

  // a * b, or an error when it overflows 64 bits.
  std::uint64_t times(std::uint64_t a, std::uint64_t b, const std::string& name) const {
    if (a != 0 && b > UINT64_MAX / a) fail_tensor(name, "size overflows 64 bits");
    return a * b;
  }

  std::uint64_t offset(const json::Value& v, const std::string& name) const {
    const json::Integer* i = v.integer();
    if (i == nullptr || i->negative) fail_tensor(name, "data_offsets must be non-negative integers");
    return i->magnitude;
  }

  TensorRecord tensor(const std::string& name, const json::Value& v) const {
    const json::Object* o = v.object();
    if (o == nullptr) fail_tensor(name, "expected an object with dtype, shape and data_offsets");
    for (const auto& [key, _] : *o)
      if (key != "dtype" && key != "shape" && key != "data_offsets") fail_tensor(name, "unexpected field '" + key + "'");
    const auto field = [&](const char* key) -> const json::Value& {
      const auto it = o->find(key);
      if (it == o->end()) fail_tensor(name, std::string("missing field '") + key + "'");
      return it->second;
    };
    TensorRecord t{name, Dtype::f32, {}, 0, 0};
    const std::string* dtype = field("dtype").string();
    if (dtype == nullptr) fail_tensor(name, "dtype must be a string");
    if (*dtype == "F64") t.dtype = Dtype::f64;
    else if (*dtype == "F32") t.dtype = Dtype::f32;
    else if (*dtype == "F16") t.dtype = Dtype::f16;
    else if (*dtype == "BF16") t.dtype = Dtype::bf16;
    else if (*dtype == "I64") t.dtype = Dtype::i64;
    else fail_tensor(name, "unsupported dtype '" + *dtype + "'; etnn reads F64, F32, F16, BF16 and I64");
    const json::Array* shape = field("shape").array();
    if (shape == nullptr) fail_tensor(name, "shape must be an array of integers");
    std::uint64_t numel = 1;
    for (const auto& d : *shape) {
      const json::Integer* i = d.integer();
      if (i == nullptr || i->negative || i->magnitude > static_cast<std::uint64_t>(INT64_MAX))
        fail_tensor(name, "shape must hold non-negative integers");
      t.shape.push_back(static_cast<std::int64_t>(i->magnitude));
      numel = times(numel, i->magnitude, name);
    }
    const json::Array* offsets = field("data_offsets").array();
    if (offsets == nullptr || offsets->size() != 2) fail_tensor(name, "data_offsets must be [begin, end]");
    t.begin = offset((*offsets)[0], name);
    t.end = offset((*offsets)[1], name);
    if (t.end < t.begin) fail_tensor(name, "data_offsets end before they begin");
    const std::uint64_t bytes = times(numel, dtype_size(t.dtype), name);
    if (t.end - t.begin != bytes)
      fail_tensor(name, "data_offsets span " + std::to_string(t.end - t.begin) + " bytes but " + *dtype + " " +
                            shape_string(t.shape) + " needs " + std::to_string(bytes));
    return t;
  }

 private:
  std::string where_;
};

}  // namespace detail

// An unsigned integer stored little-endian at p (unaligned).
template <class U>
U read_le(const unsigned char* p) {
  U v = 0;
  for (std::size_t i = sizeof(U); i-- > 0;) v = static_cast<U>((v << 8) | p[i]);
  return v;
}

namespace detail {

inline void little_endian_u64(unsigned char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace detail

namespace detail {

// The header length stored in the first 8 bytes of a file of total_size bytes, checked against
// the reference implementation's limit and against the bytes that follow it.
inline std::uint64_t header_length(const unsigned char* size_bytes, std::uint64_t total_size,
                                   const HeaderReader& reader) {
  const auto header_size = read_le<std::uint64_t>(size_bytes);
  if (header_size > max_header_bytes)
    reader.fail("header length " + std::to_string(header_size) + " exceeds the 100 MB limit");
  if (header_size > total_size - 8)
    reader.fail("header length " + std::to_string(header_size) + " runs past the end of the file (" +
                std::to_string(total_size) + " bytes)");
  return header_size;
}

// The tensors and metadata of a JSON header, validated against a data section of data_size bytes
// (the tensors must tile it exactly); out.data is left empty for the caller to fill.
inline SafetensorsFile parse_header(std::string_view header, std::uint64_t data_size, const HeaderReader& reader) {
  json::Value root;
  try {
    root = json::parse(header);
  } catch (const json::ParseError& e) {
    reader.fail(std::string("invalid JSON header: ") + e.what());
  }
  const json::Object* entries = root.object();
  if (entries == nullptr) reader.fail("the header must be a JSON object");

  SafetensorsFile out;
  for (const auto& [name, value] : *entries) {
    if (name == "__metadata__") {
      const json::Object* meta = value.object();
      if (meta == nullptr) reader.fail("__metadata__ must be an object of strings");
      for (const auto& [key, v] : *meta) {
        if (v.string() == nullptr) reader.fail("__metadata__ value '" + key + "' must be a string");
        out.metadata.emplace(key, *v.string());
      }
      continue;
    }
    out.tensors.push_back(reader.tensor(name, value));
  }
  // The tensors must tile the data section exactly.
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& t : out.tensors) {
    if (t.begin < expected) reader.fail_tensor(t.name, "data overlaps the previous tensor's");
    if (t.begin > expected) reader.fail_tensor(t.name, "gap of " + std::to_string(t.begin - expected) + " bytes before its data");
    expected = t.end;
  }
  if (expected > data_size)
    reader.fail("truncated: the tensors need " + std::to_string(expected) + " data bytes but the file holds " +
                std::to_string(data_size));
  if (expected < data_size)
    reader.fail("trailing bytes: " + std::to_string(data_size - expected) + " bytes after the last tensor's data");
  return out;
}

}  // namespace detail

// Reads and validates a whole safetensors file; throws etnn::IoError naming the file (and the
// tensor) for anything malformed.
inline SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  const detail::HeaderReader reader(path.string());
  const UniqueFile file = open_for_reading(path);
  struct stat info {};
  // The size of the opened file itself: a concurrent atomic replace cannot pair two files.
  if (!file || ::fstat(::fileno(file.get()), &info) != 0 || !S_ISREG(info.st_mode)) reader.fail("cannot read the file");
  const auto file_size = static_cast<std::uint64_t>(info.st_size);
  unsigned char size_bytes[8];
  if (file_size < 8 || std::fread(size_bytes, 1, 8, file.get()) != 8)
    reader.fail("truncated: shorter than the 8-byte header length");
  const std::uint64_t header_size = detail::header_length(size_bytes, file_size, reader);
  std::string header(header_size, '\0');
  if (std::fread(header.data(), 1, header_size, file.get()) != header_size) reader.fail("cannot read the header");
  const std::uint64_t data_size = file_size - 8 - header_size;
  SafetensorsFile out = detail::parse_header(header, data_size, reader);
  out.data.resize(data_size);
  if (data_size > 0 && std::fread(out.data.data(), 1, data_size, file.get()) != data_size)
    reader.fail("cannot read the tensor data");
  return out;
}

// The same from the bytes of a whole safetensors file in memory (a download, a memory-mapped
// file, a fuzzer's input); source names them in messages.
inline SafetensorsFile parse_safetensors(std::span<const unsigned char> bytes, const std::string& source = "<memory>") {
  const detail::HeaderReader reader(source);
  if (bytes.size() < 8) reader.fail("truncated: shorter than the 8-byte header length");
  const std::uint64_t header_size = detail::header_length(bytes.data(), bytes.size(), reader);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(header_size));
  const auto data = bytes.subspan(8 + static_cast<std::size_t>(header_size));
  SafetensorsFile out = detail::parse_header(header, data.size(), reader);
  out.data.assign(data.begin(), data.end());
  return out;
}

// A tensor to write: name, dtype, shape and its little-endian bytes.
struct TensorBytes {
  std::string name;
  Dtype dtype;
  std::vector<std::int64_t> shape;
  std::span<const unsigned char> bytes;
};

// Writes tensors (in the given order) and metadata as a safetensors file, atomically.
inline void write_safetensors(const std::filesystem::path& path, std::span<const TensorBytes> tensors,
                              const std::map<std::string, std::string, std::less<>>& metadata) {
  // Appended piece by piece (GCC 12 misreports `"literal" + std::string` chains: -Wrestrict).
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    if (!first) header += ',';
    header += json::quote(key);
    header += ':';
    header += json::quote(value);
    first = false;
  }
  header += '}';
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    header += ',';
    header += json::quote(t.name);
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) header += ',';
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    header += std::to_string(offset + t.bytes.size());
    header += "]}";
    offset += t.bytes.size();
  }
  header += '}';
  try {
    json::parse(header);  // names and metadata must be valid UTF-8, or readers would refuse the file
  } catch (const json::ParseError& e) {
    throw IoError("etnn::io: cannot write '" + path.string() + "': a tensor name or metadata string is not valid "
                  "UTF-8 (" + e.what() + ")");
  }
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  unsigned char size_bytes[8];
  detail::little_endian_u64(size_bytes, header.size());
  std::vector<std::span<const unsigned char>> pieces{
      {size_bytes, 8}, {reinterpret_cast<const unsigned char*>(header.data()), header.size()}};
  for (const auto& t : tensors) pieces.push_back(t.bytes);
  write_atomically(path, pieces);
}

}  // namespace etnn::io
