// Snapshots in one process: the on-disk format (pipeline/io/snapshot_files.hpp), the load()
// source, save(), and load() under DYNAMIC and FILE sharding.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "conveyor/snapshot.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/io/snapshot_writer.hpp"
#include "pipeline/io/temp_files.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using conveyor::testing::TempDir;
namespace fs = std::filesystem;

namespace {

snapshot::Metadata metadata_for(const Dataset& d, Compression c = Compression::lz4) {
  snapshot::Metadata m;
  m.fingerprint = d.fingerprint();
  m.definition = d.to_text();
  m.element_spec = snapshot::format_spec_components(*d.element_spec());
  m.compression = c;
  return m;
}

std::vector<int64_t> values_of(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    out.push_back(e[0].at<int64_t>(0));
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = i;
  return v;
}

Expected<std::vector<Element>> load_all(const std::string& dir, bool wait = false) {
  return Dataset::load(dir, wait).collect();
}

// Flips one byte of the file at `offset` from its end.
void flip_byte_from_end(const std::string& path, std::size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-static_cast<std::streamoff>(offset), std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-static_cast<std::streamoff>(offset), std::ios::end);
  f.put(static_cast<char>(c ^ 0x40));
}

} // namespace

TEST_CASE("snapshot: element spec components round-trip, malformed ones are refused") {
  ElementSpec spec{{TensorSpec{DType::int64, {}, false}, TensorSpec{DType::float32, {3, -1}, false},
                    TensorSpec{DType::string, {}, true}}};
  const std::string text = snapshot::format_spec_components(spec);
  CHECK(text == "int64:[];float32:[3,-1];string:?");
  auto back = snapshot::parse_spec_components(text);
  REQUIRE(back.ok());
  CHECK(*back == spec);
  CHECK(snapshot::parse_spec_components("").ok());
  CHECK(snapshot::parse_spec_components("").value().components.empty());
  for (const char* bad : {"int64", "complex7:[]", "int64:[a]", "int64:[-2]", "int64:3"}) {
    auto r = snapshot::parse_spec_components(bad);
    CHECK_MESSAGE(r.status().code() == ErrorCode::invalid_argument, bad);
  }
}

TEST_CASE("snapshot: chunks round-trip every element bit for bit, in (stream, index) order") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(10);
  REQUIRE(snapshot::create(snap, metadata_for(ds)).ok());
  // Mixed components: a NaN payload and -0.0 must come back as the same bits.
  const double nan_bits = std::nan("0x5a5");
  std::vector<Element> a{
    Element{std::vector<Tensor>{Tensor::scalar(int64_t{7}), Tensor::scalar(nan_bits)}},
    Element{std::vector<Tensor>{Tensor::scalar(int64_t{8}), Tensor::scalar(-0.0)}}};
  std::vector<Element> b{
    Element{std::vector<Tensor>{Tensor::scalar(std::string("x\0y", 3)), Tensor::scalar(1.5)}}};
  for (Compression c : {Compression::lz4, Compression::none}) {
    const int64_t stream = c == Compression::lz4 ? 1 : 0;
    REQUIRE(snapshot::write_chunk(snap, stream, 1, a, c, false).ok());
    REQUIRE(snapshot::write_chunk(snap, stream, 0, b, c, false).ok());
  }
  auto chunks = snapshot::committed_chunks(snap);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->size() == 4);
  CHECK((*chunks)[0].stream == 0);
  CHECK((*chunks)[0].index == 0);
  CHECK((*chunks)[1].index == 1);
  CHECK((*chunks)[2].stream == 1);
  std::vector<Element> got;
  REQUIRE(snapshot::read_chunk((*chunks)[1], got).ok());
  REQUIRE(got.size() == 2);
  double x = got[0][1].at<double>(0), y = nan_bits;
  CHECK(std::memcmp(&x, &y, sizeof x) == 0);
  CHECK(std::signbit(got[1][1].at<double>(0)));
  got.clear();
  REQUIRE(snapshot::read_chunk((*chunks)[0], got).ok());
  CHECK(got[0][0].string_at(0) == std::string("x\0y", 3));
  // A committed chunk is never replaced; a second chunk under the same (stream, index) with
  // another element count is caught by the listing.
  CHECK(snapshot::write_chunk(snap, 0, 0, b, Compression::none, false).status().code() ==
        ErrorCode::already_exists);
  REQUIRE(snapshot::write_chunk(snap, 0, 0, a, Compression::none, false).ok());
  auto twice = snapshot::committed_chunks(snap);
  CHECK(twice.status().code() == ErrorCode::data_loss);
  CHECK(twice.status().message().find("is there twice") != std::string::npos);
}

TEST_CASE("snapshot: a chunk of many large elements (written in pieces) reads back whole") {
  // 700 payloads of 5000 bytes: over a thousand pieces (gather writes take 1024 a call), each
  // element's bytes written from its own tensor; lz4 encodes the same elements in one buffer.
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  REQUIRE(snapshot::create(snap, metadata_for(Dataset::range(1))).ok());
  std::vector<Element> big;
  for (int i = 0; i < 700; ++i) {
    std::string payload(5000, static_cast<char>('a' + i % 26));
    payload[static_cast<std::size_t>(i)] = '#';
    big.push_back(
      Element{std::vector<Tensor>{Tensor::scalar(int64_t{i}), Tensor::scalar(std::move(payload))}});
  }
  for (Compression c : {Compression::none, Compression::lz4})
    REQUIRE(snapshot::write_chunk(snap, c == Compression::lz4 ? 1 : 0, 0, big, c, false).ok());
  auto chunks = snapshot::committed_chunks(snap);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->size() == 2);
  for (const auto& chunk : *chunks) {
    std::vector<Element> got;
    REQUIRE(snapshot::read_chunk(chunk, got).ok());
    REQUIRE(got.size() == big.size());
    for (std::size_t i = 0; i < big.size(); ++i) {
      REQUIRE(got[i][0].at<int64_t>(0) == static_cast<int64_t>(i));
      REQUIRE(got[i][1].string_at(0) == big[i][1].string_at(0));
    }
  }
}

TEST_CASE("snapshot: a process's first chunk write removes dead writers' temporary chunks only") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(4);
  REQUIRE(snapshot::create(snap, metadata_for(ds, Compression::none)).ok());
  // TAG = pid.start.pidns.boot.host: this pid started at another time is a dead writer (the
  // liveness rules are tested with a SIGKILLed child in test/unit/ops/cache_temp_files_test.cpp).
  const std::string tag = temp_writer_tag();
  const auto dot = tag.find('.');
  const std::string dead_tag = tag.substr(0, dot) + ".1" + tag.substr(tag.find('.', dot + 1));
  const std::string dead = snap + "/chunks/.tmp-" + dead_tag + "-7";
  const std::string live = snap + "/chunks/.tmp-" + tag + "-8";
  const std::string older_build = snap + "/chunks/.tmp-123-456";
  for (const auto& path : {dead, live, older_build})
    std::ofstream(path) << "half a chunk";
  auto all = ds.collect();
  REQUIRE(all.ok());
  REQUIRE(snapshot::write_chunk(snap, 0, 0, *all, Compression::none, false).ok());
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(older_build));
}

TEST_CASE("snapshot: a damaged chunk fails its read naming it, a partial one is never read") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(100);
  REQUIRE(snapshot::create(snap, metadata_for(ds, Compression::none)).ok());
  auto all = ds.collect();
  REQUIRE(all.ok());
  std::vector<Element> first(all->begin(), all->begin() + 50),
    second(all->begin() + 50, all->end());
  auto c0 = snapshot::write_chunk(snap, 0, 0, first, Compression::none, false);
  auto c1 = snapshot::write_chunk(snap, 0, 1, second, Compression::none, false);
  REQUIRE(c0.ok());
  REQUIRE(c1.ok());
  // A writer that crashed mid-chunk leaves only a temporary file: skipped.
  std::ofstream(snap + "/chunks/.tmp-123-456") << "half a chunk";
  REQUIRE(snapshot::mark_done(snap, 2, 100).ok());
  auto loaded = load_all(snap);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(values_of(*loaded) == iota(100));

  SUBCASE("a flipped body byte") {
    flip_byte_from_end(c1->path, 3);
    auto r = load_all(snap);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::data_loss);
    CHECK(r.status().message().find(c1->path) != std::string::npos);
    CHECK(r.status().message().find("checksum") != std::string::npos);
  }
  SUBCASE("a truncated chunk") {
    fs::resize_file(c0->path, fs::file_size(c0->path) - 1);
    auto r = load_all(snap);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::data_loss);
    CHECK(r.status().message().find(c0->path) != std::string::npos);
  }
  SUBCASE("a chunk renamed to claim another element count") {
    fs::rename(c1->path, snapshot::chunk_path(snap, 0, 1, 49));
    auto r = load_all(snap);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("its name says 49") != std::string::npos);
  }
  SUBCASE("a stranger's file among the chunks") {
    std::ofstream(snap + "/chunks/notes.txt") << "hello";
    auto r = load_all(snap);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("notes.txt") != std::string::npos);
  }
}

TEST_CASE("snapshot: a snapshot is written once, and metadata errors are clear") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(3);
  REQUIRE(snapshot::create(snap, metadata_for(ds)).ok());
  auto again = snapshot::create(snap, metadata_for(ds));
  CHECK(again.code() == ErrorCode::already_exists);
  CHECK(again.message().find("written once") != std::string::npos);
  auto m = snapshot::read_metadata(snap);
  REQUIRE(m.ok());
  CHECK(m->fingerprint == ds.fingerprint());
  CHECK(m->definition == "range(3)");
  CHECK(m->element_spec == "int64:[]");
  auto missing = snapshot::read_metadata(dir.path() + "/nothing");
  CHECK(missing.status().code() == ErrorCode::not_found);
  CHECK(missing.status().message().find("no snapshot at") != std::string::npos);
  std::ofstream(snap + "/snapshot.metadata", std::ios::trunc) << "conveyor-snapshot 99\n";
  CHECK(snapshot::read_metadata(snap).status().code() == ErrorCode::version_mismatch);
}

TEST_CASE("snapshot: a DONE snapshot's stream checkpoints are removed, also what a crash left "
          "halfway; not before DONE") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  REQUIRE(snapshot::create(snap, metadata_for(Dataset::range(3))).ok());
  REQUIRE(snapshot::write_checkpoint(snap, 0, 0, "state 0", false).ok());
  REQUIRE(snapshot::write_checkpoint(snap, 1, 4, "state 4", false).ok());
  Status early = snapshot::remove_checkpoints(snap);
  CHECK(early.code() == ErrorCode::failed_precondition);
  CHECK(snapshot::read_checkpoint(snap, 1, 4).ok());
  REQUIRE(snapshot::mark_done(snap, 0, 0).ok());
  // A removal a crash cut short: the renamed directory is still there, and a new checkpoints
  // directory too (written by no one after DONE, but the removal must not care).
  fs::create_directories(snap + "/.checkpoints-removed");
  std::ofstream(snap + "/.checkpoints-removed/stream-00000000-0000000009") << "x";
  REQUIRE(snapshot::remove_checkpoints(snap).ok());
  CHECK_FALSE(fs::exists(snap + "/checkpoints"));
  CHECK_FALSE(fs::exists(snap + "/.checkpoints-removed"));
  CHECK(snapshot::read_checkpoint(snap, 1, 4).status().code() == ErrorCode::not_found);
  CHECK(snapshot::remove_checkpoints(snap).ok()); // idempotent
  CHECK(snapshot::progress(snap).value().state == snapshot::State::done);
}

TEST_CASE("snapshot: load refuses an unfinished snapshot without wait, fails with a failed "
          "one's cause, and says which path has none") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(5);
  REQUIRE(snapshot::create(snap, metadata_for(ds)).ok());
  auto unfinished = load_all(snap);
  CHECK(unfinished.status().code() == ErrorCode::failed_precondition);
  CHECK(unfinished.status().message().find("wait=true") != std::string::npos);
  REQUIRE(snapshot::mark_failed(snap, io_error("disk full on worker 3")).ok());
  for (bool wait : {false, true}) {
    auto failed = load_all(snap, wait);
    CHECK(failed.status().code() == ErrorCode::failed_precondition);
    CHECK(failed.status().message().find("disk full on worker 3") != std::string::npos);
  }
  CHECK(snapshot::mark_done(snap, 0, 0).code() == ErrorCode::failed_precondition);
  auto none = load_all(dir.path() + "/none");
  CHECK(none.status().code() == ErrorCode::not_found);
  CHECK(none.status().message().find(dir.path() + "/none") != std::string::npos);
}

TEST_CASE("snapshot: save() then load() gives the dataset back, with its element spec") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto ds = *parse_dataset("range(1000).map(square).batch(7)");
  SaveOptions options;
  options.chunk_bytes = 1000; // many chunks
  auto saved = save(ds, dir.path() + "/s", options);
  REQUIRE_MESSAGE(saved.ok(), saved.status().to_string());
  CHECK(saved->elements == 143);
  CHECK(saved->chunks > 5);
  auto loaded = Dataset::load(dir.path() + "/s");
  CHECK(loaded.element_spec().value() == ds.element_spec().value());
  auto got = loaded.collect();
  auto want = ds.collect();
  REQUIRE(got.ok());
  REQUIRE(want.ok());
  REQUIRE(got->size() == want->size());
  for (std::size_t i = 0; i < got->size(); ++i)
    CHECK((*got)[i] == (*want)[i]);
  // Loading composes with the rest of the pipeline, in the text form too.
  auto composed = parse_dataset("load(\"" + dir.path() + "/s\").unbatch().take(3)");
  REQUIRE(composed.ok());
  CHECK(values_of(*composed->collect()) == std::vector<int64_t>{0, 1, 4});
  // A second save into the same directory is refused before anything runs.
  auto again = save(ds, dir.path() + "/s", options);
  CHECK(again.status().code() == ErrorCode::already_exists);
  CHECK(save(Dataset::range(3).repeat(), dir.path() + "/inf").status().code() ==
        ErrorCode::invalid_argument);
  SaveOptions bad;
  bad.compression = "zstd";
  CHECK(save(ds, dir.path() + "/z", bad).status().message().find("\"lz4\" or \"none\"") !=
        std::string::npos);
}

TEST_CASE("snapshot: a nested dataset's structure is saved and load() gives it back") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto ds = *parse_dataset(
    "from_tensor_slices({\"label\": [1, 2, 3], \"pair\": ([4, 5, 6], [\"a\", \"b\", \"c\"])})");
  auto saved = save(ds, dir.path() + "/nested");
  REQUIRE_MESSAGE(saved.ok(), saved.status().to_string());
  auto metadata = snapshot::read_metadata(dir.path() + "/nested");
  REQUIRE(metadata.ok());
  CHECK(metadata->element_spec == "int64:[];int64:[];string:[]|{\"label\": _, \"pair\": (_, _)}");
  auto loaded = Dataset::load(dir.path() + "/nested");
  REQUIRE(loaded.element_spec().ok());
  CHECK(loaded.element_spec()->to_string() == ds.element_spec()->to_string());
  CHECK(loaded.element_spec().value() == ds.element_spec().value());
  CHECK(loaded.batch(3).element_spec()->structure_or_flat().to_string() ==
        "{\"label\": _, \"pair\": (_, _)}");
}

TEST_CASE("snapshot: a failing pipeline marks the snapshot failed with its cause") {
  TempDir dir;
  REQUIRE(dir.ok());
  // The file is missing: the pipeline fails at its first element, after the save began.
  auto ds = Dataset::text_lines({dir.path() + "/missing.txt"});
  auto r = save(ds, dir.path() + "/s");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("missing.txt") != std::string::npos);
  auto p = snapshot::progress(dir.path() + "/s");
  REQUIRE(p.ok());
  CHECK(p->state == snapshot::State::failed);
  CHECK(p->error.find(r.status().message()) != std::string::npos);
  CHECK(load_all(dir.path() + "/s").status().message().find(r.status().message()) !=
        std::string::npos);
}

TEST_CASE("snapshot: load(wait=true) reads chunks as they are committed, to the end") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto ds = Dataset::range(400);
  std::atomic<int64_t> committed{0};
  std::thread writer([&] {
    // Starts after the reader: the reader waits for the metadata too.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(snapshot::create(snap, metadata_for(ds)).ok());
    snapshot::WriterOptions w;
    w.chunk_bytes = 400; // ~20 elements per chunk
    w.sync = false;
    snapshot::StreamWriter stream(snap, w);
    auto all = ds.collect();
    for (auto& e : *all) {
      REQUIRE(stream.append(e).ok());
      if (stream.elements() != committed.load()) {
        committed = stream.elements();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    REQUIRE(stream.finish().ok());
    REQUIRE(snapshot::mark_done(snap, stream.chunks(), stream.elements()).ok());
  });
  auto it = Dataset::load(snap, /*wait=*/true).make_iterator();
  REQUIRE(it.ok());
  std::vector<int64_t> seen;
  int64_t committed_at_first = -1;
  for (;;) {
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    if (end)
      break;
    if (committed_at_first < 0)
      committed_at_first = committed.load();
    seen.push_back(e[0].at<int64_t>(0));
  }
  writer.join();
  CHECK(seen == iota(400));
  CHECK(committed_at_first < 400); // it read while the save ran
}

TEST_CASE("snapshot: DYNAMIC splits and FILE shards of a load cover every chunk once") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  SaveOptions options;
  options.chunk_bytes = 300;
  REQUIRE(save(Dataset::range(500), snap, options).ok());
  auto load = Dataset::load(snap);

  std::multiset<int64_t> file_sharded;
  for (int64_t i = 0; i < 3; ++i) {
    auto shard = apply_sharding(load, ShardingPolicy::file, 3, i);
    REQUIRE_MESSAGE(shard.ok(), shard.status().to_string());
    auto got = shard->collect();
    REQUIRE(got.ok());
    CHECK_FALSE(got->empty());
    for (int64_t v : values_of(*got))
      file_sharded.insert(v);
  }
  CHECK(std::vector<int64_t>(file_sharded.begin(), file_sharded.end()) == iota(500));

  auto provider = make_split_provider(load);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  IteratorContext ctx;
  ctx.split_provider = provider->get();
  auto it = load.make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<int64_t> dynamic;
  for (;;) {
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    if (end)
      break;
    dynamic.push_back(e[0].at<int64_t>(0));
  }
  std::sort(dynamic.begin(), dynamic.end());
  CHECK(dynamic == iota(500));

  // An unfinished snapshot has no final chunk list to split.
  REQUIRE(snapshot::create(dir.path() + "/u", metadata_for(Dataset::range(1))).ok());
  auto unfinished = make_split_provider(Dataset::load(dir.path() + "/u"));
  CHECK(unfinished.status().code() == ErrorCode::failed_precondition);
}

TEST_CASE("snapshot: a chunk truncated by someone else fails naming it and never faults the "
          "reader, also after its elements were read") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  REQUIRE(snapshot::create(snap, metadata_for(Dataset::range(1), Compression::none)).ok());
  SUBCASE("a small chunk (read into memory) cut after its elements were read") {
    // Strings: decoded, they view the chunk's bytes (int64 scalars would be copied out).
    std::vector<Element> strings;
    for (int i = 0; i < 100; ++i)
      strings.push_back(Element{
        std::vector<Tensor>{Tensor::scalar(std::string(200, static_cast<char>('a' + i % 26)))}});
    auto chunk = snapshot::write_chunk(snap, 0, 0, strings, Compression::none, false);
    REQUIRE(chunk.ok());
    REQUIRE(fs::file_size(chunk->path) > 3 * 4096); // past the first page
    std::vector<Element> got;
    REQUIRE(snapshot::read_chunk(*chunk, got).ok());
    fs::resize_file(chunk->path, 10);
    // The elements stay readable: had the chunk been mapped, touching them would fault (SIGBUS).
    REQUIRE(got.size() == strings.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      REQUIRE(got[i][0].string_at(0) == strings[i][0].string_at(0));
    std::vector<Element> again;
    Status s = snapshot::read_chunk(*chunk, again);
    CHECK(s.code() == ErrorCode::data_loss);
    CHECK(s.message().find(chunk->path) != std::string::npos);
    CHECK(s.message().find("shorter than its header") != std::string::npos);
    CHECK(again.empty());
  }
  SUBCASE("a large chunk (mapped) cut before it is opened: refused before it is mapped") {
    std::vector<Element> big;
    for (int i = 0; i < 3; ++i)
      big.push_back(Element{
        std::vector<Tensor>{Tensor::scalar(std::string(600000, static_cast<char>('a' + i)))}});
    auto chunk = snapshot::write_chunk(snap, 0, 0, big, Compression::none, false);
    REQUIRE(chunk.ok());
    const auto size = fs::file_size(chunk->path);
    REQUIRE(size >= (1u << 20)); // over the size from which chunks are mapped
    std::vector<Element> got;
    REQUIRE(snapshot::read_chunk(*chunk, got).ok());
    CHECK(got[2][0].string_at(0) == big[2][0].string_at(0));
    got.clear(); // the mapping goes with its last element
    fs::resize_file(chunk->path, size / 2);
    Status s = snapshot::read_chunk(*chunk, got);
    CHECK(s.code() == ErrorCode::data_loss);
    CHECK(s.message().find(chunk->path) != std::string::npos);
    CHECK(s.message().find("its header says " + std::to_string(size - 32) +
                           " body bytes, the file has " + std::to_string(size / 2 - 32)) !=
          std::string::npos);
    auto opened = snapshot::open_chunk(*chunk);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.status().message().find(chunk->path) != std::string::npos);
  }
}
