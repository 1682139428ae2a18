#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// load_csv<X, Y>(path, {.targets = {"price"}}): a Dataset<X, Y> from a CSV table (RFC 4180):
//   line 1        column names                        sqft,rooms,age,price
//   line 2 ...    one sample per line, numeric cells  1200, 3, 15, 245000.5
// Cells are separated by commas (CsvOptions::delimiter), may be surrounded by spaces, and may be
// quoted ("a, b" with "" for a quote, newlines allowed inside); lines end in LF or CRLF, the last one
// may lack it, and empty lines at the end are ignored (an empty line before data is an error). A
// UTF-8 byte-order mark is skipped. Numbers are read with std::from_chars (no locale): features and
// real-valued or multi-hot targets as float, class labels as whole numbers in [0, INT_MAX).
// Empty cells, text, and nan/inf (in features unless .allow_non_finite) are errors naming the line
// and column.
// The features of a sample are the columns not named in .targets, in file order (or .features, in
// its order): there must be X::size of them, and target_size<Y> target columns.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"
#include "../core/shape.hpp"
#include "dataset.hpp"
#include "file_values.hpp"
#include "targets.hpp"

namespace etnn::data {

struct CsvOptions {
  std::vector<std::string> targets{};   // the target columns, in the order of a sample's target values
  std::vector<std::string> features{};  // the feature columns in order; empty: all others, in file order
  char delimiter = ',';                 // ';' or '\t' for other dialects
  bool allow_non_finite = false;        // keep nan and inf feature cells (targets must be finite)
};

}  // namespace etnn::data

namespace etnn::data::detail {

struct CsvCell {
  std::string text;   // unquoted, "" unescaped, surrounding spaces removed
  std::size_t line;   // 1-based line where the cell starts
};

// Splits a CSV text into records of cells, one record at a time.
class CsvReader {
 public:
  CsvReader(std::string_view text, std::string where, char delimiter)
      : text_(text), where_(std::move(where)), delimiter_(delimiter) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);  // UTF-8 byte-order mark
  }

  const std::string& where() const noexcept { return where_; }
  [[noreturn]] void fail(std::size_t line, const std::string& what) const {
    throw IoError(where_ + ": line " + std::to_string(line) + ": " + what);
  }

  // The next record's cells (the vector and its strings are reused); false when only blank lines
  // are left. The record starts on line(), read before the call.
  bool next(std::vector<CsvCell>& cells) {
    if (text_.find_first_not_of(" \t\r\n", pos_) == std::string_view::npos) return false;
    record_line_ = line_;
    if (text_[pos_] == '\n' || text_.substr(pos_, 2) == "\r\n") {
      fail(line_, "the line is empty but lines with data follow; remove it");
    }
    std::size_t count = 0;
    for (bool more = true; more; ++count) {
      if (cells.size() == count) cells.emplace_back();
      more = read_cell(cells[count]);
    }
    cells.resize(count);
    return true;
  }

  // The line the last record returned by next() starts on.
  std::size_t record_line() const noexcept { return record_line_; }

 private:
  bool is_space(char c) const noexcept { return (c == ' ' || c == '\t') && c != delimiter_; }
  void skip_spaces() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  // Reads one cell into cell; returns whether another cell of the same record follows.
  bool read_cell(CsvCell& cell) {
    skip_spaces();
    cell.line = line_;
    cell.text.clear();
    if (pos_ < text_.size() && text_[pos_] == '"') {
      ++pos_;
      for (;;) {
        const std::size_t quote = text_.find('"', pos_);
        if (quote == std::string_view::npos) fail(cell.line, "a quoted cell is not closed; add the closing \"");
        const std::string_view part = text_.substr(pos_, quote - pos_);
        line_ += static_cast<std::size_t>(std::count(part.begin(), part.end(), '\n'));
        cell.text += part;
        pos_ = quote + 1;
        if (pos_ < text_.size() && text_[pos_] == '"') {  // "" is a quote inside the cell
          cell.text += '"';
          ++pos_;
        } else {
          break;
        }
      }
      skip_spaces();
    } else {
      const char stops[] = {delimiter_, '\n'};
      const std::size_t end = std::min(text_.find_first_of(std::string_view(stops, 2), pos_), text_.size());
      std::string_view raw = text_.substr(pos_, end - pos_);
      if (!raw.empty() && raw.back() == '\r' && end < text_.size() && text_[end] == '\n') raw.remove_suffix(1);
      while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
      cell.text.assign(raw);
      pos_ = end;
    }
    return end_cell(cell);
  }

  // After a cell: a delimiter (another cell follows), a line end or the end of the text.
  bool end_cell(const CsvCell& cell) {
    if (pos_ < text_.size() && text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_++];
    if (c == delimiter_) return true;
    if (c == '\n') {
      ++line_;
      return false;
    }
    fail(cell.line, std::string("unexpected '") + c + "' after the quoted cell \"" + cell.text +
                        "\"; quote the whole cell");
  }

  std::string_view text_;
  std::string where_;
  char delimiter_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  std::size_t record_line_ = 1;
};

// The cell as a To (float or int), converted by convert(parsed, To&) -> reason or null
// (file_values.hpp). The whole cell must be a number: read by std::from_chars (no locale) as float
// for float values, as double for class labels.
template <class To, class Convert>
To parse_csv_cell(const CsvReader& reader, const CsvCell& cell, std::size_t column, const std::string& name,
                  const Convert& convert) {
  const auto fail = [&](const std::string& what) {
    reader.fail(cell.line, "column " + std::to_string(column + 1) + " ('" + name + "'): " + what);
  };
  if (cell.text.empty()) fail("the cell is empty; fill in the value or remove the line");
  using Parsed = std::conditional_t<std::is_same_v<To, float>, float, double>;
  Parsed v{};
  const char* first = cell.text.data();
  const char* last = first + cell.text.size();
  const auto [end, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) {
    fail("the cell \"" + cell.text + "\" is beyond " + (std::is_same_v<Parsed, float> ? "float" : "double") +
         "'s range; scale the column");
  }
  if (ec != std::errc{} || end != last) fail("the cell \"" + cell.text + "\" is not a number; fix or remove it");
  To out{};
  if (const char* why = convert(v, out)) fail("the cell \"" + cell.text + "\" " + why);
  return out;
}

// "'sqft', 'rooms', 'price'": column names for messages.
inline std::string csv_column_list(const std::vector<CsvCell>& header, const std::vector<std::size_t>& columns) {
  std::string out;
  for (std::size_t c : columns) out += (out.empty() ? "'" : ", '") + header[c].text + "'";
  return out.empty() ? "none" : out;
}

// The columns a load reads: target columns in the order of the options, feature columns in the
// order of the options or, without them, every other column in file order.
struct CsvColumns {
  std::vector<std::size_t> features, targets;
};

inline CsvColumns csv_columns(const CsvReader& reader, const std::vector<CsvCell>& header, const CsvOptions& options) {
  std::vector<std::size_t> all(header.size());
  for (std::size_t c = 0; c < all.size(); ++c) all[c] = c;
  const std::string listing = "the header has " + csv_column_list(header, all);
  for (std::size_t c = 0; c < header.size(); ++c) {
    for (std::size_t d = 0; d < c; ++d) {
      if (header[d].text == header[c].text) {
        reader.fail(1, "columns " + std::to_string(d + 1) + " and " + std::to_string(c + 1) + " are both named '" +
                           header[c].text + "'; give every column its own name");
      }
    }
  }
  const auto find = [&](const std::string& name, const char* role) {
    const auto it = std::find_if(header.begin(), header.end(), [&](const CsvCell& cell) { return cell.text == name; });
    if (it == header.end()) reader.fail(1, std::string("no ") + role + " column named '" + name + "'; " + listing);
    return static_cast<std::size_t>(it - header.begin());
  };
  CsvColumns columns;
  if (options.targets.empty()) {
    reader.fail(1, "no target column given; name it in the options, e.g. {.targets = {\"label\"}}; " + listing);
  }
  for (const std::string& name : options.targets) columns.targets.push_back(find(name, "target"));
  const auto is_target = [&](std::size_t c) {
    return std::find(columns.targets.begin(), columns.targets.end(), c) != columns.targets.end();
  };
  for (std::size_t c = 0; c < columns.targets.size(); ++c) {
    if (std::count(columns.targets.begin(), columns.targets.end(), columns.targets[c]) > 1) {
      reader.fail(1, "the target column '" + header[columns.targets[c]].text + "' is named twice in .targets");
    }
  }
  if (options.features.empty()) {
    for (std::size_t c = 0; c < header.size(); ++c)
      if (!is_target(c)) columns.features.push_back(c);
  }
  for (const std::string& name : options.features) {
    const std::size_t c = find(name, "feature");
    if (is_target(c) || std::find(columns.features.begin(), columns.features.end(), c) != columns.features.end()) {
      reader.fail(1, "the column '" + name + "' is named twice in .features and .targets; name each column once");
    }
    columns.features.push_back(c);
  }
  return columns;
}

}  // namespace etnn::data::detail

namespace etnn::data {

// A Dataset<X, Y> from the CSV table at path (format above). Throws etnn::IoError naming the file,
// and for a bad cell its line (the header is line 1) and column, number and name.
template <ShapeType X, TargetKind Y = ClassIndices>
Dataset<X, Y> load_csv(const std::filesystem::path& path, const CsvOptions& options) {
  const std::string where = "etnn::data::load_csv: '" + path.string() + "'";
  const std::vector<unsigned char> bytes = read_file_bytes(path, where);
  detail::CsvReader reader(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), where,
                           options.delimiter);
  std::vector<detail::CsvCell> header, cells;
  if (!reader.next(header)) reader.fail(1, "the file is empty; its first line must name the columns");
  const detail::CsvColumns columns = detail::csv_columns(reader, header, options);
  const bool unnamed = std::any_of(header.begin(), header.end(), [](const detail::CsvCell& c) { return c.text.empty(); });
  const std::string hint = unnamed ? " (an unnamed column is often pandas' index: write with index=False)" : "";
  if (columns.features.size() != X::size) {
    reader.fail(1, std::to_string(columns.features.size()) + " feature columns (" +
                       detail::csv_column_list(header, columns.features) + ") but samples of shape " + X::to_string() +
                       " need " + std::to_string(X::size) + "; name the feature columns with .features or the "
                       "target columns with .targets" + hint);
  }
  if (columns.targets.size() != target_size<Y>) {
    reader.fail(1, std::to_string(columns.targets.size()) + " target columns (" +
                       detail::csv_column_list(header, columns.targets) + ") but the target kind needs " +
                       std::to_string(target_size<Y>) + " per sample; name that many in .targets");
  }
  std::vector<float> features;
  std::vector<target_value<Y>> targets;
  while (reader.next(cells)) {
    if (cells.size() != header.size()) {
      reader.fail(reader.record_line(), std::to_string(cells.size()) + " cells but the header has " +
                                            std::to_string(header.size()) + " columns; fix the line");
    }
    for (std::size_t c : columns.features) {
      features.push_back(detail::parse_csv_cell<float>(reader, cells[c], c, header[c].text, [&](auto v, float& out) {
        return detail::to_feature(v, out, options.allow_non_finite);
      }));
    }
    for (std::size_t c : columns.targets) {
      targets.push_back(detail::parse_csv_cell<target_value<Y>>(
          reader, cells[c], c, header[c].text, [](auto v, target_value<Y>& out) { return detail::to_target<Y>(v, out); }));
    }
  }
  return Dataset<X, Y>(std::move(features), std::move(targets));
}

}  // namespace etnn::data
