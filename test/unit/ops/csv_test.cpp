// csv(...) (pipeline/io/csv.hpp, kernels/csv.cpp): RFC 4180 records, typed columns, defaults and
// the errors that name the file, the line and the column.
#include <doctest/doctest.h>

#include "ops_test_util.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/csv.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/support/text.hpp"

using namespace conveyor;
using conveyor::testing::contains;

namespace {

Dataset csv_of(const std::string& file, std::vector<std::string> types, bool header = false,
               std::vector<int64_t> select = {}, Element defaults = {}, std::string delim = ",",
               std::string na = "") {
  return Dataset::csv({file}, std::move(types), header, std::move(delim), std::move(na),
                      std::move(select), std::move(defaults));
}

Tensor required() { return Tensor::vector<int64_t>({}); }

} // namespace

TEST_CASE("csv: typed columns, a header, RFC 4180 quoting across lines and CRLF") {
  test::TempDir dir;
  test::write_file(dir.file("a.csv"), "id,name,score\r\n"
                                      "1,plain,0.5\r\n"
                                      "2,\"with, comma\",1e3\n"
                                      "3,\"say \"\"hi\"\"\",-2\n"
                                      "4,\"two\nlines\",+7.25\n"
                                      "5,last,inf"); // no final line break
  auto ds = csv_of(dir.file("a.csv"), {"int64", "string", "float64"}, true);
  REQUIRE(ds.validate().ok());
  CHECK(test::show(ds) == "[(1, \"plain\", float64(0.5)), (2, \"with, comma\", float64(1000.0)), "
                          "(3, \"say \\\"hi\\\"\", float64(-2.0)), (4, \"two\\nlines\", "
                          "float64(7.25)), (5, \"last\", float64(inf))]");
}

TEST_CASE("csv: TSV, select_cols, int32/float32 and the text form") {
  test::TempDir dir;
  test::write_file(dir.file("a.tsv"), "x\t10\tskip\t1.5\ny\t-3\tskip\t2\n");
  auto ds = csv_of(dir.file("a.tsv"), {"int32", "float32"}, false, {1, 3}, {}, "\t");
  CHECK(test::show(ds) == "[(int32(10), 1.5), (int32(-3), 2.0)]");
  auto parsed = parse_dataset("csv([\"" + dir.file("a.tsv") +
                              "\"], [\"string\", \"int64\"], field_delim=\"\\t\", "
                              "select_cols=[0, 1])");
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  CHECK(test::show(*parsed) == "[(\"x\", 10), (\"y\", -3)]");
  auto spec = parsed->element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() == "(TensorSpec(shape=(), dtype=string), TensorSpec(shape=(), "
                             "dtype=int64))");
}

TEST_CASE("csv: missing values take their default, without one they are an error naming the "
          "file, line and column") {
  test::TempDir dir;
  test::write_file(dir.file("m.csv"), "a,b,c\n1,,x\n,2.5,NA\n3,4,\"\"\n");
  const Element defaults{{Tensor::scalar(int64_t{-1}), Tensor::scalar(0.0), Tensor::scalar("?")}};
  auto ds =
    csv_of(dir.file("m.csv"), {"int64", "float32", "string"}, true, {}, defaults, ",", "NA");
  // A quoted "" is an empty string, not a missing value.
  CHECK(test::show(ds) == "[(1, 0.0, \"x\"), (-1, 2.5, \"?\"), (3, 4.0, \"\")]");

  const Element some_required{{Tensor::scalar(int64_t{0}), required(), Tensor::scalar("?")}};
  auto strict = csv_of(dir.file("m.csv"), {"int64", "float32", "string"}, true, {}, some_required);
  Status st = test::first_error(strict);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(contains(st.message(), dir.file("m.csv") + " line 2 column 1 (`b`) has no value"));

  auto all_required = csv_of(dir.file("m.csv"), {"int64", "float32", "string"}, true);
  st = test::first_error(all_required);
  CHECK(contains(st.message(), "line 2 column 1 (`b`) has no value and no default"));
}

TEST_CASE("csv: a bad number is an error naming the line and column, the next record goes on") {
  test::TempDir dir;
  test::write_file(dir.file("n.csv"), "1,2\n3,x4\n\"multi\nline\",5\n99999999999,6\n7,8\n");
  auto ds = csv_of(dir.file("n.csv"), {"string", "int64"});
  Status st = test::first_error(ds);
  CHECK(contains(st.message(), "`csv`: " + dir.file("n.csv") +
                                 " line 2 column 1: `x4` is not an "
                                 "int64"));
  // The iterator goes on after a record that does not decode (ignore_errors skips it).
  CHECK(test::show(ds.ignore_errors()) ==
        "[(\"1\", 2), (\"multi\\nline\", 5), (\"99999999999\", 6), (\"7\", 8)]");
  auto narrow = csv_of(dir.file("n.csv"), {"int32", "string"});
  // Line numbers count physical lines: the record after the two-line one starts on line 5.
  std::vector<Element> got;
  IteratorContext ctx;
  auto it = narrow.make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<std::string> errors;
  for (int i = 0; i < 10; ++i) {
    Element e;
    bool end = false;
    Status s = (*it)->get_next(e, end);
    if (end)
      break;
    if (!s.ok())
      errors.push_back(s.message());
  }
  REQUIRE(errors.size() == 2);
  CHECK(contains(errors[0], "line 3 column 0: `multi\nline` is not an int32"));
  CHECK(contains(errors[1], "line 5 column 0: `99999999999` is out of the int32 range"));
}

TEST_CASE("csv: record shape and quoting errors") {
  test::TempDir dir;
  test::write_file(dir.file("f.csv"), "1,2\n1,2,3\n");
  Status st = test::first_error(csv_of(dir.file("f.csv"), {"int64", "int64"}));
  CHECK(contains(st.message(), "line 2 has 3 field(s), expected 2"));
  st = test::first_error(csv_of(dir.file("f.csv"), {"int64"}, false, {4}));
  CHECK(contains(st.message(), "line 1 has 2 field(s), but select_cols asks for column 4"));

  test::write_file(dir.file("q.csv"), "a,b\"c\n");
  st = test::first_error(csv_of(dir.file("q.csv"), {"string", "string"}));
  CHECK(contains(st.message(), "line 1 field 1: a `\"` inside an unquoted field"));
  test::write_file(dir.file("u.csv"), "a,\"never closed\n");
  st = test::first_error(csv_of(dir.file("u.csv"), {"string", "string"}));
  CHECK(contains(st.message(), "a quoted field is not closed before the end of the file"));
  test::write_file(dir.file("g.csv"), "\"a\"b,c\n");
  st = test::first_error(csv_of(dir.file("g.csv"), {"string", "string"}));
  CHECK(contains(st.message(), "must be followed by the delimiter"));
}

TEST_CASE("csv: arguments are checked when the dataset is validated") {
  auto bad = [](const Dataset& ds) { return ds.validate().message(); };
  CHECK(contains(bad(Dataset::csv({"a"}, {})), "`column_types` must name at least one"));
  CHECK(contains(bad(Dataset::csv({"a"}, {"int8"})),
                 "entry 0 must be \"int32\", \"int64\", \"float32\", \"float64\" or \"string\""));
  CHECK(contains(bad(Dataset::csv({"a"}, {"int64", "int64"}, false, ",", "", {2, 1})),
                 "`select_cols` must be increasing"));
  CHECK(contains(bad(Dataset::csv({"a"}, {"int64"}, false, ",", "", {0, 1})),
                 "`select_cols` has 2 entries, `column_types` 1"));
  CHECK(contains(bad(Dataset::csv({"a"}, {"int64"}, false, ";;")), "`field_delim` must be one"));
  CHECK(
    contains(bad(Dataset::csv({"a"}, {"int64"}, false, ",", "", {}, Element{Tensor::scalar("x")})),
             "`record_defaults` entry 0 is a string, but the column is int64"));
  CHECK(contains(bad(Dataset::csv({"a"}, {"int64", "string"}, false, ",", "", {},
                                  Element{Tensor::scalar(int64_t{1})})),
                 "`record_defaults` has 1 entries"));
  CHECK(Dataset::csv({"a"}, {"float32", "string"}, false, ",", "", {},
                     Element{{Tensor::scalar(int64_t{1}), required()}})
          .validate()
          .ok());
}

TEST_CASE("csv: DYNAMIC splits are whole files, each with its header") {
  test::TempDir dir;
  test::write_file(dir.file("p1.csv"), "k,v\n1,a\n2,b\n");
  test::write_file(dir.file("p2.csv"), "k,v\n3,c\n");
  auto ds = Dataset::csv({dir.file("p*.csv")}, {"int64", "string"}, true);
  auto provider = make_split_provider(ds);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  IteratorContext ctx;
  ctx.split_provider = provider->get();
  auto it = ds.make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<Element> out;
  REQUIRE(test::drain(**it, out).ok());
  CHECK(test::str(out) == "[(1, \"a\"), (2, \"b\"), (3, \"c\")]");
}
