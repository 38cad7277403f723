// cache: memory replay under repeat, file cache committed after a full pass and reused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "ops_test_util.hpp"

using namespace conveyor;

TEST_CASE("memory cache: later passes replay without running the input") {
  test::register_test_functions();
  test::count_calls = 0;
  auto ds = Dataset::range(5).map("test_count_calls").map("square").cache();
  CHECK(test::show(ds.repeat(3)) == "[0, 1, 4, 9, 16, 0, 1, 4, 9, 16, 0, 1, 4, 9, 16]");
  CHECK(test::count_calls == 5);
}

TEST_CASE("memory cache: a partial pass is not recorded") {
  test::register_test_functions();
  test::count_calls = 0;
  // take(2) abandons each pass of the cache early, so every pass reads the input again.
  CHECK(test::show(Dataset::range(5).map("test_count_calls").cache().take(2).repeat(2)) ==
        "[0, 1, 0, 1]");
  CHECK(test::count_calls == 4);
}

TEST_CASE("memory cache: a shuffled input is replayed in its first order") {
  auto out = test::run(Dataset::range(10).shuffle(10, 3).cache().repeat(2));
  REQUIRE(out.size() == 20);
  for (int i = 0; i < 10; ++i)
    CHECK(out[i] == out[i + 10]);
}

TEST_CASE("file cache: committed after a complete pass, then read by a new iterator") {
  test::register_test_functions();
  test::TempDir dir;
  const std::string prefix = dir.file("squares");
  test::count_calls = 0;
  auto ds = Dataset::range(6).map("test_count_calls").map("square").cache(prefix);

  auto it = ds.make_iterator();
  REQUIRE(it.ok());
  std::vector<Element> partial;
  REQUIRE(test::drain(**it, partial, 3).ok());
  CHECK(!std::filesystem::exists(prefix + ".cache")); // a partial pass is not committed
  it->reset();
  // ...and leaves no temporary files behind.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 0);

  CHECK(test::show(ds) == "[0, 1, 4, 9, 16, 25]");
  CHECK(std::filesystem::exists(prefix + ".cache"));
  test::count_calls = 0;
  CHECK(test::show(ds) == "[0, 1, 4, 9, 16, 25]");
  CHECK(test::show(ds.repeat(2)) == "[0, 1, 4, 9, 16, 25, 0, 1, 4, 9, 16, 25]");
  CHECK(test::count_calls == 0);
  // The file stands in for its input only: another input with the same prefix is refused.
  Status other = test::first_error(Dataset::range(2).cache(prefix));
  CHECK(other.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(other.message().find(prefix + ".cache") != std::string::npos, other.message());
  CHECK(other.message().find("written by another pipeline") != std::string::npos);
}

TEST_CASE("file cache keeps strings, tuples and tensors intact") {
  test::TempDir dir;
  auto ds = Dataset::zip({Dataset::range(3).map("to_string"), Dataset::range(3).batch(2).repeat(2)})
              .cache(dir.file("c"));
  auto first = test::show(ds);
  CHECK(first == "[(\"0\", [0, 1]), (\"1\", [2]), (\"2\", [0, 1])]");
  CHECK(test::show(ds) == first);
}

TEST_CASE("file cache: a truncated file is data_loss naming it") {
  test::TempDir dir;
  const std::string prefix = dir.file("t");
  CHECK(test::show(Dataset::range(4).cache(prefix)) == "[0, 1, 2, 3]");
  const auto size = std::filesystem::file_size(prefix + ".cache");
  std::filesystem::resize_file(prefix + ".cache", size - 5);
  Status st = test::first_error(Dataset::range(4).cache(prefix));
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find(prefix + ".cache") != std::string::npos);
  test::write_file(prefix + ".cache", "garbage!garbage!");
  CHECK(test::first_error(Dataset::range(4).cache(prefix)).code() == ErrorCode::data_loss);
}

TEST_CASE("file cache: a damaged record is data_loss naming the file, before it is delivered") {
  test::TempDir dir;
  const std::string prefix = dir.file("d");
  const std::string file = prefix + ".cache";
  CHECK(test::show(Dataset::range(3).map("to_string").cache(prefix)) == "[\"0\", \"1\", \"2\"]");
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The last record's last byte (the string "2"), just before the 20-byte trailer.
  const std::size_t at = bytes.size() - 21;
  REQUIRE(bytes[at] == '2');
  bytes[at] = '7';
  test::write_file(file, bytes);
  auto it = Dataset::range(3).map("to_string").cache(prefix).make_iterator();
  REQUIRE(it.ok());
  std::vector<Element> got;
  Status st = test::drain(**it, got);
  CHECK(got.size() == 2);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(st.message().find(file) != std::string::npos, st.message());
  CHECK(st.message().find("checksum") != std::string::npos);
}

TEST_CASE("file cache: a file of an older format (no identity) is refused, naming it") {
  test::TempDir dir;
  const std::string prefix = dir.file("old");
  // A version 2 file holding no element: magic, then the trailer (all-ones, count 0).
  test::write_file(prefix + ".cache",
                   std::string("CVYCACH2") + std::string(8, '\xff') + std::string(8, '\0'));
  Status st = test::first_error(Dataset::range(2).cache(prefix));
  CHECK(st.code() == ErrorCode::version_mismatch);
  CHECK_MESSAGE(st.message().find(prefix + ".cache") != std::string::npos, st.message());
  CHECK(st.message().find("format version 2") != std::string::npos);
}

TEST_CASE("file cache in a missing directory reports an io_error naming the file") {
  test::TempDir dir;
  auto it = Dataset::range(2).cache(dir.file("no/such/dir/c")).make_iterator();
  REQUIRE(it.ok());
  Element e;
  bool end = false;
  Status st = (*it)->get_next(e, end);
  CHECK(st.code() == ErrorCode::io_error);
  CHECK(st.message().find("no/such/dir/c") != std::string::npos);
  // Reported once; the data still flows, uncached.
  std::vector<Element> rest;
  REQUIRE(test::drain(**it, rest).ok());
  CHECK(test::str(rest) == "[0, 1]");
}
