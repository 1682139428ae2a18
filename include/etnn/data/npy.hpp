#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// load_npy<X, Y>(features, targets) and load_npz<X, Y>(archive): a Dataset<X, Y> from NumPy's .npy
// files (np.save) or from two arrays of an .npz archive of them (np.savez, np.savez_compressed,
// zip.hpp). A .npy file is, integers little-endian:
//   magic    93 'N' 'U' 'M' 'P' 'Y'  major minor        versions 1.0, 2.0 and 3.0
//   length   uint16 (1.0) or uint32 (2.0, 3.0)          bytes of the header that follows
//   header   a Python dict literal, padded with spaces and a final '\n', e.g.
//            {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
//   data     prod(shape) values of descr, C (row-major) order, nothing after them
// Read dtypes: <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1. Fortran-ordered, big-endian, object,
// structured and other dtypes are refused with the numpy call that converts them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"
#include "../core/shape.hpp"
#include "dataset.hpp"
#include "file_values.hpp"
#include "little_endian.hpp"
#include "targets.hpp"
#include "zip.hpp"

namespace etnn::data::detail {

enum class NpyDtype { f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1 };

struct NpyDtypeInfo {
  std::string_view code;  // descr without its byte-order character: "f4"
  NpyDtype dtype;
  std::size_t bytes;
};

inline constexpr NpyDtypeInfo npy_dtypes[] = {
    {"f4", NpyDtype::f4, 4}, {"f8", NpyDtype::f8, 8}, {"i1", NpyDtype::i1, 1}, {"i2", NpyDtype::i2, 2},
    {"i4", NpyDtype::i4, 4}, {"i8", NpyDtype::i8, 8}, {"u1", NpyDtype::u1, 1}, {"u2", NpyDtype::u2, 2},
    {"u4", NpyDtype::u4, 4}, {"u8", NpyDtype::u8, 8}, {"b1", NpyDtype::b1, 1}};

// One array of a .npy file; data points into the caller's bytes.
struct NpyArray {
  std::string name;   // "'x.npy'" or "'train.npz' member 'x.npy'"
  std::string where;  // "etnn::data::load_npy: 'x.npy'", the start of every message about it
  std::string descr;  // as the header spells it: "<f4"
  NpyDtype dtype = NpyDtype::f4;
  std::size_t value_bytes = 4;
  std::vector<std::int64_t> shape;
  std::uint64_t count = 1;  // prod(shape)
  std::span<const unsigned char> data;

  [[noreturn]] void fail(const std::string& what) const { throw IoError(where + ": " + what); }

  // "(60000, 784)", "(3,)", "()": numpy's spelling.
  std::string shape_string() const {
    std::string out = "(";
    for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
    return out + (shape.size() == 1 ? ",)" : ")");
  }
};

// The header dict, parsed as Python's literal syntax restricted to what numpy writes: string keys in
// any order, each of 'descr' (a string), 'fortran_order' (True/False) and 'shape' (a tuple of
// non-negative ints) exactly once, an optional trailing comma, and only whitespace after '}'.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, NpyArray& array) : text_(text), array_(array) {}

  // Fills array.descr, array.shape and returns fortran_order.
  bool parse() {
    bool seen_descr = false, seen_order = false, seen_shape = false, fortran_order = false;
    expect('{');
    while (!take('}')) {
      const std::string key = parse_string("a key");
      expect(':');
      if (key == "descr") {
        once(seen_descr, key);
        if (peek() == '[') {
          array_.fail("a structured array (a dtype with named fields) is not supported; save each field on its own, "
                      "e.g. np.save(path, np.ascontiguousarray(a['x']))");
        }
        array_.descr = parse_string("'descr' (a dtype string such as '<f4')");
      } else if (key == "fortran_order") {
        once(seen_order, key);
        fortran_order = parse_bool();
      } else if (key == "shape") {
        once(seen_shape, key);
        parse_shape();
      } else {
        error("unknown key '" + key + "'; numpy writes only 'descr', 'fortran_order' and 'shape'");
      }
      if (!take(',')) {
        expect('}');
        break;
      }
    }
    if (!seen_descr || !seen_order || !seen_shape) {
      error(std::string("the key '") + (!seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape") + "' is missing");
    }
    skip_spaces();
    if (pos_ != text_.size()) error("unexpected characters after the closing '}'");
    return fortran_order;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    const std::string_view text = text_.substr(0, text_.find_last_not_of(" \n") + 1);  // without the padding
    std::string shown;
    for (char c : text.substr(0, 120)) shown += (c >= 0x20 && c < 0x7F) ? c : '?';
    array_.fail("malformed header: " + what + " (at character " + std::to_string(pos_) + " of \"" + shown +
                (text.size() > 120 ? "...\"" : "\"") + "); write the file with np.save");
  }

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  char peek() {
    skip_spaces();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool take(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!take(c)) error(std::string("expected '") + c + "'");
  }
  void once(bool& seen, const std::string& key) {
    if (seen) error("the key '" + key + "' appears twice");
    seen = true;
  }

  // 'text' or "text" without escapes (no dtype or key numpy writes has any).
  std::string parse_string(const char* what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error(std::string("expected ") + what);
    const std::size_t end = text_.find(quote, ++pos_);
    if (end == std::string_view::npos) error("a string is not closed");
    std::string s(text_.substr(pos_, end - pos_));
    if (s.find('\\') != std::string::npos) error("escapes in strings are not supported");
    pos_ = end + 1;
    return s;
  }

  bool parse_bool() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error("'fortran_order' must be True or False");
  }

  // (), (n,), (n, m), ... with an optional trailing comma; a one-element tuple needs its comma.
  void parse_shape() {
    expect('(');
    array_.shape.clear();
    bool comma = false;
    while (!take(')')) {
      array_.shape.push_back(parse_dim());
      comma = take(',');
      if (!comma) {
        expect(')');
        break;
      }
    }
    if (array_.shape.size() == 1 && !comma) error("'shape' must be a tuple; a single dimension is written (n,)");
  }

  // A non-negative decimal int without leading zeros; the 'L' of Python 2's longs is accepted.
  std::int64_t parse_dim() {
    skip_spaces();
    const std::size_t start = pos_;
    std::int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_++] - '0';
      if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) error("a dimension does not fit 64 bits");
      value = value * 10 + digit;
    }
    if (pos_ == start) error("expected a non-negative integer dimension");
    if (text_[start] == '0' && pos_ - start > 1) error("a dimension has a leading zero");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  NpyArray& array_;
};

// The dtype of array.descr, or an etnn::IoError saying how to convert the array.
inline void resolve_npy_dtype(NpyArray& array) {
  const std::string& descr = array.descr;
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string_view code = descr.empty() ? std::string_view{} : std::string_view(descr).substr(1);
  const auto known = std::find_if(std::begin(npy_dtypes), std::end(npy_dtypes),
                                  [&](const NpyDtypeInfo& d) { return d.code == code; });
  if (code == "O") {
    array.fail("an object array (dtype=object) holds Python objects, not numbers; convert it with a.astype('<f4') "
               "(or a.astype('<i8') for labels) before np.save");
  }
  if (known == std::end(npy_dtypes)) {
    array.fail("dtype '" + descr +
               "' is not supported; etnn reads <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1, so convert it "
               "with a.astype('<f4') (features) or a.astype('<i8') (class labels) before np.save");
  }
  const bool one_byte = known->bytes == 1;
  if (order == '>' && !one_byte) {
    array.fail("dtype '" + descr + "' is big-endian; etnn reads little-endian arrays, convert it with a.astype('<" +
               std::string(code) + "') before np.save");
  }
  if (!(order == '<' || (one_byte && (order == '|' || order == '>')))) {
    array.fail("dtype '" + descr + "' has byte order '" + std::string(1, order) + "'; numpy writes '<" +
               std::string(code) + "'" + (one_byte ? " or '|" + std::string(code) + "'" : "") +
               ", so save the array with np.save");
  }
  array.dtype = known->dtype;
  array.value_bytes = known->bytes;
}

// The array of a whole .npy file (bytes, which must outlive it), with every size checked against
// bytes.size(). Messages start with "who: name: ".
inline NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& who, std::string name) {
  NpyArray array;
  array.where = who + ": " + name;
  array.name = std::move(name);
  constexpr unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 8 || std::memcmp(bytes.data(), magic, sizeof magic) != 0) {
    const bool zip = bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0;
    array.fail(zip ? "this is a ZIP archive (an .npz?), not a .npy file; read it with etnn::data::load_npz"
                   : "not a .npy file: it does not start with \\x93NUMPY and a version; write it with np.save");
  }
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    array.fail("format version " + std::to_string(major) + "." + std::to_string(minor) +
               " is not supported; etnn reads 1.0, 2.0 and 3.0, which np.save writes");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) array.fail("truncated: the file ends inside the header length");
  const std::uint64_t header_length =
      major == 1 ? load_le<std::uint16_t>(bytes.data() + 8) : load_le<std::uint32_t>(bytes.data() + 8);
  const std::uint64_t data_offset = 8 + length_bytes + header_length;
  if (data_offset > bytes.size()) {
    array.fail("truncated: the header length " + std::to_string(header_length) + " runs past the end of the " +
               std::to_string(bytes.size()) + "-byte file; the file is incomplete, save it again");
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8 + length_bytes),
                                static_cast<std::size_t>(header_length));
  const bool fortran_order = NpyHeaderParser(header, array).parse();
  resolve_npy_dtype(array);
  if (fortran_order && array.shape.size() > 1) {
    array.fail("the array is Fortran-ordered (column-major); etnn reads C order, so save "
               "np.ascontiguousarray(a) instead of a");
  }
  const std::uint64_t data_bytes = bytes.size() - data_offset;
  for (const std::int64_t d : array.shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && array.count > std::numeric_limits<std::uint64_t>::max() / array.value_bytes / dim) {
      array.fail("the shape " + array.shape_string() + " overflows 64-bit sizes; the file is corrupt");
    }
    array.count *= dim;
  }
  const std::uint64_t expected = array.count * array.value_bytes;
  if (data_bytes != expected) {
    array.fail(std::string(data_bytes < expected ? "truncated" : "trailing bytes") + ": the shape " +
               array.shape_string() + " of '" + array.descr + "' needs " + std::to_string(expected) +
               " data bytes but " + std::to_string(data_bytes) + " follow the header; " +
               (data_bytes < expected ? "the file is incomplete, save it again"
                                      : "the header is wrong or another file was appended"));
  }
  array.data = bytes.subspan(static_cast<std::size_t>(data_offset));
  return array;
}

// The array's values decoded as From (the C++ type of its dtype) and converted by
// convert(From, To&) -> reason or null (file_values.hpp); a refusal names the value and its row.
template <class From, class To, class Convert>
void convert_npy_values(const NpyArray& array, std::vector<To>& out, const Convert& convert) {
  const std::size_t per_row = array.shape.empty() || array.shape[0] == 0
                                  ? 1
                                  : static_cast<std::size_t>(array.count / static_cast<std::uint64_t>(array.shape[0]));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const unsigned char* p = array.data.data() + i * sizeof(From);
    if constexpr (std::is_same_v<From, bool>) {
      if (*p > 1) {
        array.fail("value " + std::to_string(i) + " is a bool byte of " + std::to_string(*p) +
                   ", not 0 or 1; the file is corrupt, save it again");
      }
    }
    using Number = std::conditional_t<std::is_same_v<From, bool>, std::uint8_t, From>;
    const Number v = load_le_value<Number>(p);
    if (const char* why = convert(v, out[i])) {
      array.fail("value " + std::to_string(i) + " (row " + std::to_string(i / per_row) + ", position " +
                 std::to_string(i % per_row) + ") is " + value_string(v) + ", which " + why);
    }
  }
}

// Every value of the array, in C order, as To, converted by convert (see convert_npy_values).
template <class To, class Convert>
std::vector<To> npy_values(const NpyArray& array, const Convert& convert) {
  std::vector<To> out(static_cast<std::size_t>(array.count));
  switch (array.dtype) {
    case NpyDtype::f4: convert_npy_values<float>(array, out, convert); break;
    case NpyDtype::f8: convert_npy_values<double>(array, out, convert); break;
    case NpyDtype::i1: convert_npy_values<std::int8_t>(array, out, convert); break;
    case NpyDtype::i2: convert_npy_values<std::int16_t>(array, out, convert); break;
    case NpyDtype::i4: convert_npy_values<std::int32_t>(array, out, convert); break;
    case NpyDtype::i8: convert_npy_values<std::int64_t>(array, out, convert); break;
    case NpyDtype::u1: convert_npy_values<std::uint8_t>(array, out, convert); break;
    case NpyDtype::u2: convert_npy_values<std::uint16_t>(array, out, convert); break;
    case NpyDtype::u4: convert_npy_values<std::uint32_t>(array, out, convert); break;
    case NpyDtype::u8: convert_npy_values<std::uint64_t>(array, out, convert); break;
    case NpyDtype::b1: convert_npy_values<bool>(array, out, convert); break;
  }
  return out;
}

// The shapes of n rows of samples of shape S an array may have: (n, S...), flattened (n, S::size)
// and, when S has one value, (n,).
template <ShapeType S>
bool holds_rows_of(const NpyArray& array) {
  if (array.shape.empty()) return false;
  const std::span<const std::int64_t> row(array.shape.data() + 1, array.shape.size() - 1);
  const auto size = static_cast<std::int64_t>(S::size);
  return (row.empty() && S::size == 1) || (row.size() == 1 && row[0] == size) ||
         std::equal(row.begin(), row.end(), S::dims.begin(), S::dims.end(),
                    [](std::int64_t a, int b) { return a == b; });
}

// "(n, 1, 28, 28) or (n, 784)", "(n,) or (n, 1)": the shapes holds_rows_of<S> accepts.
template <ShapeType S>
std::string row_shapes() {
  std::string exact = "(n";
  for (int d : S::dims) exact += ", " + std::to_string(d);
  exact += ")";
  if (S::size == 1) return "(n,) or " + exact;
  return S::rank == 1 ? exact : exact + " or (n, " + std::to_string(S::size) + ")";
}

// What the arrays' targets are called in messages.
template <TargetKind Y>
std::string target_kind_name() {
  if constexpr (class_targets<Y>) return "class-index targets (etnn::data::ClassIndices)";
  else if constexpr (sequence_label_targets<Y>) return "sequence labels (etnn::data::SequenceLabels<" + std::to_string(target_size<Y>) + ">)";
  else if constexpr (multi_hot_targets<Y>) return "multi-hot targets (etnn::data::MultiHot<" + std::to_string(target_size<Y>) + ">)";
  else return "real-valued targets " + Y::to_string();
}

// A Dataset<X, Y> from a features array and a targets array, checked against each other.
template <ShapeType X, TargetKind Y>
Dataset<X, Y> npy_dataset(const NpyArray& features, const NpyArray& targets, bool allow_non_finite) {
  if (!holds_rows_of<X>(features)) {
    features.fail("the features have shape " + features.shape_string() + " but samples of shape " + X::to_string() +
                  " need " + row_shapes<X>() + "; reshape the array before np.save or request the shape it holds");
  }
  if (!holds_rows_of<target_shape<Y>>(targets)) {
    targets.fail("the targets have shape " + targets.shape_string() + " but " + target_kind_name<Y>() + " need " +
                 row_shapes<target_shape<Y>>() + "; reshape the array before np.save or request the target kind it holds");
  }
  if (features.shape[0] != targets.shape[0]) {
    throw IoError(features.where + " holds " + std::to_string(features.shape[0]) + " samples but " + targets.name +
                  " holds " + std::to_string(targets.shape[0]) + " targets; pass the targets of these features");
  }
  return Dataset<X, Y>(
      npy_values<float>(features, [&](auto v, float& out) { return to_feature(v, out, allow_non_finite); }),
      npy_values<target_value<Y>>(targets, [](auto v, target_value<Y>& out) { return to_target<Y>(v, out); }));
}

}  // namespace etnn::data::detail

namespace etnn::data {

struct NpyOptions {
  bool allow_non_finite = false;  // keep NaN and infinite features (targets must be finite)
};

struct NpzOptions {
  std::string features = "x";     // the arrays' names: np.savez(path, x=features, y=targets)
  std::string targets = "y";
  bool allow_non_finite = false;  // keep NaN and infinite features (targets must be finite)
};

// A Dataset<X, Y> from two .npy files: features of shape (n, X...) or (n, X::size), any dtype above
// (float64 and integers become float); targets of shape (n, target_shape<Y>...), (n, target_size<Y>)
// or, for one value per sample, (n,): whole numbers for class indices (any integer or bool dtype, or
// floats holding whole numbers), 0 or 1 for multi-hot rows, finite values for real-valued rows.
// Throws etnn::IoError naming the file and what is wrong.
//   np.save("x.npy", x.astype(np.float32)); np.save("y.npy", y)       # Python
//   auto train = etnn::data::load_npy<etnn::Shape<8>>("x.npy", "y.npy");
template <ShapeType X, TargetKind Y = ClassIndices>
Dataset<X, Y> load_npy(const std::filesystem::path& features, const std::filesystem::path& targets,
                       const NpyOptions& options = {}) {
  const auto read = [](const std::filesystem::path& path, std::vector<unsigned char>& bytes) {
    const std::string name = "'" + path.string() + "'";
    bytes = read_file_bytes(path, "etnn::data::load_npy: " + name);
    return detail::parse_npy(bytes, "etnn::data::load_npy", name);
  };
  std::vector<unsigned char> feature_bytes, target_bytes;
  const detail::NpyArray x = read(features, feature_bytes);
  const detail::NpyArray y = read(targets, target_bytes);
  return detail::npy_dataset<X, Y>(x, y, options.allow_non_finite);
}

// The same from two arrays of one .npz archive (np.savez or np.savez_compressed), by default those
// named x and y: np.savez("train.npz", x=features, y=labels).
template <ShapeType X, TargetKind Y = ClassIndices>
Dataset<X, Y> load_npz(const std::filesystem::path& path, const NpzOptions& options = {}) {
  const std::string who = "etnn::data::load_npz";
  const std::vector<unsigned char> bytes = read_file_bytes(path, who + ": '" + path.string() + "'");
  const detail::ZipArchive archive(bytes, who + ": '" + path.string() + "'");
  const auto read = [&](const std::string& array, std::vector<unsigned char>& member_bytes) {
    const detail::ZipMember* member = archive.find(array + ".npy");
    if (!member) {
      archive.fail("no array '" + array + "' (member '" + array + ".npy'); the archive holds " + archive.member_list() +
                   "; name the arrays with NpzOptions{.features = ..., .targets = ...}, or save them as "
                   "np.savez(path, x=features, y=targets)");
    }
    member_bytes = archive.extract(*member);
    return detail::parse_npy(member_bytes, who, "'" + path.string() + "' member '" + member->name + "'");
  };
  std::vector<unsigned char> feature_bytes, target_bytes;
  const detail::NpyArray x = read(options.features, feature_bytes);
  const detail::NpyArray y = read(options.targets, target_bytes);
  return detail::npy_dataset<X, Y>(x, y, options.allow_non_finite);
}

}  // namespace etnn::data
