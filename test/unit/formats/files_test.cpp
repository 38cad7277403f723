// Compressed TFRecord and text files, glob patterns in file sources, and file sources used
// directly as the function of interleave / flat_map (including DYNAMIC and FILE sharding).
#include <doctest/doctest.h>

#include "pipeline/io/files.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "test/unit/formats/formats_util.hpp"

using namespace conveyor;
using namespace conveyor::formats_test;

namespace {

std::vector<std::string> read_records(const std::string& path, FileCompression c,
                                      Status* error = nullptr) {
  std::vector<std::string> out;
  auto reader = TFRecordReader::open(path, c);
  if (!reader.ok()) {
    if (error)
      *error = reader.status();
    return out;
  }
  for (int i = 0; i < 100000; ++i) {
    std::string record;
    bool eof = false;
    Status st = (*reader)->read(record, eof);
    if (!st.ok()) {
      if (error)
        *error = st;
      return out;
    }
    if (eof)
      break;
    out.push_back(record);
  }
  return out;
}

const std::vector<std::string> kRecords = {"", "a", std::string("\0\xff\n", 3),
                                           std::string(300000, 'q'), "last"};

// The raw records of test/data/raw-{0,1,2}.tfrecord (2, 3 and 1 records).
const char* kRawAll = "[\"f0-r0\", \"f0-r1\", \"f1-r0\", \"f1-r1\", \"f1-r2\", \"f2-r0\"]";

} // namespace

TEST_CASE("the TFRecord writer and reader round trip with every compression") {
  ScratchDir dir;
  for (FileCompression c : {FileCompression::none, FileCompression::zlib, FileCompression::gzip}) {
    CAPTURE(compression_name(c));
    const std::string path = dir.file(std::string("rt-") + compression_name(c));
    {
      auto writer = TFRecordWriter::open(path, c);
      REQUIRE(writer.ok());
      for (const std::string& r : kRecords)
        REQUIRE((*writer)->write(r).ok());
      REQUIRE((*writer)->close().ok());
    }
    Status st;
    CHECK(read_records(path, c, &st) == kRecords);
    CHECK(st.ok());
    const std::string bytes = read_bytes(path);
    if (c == FileCompression::gzip)
      CHECK(bytes.substr(0, 2) == "\x1f\x8b"); // RFC 1952 magic
    if (c == FileCompression::zlib)
      CHECK(static_cast<unsigned char>(bytes[0]) == 0x78); // RFC 1950, 32 KiB window
    if (c != FileCompression::none)
      CHECK(bytes.size() < 20000); // 300000 'q's compress
  }
}

TEST_CASE("the reference writer's raw records read back exactly, compressed or not") {
  CHECK(read_records(fixture("raw-1.tfrecord"), FileCompression::none) ==
        std::vector<std::string>{"f1-r0", "f1-r1", "f1-r2"});
  // The same Examples in all three files: the decompressed streams are byte-identical.
  const auto plain = read_records(fixture("examples.tfrecord"), FileCompression::none);
  REQUIRE(plain.size() == 5);
  CHECK(read_records(fixture("examples.tfrecord.zlib"), FileCompression::zlib) == plain);
  CHECK(read_records(fixture("examples.tfrecord.gz"), FileCompression::gzip) == plain);
}

TEST_CASE("a wrong compression type or a damaged compressed file is a clear error") {
  Status st;
  CHECK(read_records(fixture("examples.tfrecord.gz"), FileCompression::zlib, &st).empty());
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("ZLIB stream of " + fixture("examples.tfrecord.gz") +
                          " is corrupt after 0 decompressed bytes") == 0);
  // A plain read of a gzip file sees garbage framing.
  CHECK(read_records(fixture("examples.tfrecord.gz"), FileCompression::none, &st).empty());
  CHECK(st.code() == ErrorCode::data_loss);

  ScratchDir dir;
  const std::string gz = read_bytes(fixture("examples.tfrecord.gz"));
  write_bytes(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  auto got = read_records(dir.file("cut.gz"), FileCompression::gzip, &st);
  CHECK(got.size() < 5);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find(" is truncated after ") != std::string::npos);

  Status bad = Dataset::tfrecord({"x"}, "gzip").validate();
  CHECK(bad.message() ==
        "tfrecord: `compression_type` must be \"\", \"ZLIB\" or \"GZIP\", got \"gzip\"");
  bad = Dataset::text_lines({"x"}, "LZ4").validate();
  CHECK(bad.message() ==
        "text_lines: `compression_type` must be \"\", \"ZLIB\" or \"GZIP\", got \"LZ4\"");
}

TEST_CASE("text_lines reads ZLIB files and concatenated GZIP members") {
  CHECK(show(Dataset::text_lines({fixture("lines.txt.gz")}, "GZIP")) ==
        "[\"alpha\", \"beta\", \"gamma\", \"delta\"]");
  CHECK(show(Dataset::text_lines({fixture("lines.txt.zlib")}, "ZLIB")) ==
        "[\"one\", \"two\", \"three\"]");
  // Lines longer than the read buffer, and a last line without a newline.
  ScratchDir dir;
  const std::string long_line(200000, 'x');
  write_bytes(dir.file("long.txt"), "a\r\n" + long_line + "\nb");
  auto got = collect(Dataset::text_lines({dir.file("long.txt")}));
  REQUIRE(got.ok());
  REQUIRE(got->size() == 3);
  CHECK((*got)[1][0].strings()[0] == long_line);
  CHECK((*got)[2].to_string() == "\"b\"");
}

TEST_CASE("glob patterns in file sources expand sorted - no match is an error naming the pattern") {
  const std::string pattern = fixture("raw-*.tfrecord");
  CHECK(show(Dataset::tfrecord({pattern})) == kRawAll);
  CHECK(show(Dataset::tfrecord({fixture("raw-[21].tfrecord"), fixture("raw-0.tfrecord")})) ==
        "[\"f1-r0\", \"f1-r1\", \"f1-r2\", \"f2-r0\", \"f0-r0\", \"f0-r1\"]");
  auto parsed = parse_dataset("tfrecord(\"" + pattern + "\")");
  REQUIRE(parsed.ok());
  CHECK(show(*parsed) == kRawAll);
  CHECK(show(Dataset::text_lines({fixture("lines.txt.*z")}, "GZIP")) ==
        "[\"alpha\", \"beta\", \"gamma\", \"delta\"]");

  auto none = collect(Dataset::tfrecord({fixture("nothing-*.tfrecord")}));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == ErrorCode::not_found);
  CHECK(none.status().message() ==
        "`tfrecord`: no files match the pattern `" + fixture("nothing-*.tfrecord") + "`");
  none = collect(Dataset::text_lines({fixture("nothing-?.txt")}));
  CHECK(none.status().message() ==
        "`text_lines`: no files match the pattern `" + fixture("nothing-?.txt") + "`");
}

TEST_CASE("glob patterns under FILE and DYNAMIC sharding") {
  Dataset ds = Dataset::tfrecord({fixture("raw-*.tfrecord")});
  auto w0 = apply_sharding(ds, ShardingPolicy::file, 2, 0);
  auto w1 = apply_sharding(ds, ShardingPolicy::file, 2, 1);
  REQUIRE(w0.ok());
  REQUIRE(w1.ok());
  CHECK(w0->node()->strings_attr("files") ==
        std::vector<std::string>{fixture("raw-0.tfrecord"), fixture("raw-2.tfrecord")});
  CHECK(show(*w0) == "[\"f0-r0\", \"f0-r1\", \"f2-r0\"]");
  CHECK(show(*w1) == "[\"f1-r0\", \"f1-r1\", \"f1-r2\"]");
  auto too_many = apply_sharding(ds, ShardingPolicy::file, 4, 0);
  CHECK(too_many.status().message().find("has 3 file(s), num_workers is 4") != std::string::npos);

  // A name that itself looks like a pattern is written back escaped and still means that file.
  ScratchDir dir;
  write_bytes(dir.file("a[1].txt"), "in a[1]\n");
  write_bytes(dir.file("b.txt"), "in b\n");
  auto shard = apply_sharding(Dataset::text_lines({dir.file("*.txt")}), ShardingPolicy::file, 2, 0);
  REQUIRE(shard.ok());
  CHECK(show(*shard) == "[\"in a[1]\"]");

  auto provider = make_split_provider(ds);
  REQUIRE(provider.ok());
  std::vector<std::string> files;
  for (int i = 0; i < 10; ++i) {
    Split split;
    bool end = false;
    REQUIRE((*provider)->get_next(split, end).ok());
    if (end)
      break;
    files.push_back(split.file);
  }
  CHECK(files == std::vector<std::string>{fixture("raw-0.tfrecord"), fixture("raw-1.tfrecord"),
                                          fixture("raw-2.tfrecord")});
}

TEST_CASE("list_files(...).interleave(tfrecord) needs no registered function") {
  const std::string pattern = fixture("raw-*.tfrecord");
  // tf.data's interleave order with cycle_length 2: f0 and f1 alternate; when f0 ends, f1 gives
  // its next record and f2 takes f0's slot.
  const char* expected = "[\"f0-r0\", \"f1-r0\", \"f0-r1\", \"f1-r1\", \"f1-r2\", \"f2-r0\"]";
  Dataset built = Dataset::list_files(pattern, false).interleave("tfrecord", 2);
  CHECK(show(built) == expected);
  auto parsed = parse_dataset("list_files(\"" + pattern +
                              "\", shuffle=false).interleave(tfrecord, cycle_length=2)");
  REQUIRE(parsed.ok());
  CHECK(*parsed == built);
  CHECK(show(*parsed) == expected);
  CHECK(show(Dataset::list_files(pattern, false).flat_map("tfrecord")) == kRawAll);
  auto spec = built.element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() == "TensorSpec(shape=(), dtype=string)");

  // With compression, then parsed; an empty registry works too (nothing is looked up).
  FunctionRegistry empty;
  auto gz = parse_dataset(
    "list_files(\"" + fixture("examples.tfrecord.gz") +
    "\").interleave(tfrecord(compression_type=\"GZIP\")).parse_example(\"label: int64\")");
  REQUIRE(gz.ok());
  CHECK(show(*gz, &empty) == "[-2, -1, 0, 1, 2]");
  CHECK(
    show(Dataset::list_files(fixture("lines.txt.zlib"))
           .interleave(FunctionRef{"text_lines", {{"compression_type", std::string{"ZLIB"}}}})) ==
    "[\"one\", \"two\", \"three\"]");

  // Errors: bad parameters are definition errors; the names are reserved.
  Status st = Dataset::list_files(pattern)
                .interleave(FunctionRef{"tfrecord", {{"compression_type", std::string{"XZ"}}}})
                .validate();
  CHECK(st.message() == "interleave: `tfrecord` parameter `compression_type` must be \"\", "
                        "\"ZLIB\" or \"GZIP\", got \"XZ\"");
  st = Dataset::list_files(pattern)
         .interleave(FunctionRef{"tfrecord", {{"buffer", int64_t{1}}}})
         .validate();
  CHECK(st.message() ==
        "interleave: `tfrecord` as a function takes only `compression_type`, got `buffer`");
  FunctionDef def;
  def.name = "tfrecord";
  def.kind = FunctionKind::dataset;
  CHECK(empty.add(def).code() == ErrorCode::invalid_argument);
  auto wrong = collect(Dataset::range(2).interleave("tfrecord"));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find(
          "`tfrecord` as a function takes elements that are one file name") != std::string::npos);
}

TEST_CASE("sharding rewrites still see the file source under interleave(tfrecord)") {
  const std::string pattern = fixture("raw-*.tfrecord");
  Dataset ds = Dataset::list_files(pattern, false).interleave("tfrecord", 2);
  // FILE: list_files is sharded, each worker reads its files.
  auto w0 = apply_sharding(ds, ShardingPolicy::file, 2, 0);
  auto w1 = apply_sharding(ds, ShardingPolicy::file, 2, 1);
  REQUIRE(w0.ok());
  REQUIRE(w1.ok());
  CHECK(show(*w0) == "[\"f0-r0\", \"f2-r0\", \"f0-r1\"]");
  CHECK(show(*w1) == "[\"f1-r0\", \"f1-r1\", \"f1-r2\"]");
  // DYNAMIC: the provider hands out list_files' files; a task reads the files of its splits.
  auto provider = make_split_provider(ds);
  REQUIRE(provider.ok());
  IteratorContext ctx;
  ctx.split_provider = provider->get();
  auto it = ds.make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<Element> got;
  for (int i = 0; i < 100; ++i) {
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    if (end)
      break;
    got.push_back(e);
  }
  CHECK(show(got) == "[\"f0-r0\", \"f1-r0\", \"f0-r1\", \"f1-r1\", \"f1-r2\", \"f2-r0\"]");
}
