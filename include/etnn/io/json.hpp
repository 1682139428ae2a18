#pragma once
// Private to io/: include <etnn/io/io.hpp> or <etnn/etnn.hpp>.
// A strict JSON reader for the small documents etnn reads (safetensors headers): objects,
// arrays, strings (validated UTF-8, all escapes), and integers. Anything else, malformed text,
// duplicate keys, invalid UTF-8, nesting deeper than 64 levels or an array of more than 64
// elements (a tensor has at most 64 dimensions, as in PyTorch) is an error naming the byte
// offset. Memory stays within a small multiple of the text: nothing is sized from its numbers.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../core/error.hpp"

namespace etnn::io::json {

struct Value;
using Object = std::map<std::string, Value, std::less<>>;
using Array = std::vector<Value>;

// Integers are kept as written (sign and magnitude), so that range checks stay exact.
struct Integer {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

struct Value {
  std::variant<std::string, Integer, Array, Object> data;

  const Object* object() const { return std::get_if<Object>(&data); }
  const Array* array() const { return std::get_if<Array>(&data); }
  const std::string* string() const { return std::get_if<std::string>(&data); }
  const Integer* integer() const { return std::get_if<Integer>(&data); }
};

// Thrown with a message that says what is wrong and at which byte.
struct ParseError : IoError {
  using IoError::IoError;
};

inline constexpr std::size_t max_array_length = 64;

namespace detail {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (at_ < text_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ParseError(what + " at byte " + std::to_string(at_));
  }

  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }

  char peek() {
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end of the JSON text");
    return text_[at_];
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }

  Value value(int depth) {
    if (depth > 64) fail("JSON nested deeper than 64 levels");
    const char c = peek();
    if (c == '{') return {object(depth)};
    if (c == '[') return {array(depth)};
    if (c == '"') return {string()};
    if (c == '-' || (c >= '0' && c <= '9')) return {integer()};
    fail("expected an object, array, string or integer");
  }

  Object object(int depth) {
    expect('{');
    Object out;
    if (peek() == '}') {
      ++at_;
      return out;
    }
    while (true) {
      if (peek() != '"') fail("expected a string key");
      const std::size_t key_at = at_;
      std::string key = string();
      expect(':');
      Value v = value(depth + 1);
      if (!out.emplace(std::move(key), std::move(v)).second) {
        at_ = key_at;
        fail("duplicate key");
      }
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect('}');
      return out;
    }
  }

  Array array(int depth) {
    expect('[');
    Array out;
    if (peek() == ']') {
      ++at_;
      return out;
    }
    while (true) {
      if (out.size() == max_array_length) fail("array longer than 64 elements");
      out.push_back(value(depth + 1));
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect(']');
      return out;
    }
  }

  Integer integer() {
    Integer out;
    if (text_[at_] == '-') {
      out.negative = true;
      ++at_;
    }
    const std::size_t first = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[at_] - '0');
      if (out.magnitude > (UINT64_MAX - digit) / 10) fail("integer too large");
      out.magnitude = out.magnitude * 10 + digit;
      ++at_;
    }
    if (at_ == first) fail("expected digits");
    if (text_[first] == '0' && at_ - first > 1) fail("leading zeros are not JSON");
    if (at_ < text_.size() && (text_[at_] == '.' || text_[at_] == 'e' || text_[at_] == 'E'))
      fail("only integers are expected here");
    return out;
  }

  unsigned hex4() {
    if (text_.size() - at_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[at_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("invalid \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One UTF-8 sequence starting at at_, validated (no overlongs, surrogates or values > U+10FFFF).
  void utf8(std::string& out) {
    const auto b0 = static_cast<unsigned char>(text_[at_]);
    int length = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || text_.size() - at_ < static_cast<std::size_t>(length)) fail("invalid UTF-8");
    unsigned cp = length == 1 ? b0 : b0 & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const auto b = static_cast<unsigned char>(text_[at_ + static_cast<std::size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr unsigned min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_length[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
    out.append(text_.substr(at_, static_cast<std::size_t>(length)));
    at_ += static_cast<std::size_t>(length);
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("unterminated string");
      const char c = text_[at_];
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        utf8(out);
        continue;
      }
      if (++at_ >= text_.size()) fail("unterminated escape");
      const char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(at_, 2) != "\\u") fail("unpaired surrogate escape");
            at_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("invalid escape");
      }
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace detail

// Parses a whole JSON document; throws ParseError.
inline Value parse(std::string_view text) { return detail::Parser(text).document(); }

// A JSON string literal for `s` (which must be valid UTF-8).
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace etnn::io::json
