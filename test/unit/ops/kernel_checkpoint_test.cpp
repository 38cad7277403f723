// Every kernel's save/restore (conveyor/iterator_state.hpp): a pipeline stopped after k elements
// and restored into a fresh iterator of the same dataset continues with exactly the elements of
// an uninterrupted run, for every k from 0 to the end (and the state of a finished one too).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "conveyor/iterator_state.hpp"
#include "ops_test_util.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/io/tfrecord.hpp"

using namespace conveyor;

namespace {

std::vector<std::string> read_all(Iterator& it, int64_t limit) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < limit; ++i) {
    Element e;
    bool end = false;
    Status st = it.get_next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      break;
    out.push_back(e.to_string());
  }
  return out;
}

std::unique_ptr<Iterator> iterator_of(const Dataset& ds) {
  auto it = ds.make_iterator();
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  return std::move(*it);
}

// Stops at every k in [0, n] (n = the whole sequence's length) and checks the resumed rest
// against the saved iterator's own rest, and (`repeatable`: no unseeded randomness) against an
// uninterrupted run. `before_run` runs before the uninterrupted and the saved iterator are made,
// `before_restore` before the restored one (a file cache removed, ...).
void check_resumes(const Dataset& ds, bool repeatable = true, int64_t limit = 400,
                   const std::function<void()>& before_run = {},
                   const std::function<void()>& before_restore = {}) {
  auto call = [](const std::function<void()>& f) {
    if (f)
      f();
  };
  call(before_run);
  auto whole_it = iterator_of(ds);
  const std::vector<std::string> whole = read_all(*whole_it, limit);
  REQUIRE(!whole.empty());
  for (int64_t k = 0; k <= static_cast<int64_t>(whole.size()); ++k) {
    CAPTURE(k);
    call(before_run);
    auto first = iterator_of(ds);
    std::vector<std::string> got = read_all(*first, k);
    IteratorStateWriter out;
    Status saved = first->save(out);
    REQUIRE_MESSAGE(saved.ok(), saved.to_string());
    const std::vector<std::string> rest = read_all(*first, limit - k);
    first.reset(); // the restored iterator stands alone
    call(before_restore);
    auto second = iterator_of(ds);
    IteratorStateReader in(out.bytes());
    Status restored = second->restore(in);
    REQUIRE_MESSAGE(restored.ok(), restored.to_string());
    CHECK(in.at_end());
    REQUIRE(read_all(*second, limit - k) == rest);
    got.insert(got.end(), rest.begin(), rest.end());
    if (repeatable)
      REQUIRE(got == whole);
  }
}

Dataset slices(const std::vector<int64_t>& v) { return Dataset::from_tensor_slices(test::ints(v)); }

} // namespace

TEST_CASE("sources resume from a checkpoint at every element") {
  test::register_test_functions();
  const std::vector<std::pair<const char*, Dataset>> cases = {
    {"range", Dataset::range(3, 40, 3)},
    {"from_tensors", Dataset::from_tensors(test::ints({1, 2}))},
    {"from_tensor_slices", slices({5, 6, 7, 8})},
    {"random, seeded", Dataset::random(9).take(12)},
  };
  for (const auto& [name, ds] : cases) {
    CAPTURE(name);
    check_resumes(ds);
  }
  // Unseeded: each iterator draws its own seed; the restored one goes on with the saved one's.
  check_resumes(Dataset::random().take(12), false);
}

TEST_CASE("file sources resume at the file and the record they stopped in") {
  test::TempDir dir;
  for (int f = 0; f < 3; ++f) {
    std::string text;
    for (int line = 0; line < 4 + f; ++line)
      text += "f" + std::to_string(f) + " line " + std::to_string(line) + (f == 1 ? "\r\n" : "\n");
    test::write_file(dir.file("t" + std::to_string(f) + ".txt"), text);
    std::string csv = "a,b\n";
    for (int row = 0; row < 3 + f; ++row)
      csv += std::to_string(f * 10 + row) + "," + std::to_string(row) + "\n";
    test::write_file(dir.file("c" + std::to_string(f) + ".csv"), csv);
    auto writer = TFRecordWriter::open(dir.file("r" + std::to_string(f) + ".tfrecord"));
    REQUIRE(writer.ok());
    for (int rec = 0; rec < 2 + f; ++rec)
      REQUIRE((*writer)->write("record " + std::to_string(f) + "/" + std::to_string(rec)).ok());
    REQUIRE((*writer)->close().ok());
  }
  {
    auto writer = TFRecordWriter::open(dir.file("examples.tfrecord"));
    REQUIRE(writer.ok());
    for (int64_t label = 0; label < 5; ++label) {
      auto example = serialize_example({{"label", Tensor::scalar(label)}});
      REQUIRE(example.ok());
      REQUIRE((*writer)->write(*example).ok());
    }
    REQUIRE((*writer)->close().ok());
  }
  const std::vector<std::pair<const char*, Dataset>> cases = {
    {"tfrecord then parse_example",
     Dataset::tfrecord({dir.file("examples.tfrecord")}).parse_example("label: int64")},
    {"text_lines", Dataset::text_lines({dir.path() + "/t*.txt"})},
    {"tfrecord", Dataset::tfrecord({dir.path() + "/r*.tfrecord"})},
    {"csv with a header", Dataset::csv({dir.path() + "/c*.csv"}, {"int64", "int64"}, true)},
    {"list_files, seeded shuffle", Dataset::list_files(dir.path() + "/*", true, 4)},
    {"list_files then interleaved text_lines",
     Dataset::list_files(dir.path() + "/t*.txt", false).interleave("text_lines_fn", 2, 2)},
  };
  for (const auto& [name, ds] : cases) {
    CAPTURE(name);
    check_resumes(ds);
  }
  check_resumes(Dataset::list_files(dir.path() + "/*", true), false); // its own file order
}

TEST_CASE("load resumes at the chunk and the element it stopped at") {
  test::TempDir dir;
  const std::string snap = dir.file("snap");
  snapshot::Metadata m;
  m.compression = Compression::none;
  REQUIRE(snapshot::create(snap, m).ok());
  int64_t next = 0;
  for (int64_t stream = 0; stream < 2; ++stream)
    for (int64_t index = 0; index < 2; ++index) {
      std::vector<Element> elements;
      for (int64_t i = 0; i < 1 + 2 * stream + index; ++i)
        elements.push_back(Element{Tensor::scalar(next++)});
      REQUIRE(snapshot::write_chunk(snap, stream, index, elements, Compression::none, false).ok());
    }
  REQUIRE(snapshot::mark_done(snap, 4, next).ok());
  check_resumes(Dataset::load(snap));
}

TEST_CASE("the other ops resume with their inputs from a checkpoint at every element") {
  test::register_test_functions();
  const std::vector<std::pair<const char*, Dataset>> cases = {
    {"repeat", Dataset::range(4).repeat(3)},
    {"repeat forever, then take", slices({1, 2, 3}).repeat().take(10)},
    {"concatenate", Dataset::range(3).concatenate(Dataset::range(10, 14))},
    {"zip", Dataset::zip({Dataset::range(5), slices({7, 8, 9}).repeat(2)})},
    {"enumerate", Dataset::range(20, 25).enumerate(3)},
    {"shard", Dataset::range(17).shard(3, 1)},
    {"flat_map", slices({2, 0, 3, 1}).flat_map("range_fn")},
    {"interleave", Dataset::range(1, 6).interleave("range_fn", 3, 2)},
    {"parallel interleave", Dataset::range(1, 8).interleave("range_fn", 3, 2, 3)},
    {"parallel interleave, a block per slot", Dataset::range(1, 6).interleave("range_fn", 2, 4, 2)},
    {"ignore_errors",
     Dataset::range(8).map(FunctionRef("test_fail_on", {{"value", int64_t{3}}})).ignore_errors()},
    {"seeded shuffle, batch, unbatch, skip",
     Dataset::range(30).shuffle(7, 2).batch(4).unbatch().skip(3)},
  };
  for (const auto& [name, ds] : cases) {
    CAPTURE(name);
    check_resumes(ds);
  }
}

TEST_CASE("a memory cache resumes mid first pass, at its end and in a later repetition") {
  test::register_test_functions();
  const std::vector<std::pair<const char*, Dataset>> cases = {
    {"one pass", Dataset::range(5).map("square").cache()},
    {"repeated", Dataset::range(4).cache().repeat(3)},
    {"repeated, shuffled once below", Dataset::range(6).shuffle(6, 4, false).cache().repeat(2)},
    {"a pass cut short by take", Dataset::range(5).cache().take(3).repeat(2)},
  };
  for (const auto& [name, ds] : cases) {
    CAPTURE(name);
    check_resumes(ds);
  }
}

TEST_CASE("a memory cache restored mid first pass records the next pass, and restored in a later "
          "repetition it refills from its input once") {
  test::register_test_functions();
  const Dataset ds = Dataset::range(4).map("test_count_calls").cache().repeat(4);
  auto restored_after = [&](int64_t k) {
    auto first = iterator_of(ds);
    read_all(*first, k);
    IteratorStateWriter out;
    REQUIRE(first->save(out).ok());
    auto second = iterator_of(ds);
    IteratorStateReader in(out.bytes());
    REQUIRE(second->restore(in).ok());
    test::count_calls = 0;
    const std::vector<std::string> rest = read_all(*second, 100);
    CHECK(static_cast<int64_t>(rest.size()) == 16 - k);
    return test::count_calls.load();
  };
  // Mid first pass: the rest of the pass (not recorded: its first two went with the saved
  // iterator), then the second pass runs the input again and is recorded for the last two.
  CHECK(restored_after(2) == 2 + 4);
  // Mid third pass: the input once, its first two elements recorded without being delivered.
  CHECK(restored_after(10) == 4);
}

TEST_CASE(
  "a file cache resumes mid first pass, at its end and in a later repetition, and a partial "
  "file is not continued, the next pass writes it") {
  test::register_test_functions();
  test::TempDir dir;
  const std::string prefix = dir.file("c");
  const std::string file = prefix + ".cache";
  auto remove = [&] { std::filesystem::remove(file); };
  // Each run starts without the file. The restored iterator finds the file the saved one's rest
  // committed (a filling state then skips by count in the committed file) ...
  check_resumes(Dataset::range(4).map("square").cache(prefix).repeat(3), true, 400, remove);
  // ... or, removed again, none: the restored pass goes on from its input's state.
  check_resumes(Dataset::range(5).cache(prefix), true, 400, remove, remove);

  // Stopped mid first pass; the saved iterator dies with its temporary file.
  remove();
  const Dataset ds = Dataset::range(4).map("test_count_calls").cache(prefix).repeat(2);
  auto first = iterator_of(ds);
  CHECK(read_all(*first, 2) == std::vector<std::string>{"0", "1"});
  IteratorStateWriter out;
  REQUIRE(first->save(out).ok());
  first.reset();
  auto second = iterator_of(ds);
  IteratorStateReader in(out.bytes());
  REQUIRE(second->restore(in).ok());
  test::count_calls = 0;
  CHECK(read_all(*second, 2) == std::vector<std::string>{"2", "3"});
  CHECK_FALSE(std::filesystem::exists(file)); // the rest of a pass is not a cache
  CHECK(read_all(*second, 100) == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(test::count_calls == 2 + 4);
  CHECK(std::filesystem::exists(file)); // written by the second pass
}

TEST_CASE("a file cache that vanished or changed since the checkpoint is data_loss naming it") {
  test::TempDir dir;
  const std::string prefix = dir.file("c");
  const std::string file = prefix + ".cache";
  const Dataset ds = Dataset::range(4).cache(prefix).repeat(2);
  auto saved_in_second_pass = [&] {
    auto it = iterator_of(ds);
    read_all(*it, 6);
    IteratorStateWriter out;
    REQUIRE(it->save(out).ok());
    return out.bytes();
  };
  auto restore_error = [&](const std::string& state) {
    auto it = iterator_of(ds);
    IteratorStateReader in(state);
    return it->restore(in);
  };
  std::string state = saved_in_second_pass();
  std::filesystem::remove(file);
  Status gone = restore_error(state);
  CHECK(gone.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(gone.message().find(file) != std::string::npos, gone.message());
  CHECK(gone.message().find("is gone") != std::string::npos);

  // Replaced by a file of the same size, written for the same pipeline, other elements (the
  // writer's fingerprint copied over): only the records' checksum tells them apart.
  state = saved_in_second_pass();
  auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string other = dir.file("other");
  REQUIRE(test::run(Dataset::range(10, 14).cache(other)).size() == 4);
  const std::string original = bytes_of(file);
  std::string replacement = bytes_of(other + ".cache");
  REQUIRE(replacement.size() == original.size());
  replacement.replace(8, 16, original, 8, 16);
  test::write_file(file, replacement);
  CHECK(test::show(ds.take(2)) == "[10, 11]"); // a fresh pass reads it: it is whole
  Status changed = restore_error(state);
  CHECK(changed.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(changed.message().find(file) != std::string::npos, changed.message());
  CHECK(changed.message().find("changed since the checkpoint") != std::string::npos);
}

TEST_CASE("a cache state of the layout before file identities still restores, and a complete file "
          "cache's then is data_loss (its file was of an older format)") {
  // A state saved now, rewritten in the older layout: after the tag no layout marker, and no
  // file_checksum after file_size (tag, complete, position, ended, file_size, recording, ...).
  auto old_layout = [](const Dataset& ds, int64_t read) {
    auto it = iterator_of(ds);
    read_all(*it, read);
    IteratorStateWriter out;
    REQUIRE(it->save(out).ok());
    std::string bytes = out.bytes();
    const std::size_t tag = bytes.find("cache");
    REQUIRE(tag != std::string::npos);
    const std::size_t fields = tag + 5;
    bytes.erase(fields + 8 * 5, 8); // file_checksum: after marker, complete, position, ended, size
    bytes.erase(fields, 8);         // the layout marker
    return bytes;
  };
  {
    const Dataset ds = Dataset::range(4).cache().repeat(2); // 6: the second pass reads the cache
    const std::string state = old_layout(ds, 6);
    auto it = iterator_of(ds);
    IteratorStateReader in(state);
    Status restored = it->restore(in);
    REQUIRE_MESSAGE(restored.ok(), restored.to_string());
    CHECK(read_all(*it, 10) == std::vector<std::string>{"2", "3"});
  }
  test::TempDir dir;
  const Dataset ds = Dataset::range(4).cache(dir.file("c"));
  REQUIRE(test::run(ds).size() == 4);
  const std::string state = old_layout(ds, 2);
  auto it = iterator_of(ds);
  IteratorStateReader in(state);
  Status st = it->restore(in);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(st.message().find("an older build's file") != std::string::npos, st.message());
}

TEST_CASE("registered source functions resume when their registration says how") {
  test::register_test_functions();
  // counter: FunctionDef::source_checkpoint = skip_by_count.
  check_resumes(
    Dataset::source(FunctionRef("counter", {{"start", int64_t{2}}, {"stop", int64_t{9}}})));
  // Its iterator's own save/restore.
  check_resumes(Dataset::source(FunctionRef("test_saving_source", {{"n", int64_t{6}}})).repeat(2));
}

TEST_CASE("an input that yields fewer elements when run again is data_loss: a skip_by_count "
          "source, a memory cache's refill") {
  test::register_test_functions();
  auto restored_then_shortened = [](const Dataset& ds, int64_t k) {
    test::varying_length = 6;
    auto first = iterator_of(ds);
    read_all(*first, k);
    IteratorStateWriter out;
    REQUIRE(first->save(out).ok());
    test::varying_length = 1;
    auto second = iterator_of(ds);
    IteratorStateReader in(out.bytes());
    REQUIRE(second->restore(in).ok());
    Element e;
    bool end = false;
    Status st = second->get_next(e, end);
    test::varying_length = 5;
    return st;
  };
  const Status source = restored_then_shortened(Dataset::source("test_varying_source"), 4);
  CHECK(source.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(source.message().find("source function `test_varying_source` ended after 1 "
                                      "elements on restore, before the 4") != std::string::npos,
                source.message());
  const Status refill =
    restored_then_shortened(Dataset::source("test_varying_source").cache().repeat(2), 8);
  CHECK(refill.code() == ErrorCode::data_loss);
  CHECK_MESSAGE(refill.message().find("refilling the memory cache") != std::string::npos,
                refill.message());
}

TEST_CASE("an op that cannot save says so instead of a partial checkpoint") {
  test::register_test_functions();
  auto it = iterator_of(Dataset::source("test_unsaved_source").map("square"));
  IteratorStateWriter out;
  Status st = it->save(out);
  CHECK(st.code() == ErrorCode::failed_precondition);
  CHECK(st.message().find("cannot save its state") != std::string::npos);
  CHECK_MESSAGE(st.message().find("source function `test_unsaved_source`") != std::string::npos,
                st.message());
  CHECK(st.message().find("skip_by_count") != std::string::npos);
}

TEST_CASE("a checkpoint restores only into the same ops, naming the difference") {
  auto it = iterator_of(Dataset::range(10).enumerate());
  IteratorStateWriter out;
  REQUIRE(it->save(out).ok());
  auto other = iterator_of(Dataset::range(10).shard(2, 0));
  IteratorStateReader in(out.bytes());
  Status st = other->restore(in);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("`enumerate`") != std::string::npos);
  CHECK(st.message().find("`shard`") != std::string::npos);
}
