// load_csv: column selection, the target kinds, the dialect (quotes, spaces, CRLF, a missing final
// newline, trailing empty lines, a byte-order mark, other delimiters), and every malformed case with
// its message (file, line, column number and name).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <etnn/data/data.hpp>

#include "support/files.hpp"

namespace {

using etnn::Shape;
using etnn::data::ClassIndices;
using etnn::data::CsvOptions;
using etnn::data::MultiHot;
using etnn_test::check_io_error;
using etnn_test::TempDir;
using etnn_test::write_file;

template <class X, class Y = ClassIndices>
etnn::data::Dataset<X, Y> load(const TempDir& dir, const std::string& text, const CsvOptions& options) {
  return etnn::data::load_csv<X, Y>(write_file(dir / "t.csv", text), options);
}

// Checks that the table (features a, b; target label) throws an IoError naming t.csv and parts.
template <class X = Shape<2>, class Y = ClassIndices>
void check_error(const std::string& text, std::initializer_list<std::string_view> parts,
                 const CsvOptions& options = {.targets = {"label"}}) {
  CAPTURE(text);
  TempDir dir;
  check_io_error([&] { load<X, Y>(dir, text, options); }, {"etnn::data::load_csv: '", "t.csv'"});
  check_io_error([&] { load<X, Y>(dir, text, options); }, parts);
}

}  // namespace

TEST_CASE("load_csv takes the columns not named as targets as features, in file order") {
  TempDir dir;
  const auto data = load<Shape<3>>(dir, "a,label,b,c\n1,2,3,4\n-5.5,0,1e3,0.1\n", {.targets = {"label"}});
  REQUIRE(data.size() == 2);
  CHECK(data.sample(0)[0] == 1.0f);
  CHECK(data.sample(0)[2] == 4.0f);
  CHECK(data.sample(1)[0] == -5.5f);
  CHECK(data.sample(1)[1] == 1000.0f);
  CHECK(data.sample(1)[2] == 0.1f);  // read as float: the float nearest 0.1
  CHECK(data.label(0) == 2);
  CHECK(data.label(1) == 0);

  const auto chosen = load<Shape<2>>(dir, "a,label,b,c\n1,2,3,4\n", {.targets = {"label"}, .features = {"c", "a"}});
  CHECK(chosen.sample(0)[0] == 4.0f);
  CHECK(chosen.sample(0)[1] == 1.0f);
}

TEST_CASE("load_csv reads real-valued and multi-hot targets in the order of .targets") {
  TempDir dir;
  const auto real = load<Shape<1>, Shape<2>>(dir, "y2,x,y1\n0.5,1,-2\n", {.targets = {"y1", "y2"}});
  CHECK(real.target(0)[0] == -2.0f);
  CHECK(real.target(0)[1] == 0.5f);
  const auto tags = load<Shape<1>, MultiHot<3>>(dir, "x,a,b,c\n7,1,0,1\n8,0,0,0\n", {.targets = {"a", "b", "c"}});
  CHECK(tags.target(0)[2] == 1.0f);
  CHECK(tags.target(1)[0] == 0.0f);
  CHECK(load<Shape<1>>(dir, "x,label\n1,3.0\n", {.targets = {"label"}}).label(0) == 3);  // a whole float
}

TEST_CASE("load_csv reads quotes, spaces, CRLF, a final line without newline and trailing empty lines") {
  TempDir dir;
  const CsvOptions options{.targets = {"the \"label\", quoted"}};
  const auto data = load<Shape<2>>(
      dir, "\xEF\xBB\xBF a ,\"b\nsecond line\",  \"the \"\"label\"\", quoted\"\r\n 1 , \"2\" ,3\r\n4,5,6\r\n\r\n\n  \n",
      options);
  REQUIRE(data.size() == 2);
  CHECK(data.sample(1)[1] == 5.0f);
  CHECK(data.label(1) == 6);
  CHECK(load<Shape<2>>(dir, "a,b,label\n1,2,3", {.targets = {"label"}}).label(0) == 3);
  CHECK(load<Shape<2>>(dir, "a;b;label\n1.5;2;3\n", {.targets = {"label"}, .delimiter = ';'}).sample(0)[0] == 1.5f);
  CHECK(load<Shape<2>>(dir, "a\tb\tlabel\n1\t 2\t3\n", {.targets = {"label"}, .delimiter = '\t'}).sample(0)[1] == 2.0f);
  CHECK(load<Shape<2>>(dir, "a,b,label\n", {.targets = {"label"}}).size() == 0);
  CHECK(std::isnan(load<Shape<2>>(dir, "a,b,label\nnan,-inf,1\n", {.targets = {"label"}, .allow_non_finite = true})
                       .sample(0)[0]));
}

TEST_CASE("load_csv names the file, the line and the column of a bad cell") {
  check_error("a,b,label\n1,2,3\n1,,3\n", {"line 3: column 2 ('b'): the cell is empty"});
  check_error("a,b,label\n1,2,3\n1,x2,3\n", {"line 3: column 2 ('b'): the cell \"x2\" is not a number"});
  check_error("a,b,label\n1,2 3,3\n", {"line 2: column 2 ('b'): the cell \"2 3\" is not a number"});
  check_error("a,b,label\n1,2,3\n1,nan,3\n", {"line 3: column 2 ('b'): the cell \"nan\" is NaN or infinite",
                                             "allow_non_finite"});
  check_error("a,b,label\n1,inf,3\n", {"line 2", "\"inf\" is NaN or infinite"});
  check_error("a,b,label\n1,1e39,3\n", {"line 2: column 2 ('b'): the cell \"1e39\" is beyond float's range"});
  check_error("a,b,label\n1,2,1e999\n", {"column 3 ('label')", "beyond double's range"});
  check_error("a,b,label\n1,2,2.5\n", {"line 2: column 3 ('label'): the cell \"2.5\" is not a whole number"});
  check_error("a,b,label\n1,2,-1\n", {"\"-1\" is outside [0, INT_MAX)"});
  check_error("a,b,label\n1,2,2147483647\n", {"outside [0, INT_MAX)"});
  check_error("a,b,label\n1,2,nan\n", {"\"nan\" is not a whole number"}, {.targets = {"label"}, .allow_non_finite = true});
  check_error<Shape<1>, Shape<1>>("a,label\n1,inf\n", {"is NaN or infinite but targets must be finite"}, {.targets = {"label"}});
  check_error<Shape<1>, MultiHot<2>>("a,s,t\n1,0,2\n", {"line 2: column 3 ('t')", "not 0 or 1"}, {.targets = {"s", "t"}});
  check_error("a,b,label\n1,2,3\n1,2\n", {"line 3: 2 cells but the header has 3 columns"});
  check_error("a,b,label\n1,2,3,4\n", {"line 2: 4 cells but the header has 3 columns"});
  check_error("a,b,label\n\n1,2,3\n", {"line 2: the line is empty but lines with data follow"});
  check_error("a,b,label\n1,\"2,3\n", {"line 2: a quoted cell is not closed"});
  check_error("a,b,label\n1,\"2\"x,3\n", {"line 2: unexpected 'x' after the quoted cell \"2\""});
  check_error("a,\"b\nc\",label\n1,2,3\n1,2,x\n", {"line 4: column 3 ('label')"});  // a header name over two lines
}

TEST_CASE("load_csv checks the header against the requested columns and shapes") {
  check_error("", {"line 1: the file is empty"});
  check_error("\n\n", {"line 1: the file is empty"});
  check_error("a,b,c\n1,2,3\n", {"no target column named 'label'", "the header has 'a', 'b', 'c'"});
  check_error("a,b,label\n1,2,3\n", {"no target column given", ".targets"}, {});
  check_error("a,b,label\n1,2,3\n", {"no feature column named 'z'", "the header has 'a', 'b', 'label'"},
              {.targets = {"label"}, .features = {"a", "z"}});
  check_error("a,b,label\n1,2,3\n", {"'label' is named twice"}, {.targets = {"label"}, .features = {"a", "label"}});
  check_error("a,b,label\n1,2,3\n", {"'a' is named twice"}, {.targets = {"label"}, .features = {"a", "a"}});
  check_error("a,a,label\n1,2,3\n", {"line 1: columns 1 and 2 are both named 'a'"});
  check_error("a,b,c,label\n1,2,3,4\n", {"3 feature columns ('a', 'b', 'c')", "samples of shape (2) need 2"});
  check_error(",a,b,label\n0,1,2,3\n", {"3 feature columns ('', 'a', 'b')", "index=False"});
  check_error<Shape<2>, Shape<2>>("a,b,label\n1,2,3\n", {"1 target columns ('label')", "needs 2 per sample"});
  check_io_error([] { etnn::data::load_csv<Shape<2>>("/nonexistent/t.csv", {.targets = {"y"}}); },
                 {"'/nonexistent/t.csv'", "cannot read the file"});
}
