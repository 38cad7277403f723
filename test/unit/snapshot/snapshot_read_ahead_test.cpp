// load()'s read-ahead (pipeline/kernels/chunk_read_ahead.hpp): the next chunk is opened and
// checked on the executor while the current one is read, and that changes nothing a reader sees:
// errors come in order, naming their chunk, elements outlive the load, and a closed load leaves
// nothing behind.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "conveyor/snapshot.hpp"
#include "pipeline/io/crc32c.hpp"
#include "pipeline/io/durable_file.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/kernels/chunk_read_ahead.hpp"
#include "pipeline/runtime/executor.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using conveyor::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A done snapshot of `chunks` chunks of `per_chunk` string elements of `bytes` bytes each; the
// element i of the whole snapshot is `bytes` copies of the letter 'a' + i % 26.
std::vector<snapshot::ChunkRef> write_snapshot(const std::string& snap, int chunks, int per_chunk,
                                               std::size_t bytes,
                                               Compression compression = Compression::none) {
  snapshot::Metadata m;
  m.fingerprint = "read-ahead-test";
  m.definition = "read-ahead-test";
  m.compression = compression;
  REQUIRE(snapshot::create(snap, m).ok());
  std::vector<snapshot::ChunkRef> out;
  for (int c = 0; c < chunks; ++c) {
    std::vector<Element> elements;
    for (int i = 0; i < per_chunk; ++i)
      elements.push_back(Element{
        Tensor::scalar(std::string(bytes, static_cast<char>('a' + (c * per_chunk + i) % 26)))});
    auto ref = snapshot::write_chunk(snap, 0, c, elements, compression, false);
    REQUIRE(ref.ok());
    out.push_back(*ref);
  }
  REQUIRE(snapshot::mark_done(snap, chunks, int64_t{chunks} * per_chunk).ok());
  return out;
}

void flip_body_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-3, std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-3, std::ios::end);
  f.put(static_cast<char>(c ^ 0x40));
}

// Makes element `index` of an uncompressed chunk of one-string elements undecodable (an unknown
// dtype code) and fixes both checksums, so the chunk passes its checks and fails in the decode.
void break_element(const snapshot::ChunkRef& chunk, const Element& like, std::size_t index) {
  std::string bytes;
  {
    std::ifstream in(chunk.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::size_t entry = encoded_batch_entry_size(like);
  const std::size_t length_prefix = entry - encoded_element_size(like);
  // Chunk header (32 bytes), batch header, then entries: length, component count (1 byte), dtype.
  const std::size_t at = 32 + encoded_batch_header_size() + index * entry + length_prefix + 1;
  REQUIRE(at < bytes.size());
  bytes[at] = static_cast<char>(0xEE);
  durable::put_u32(bytes.data() + 24, durable::masked(bytes.data() + 32, bytes.size() - 32));
  durable::put_u32(bytes.data() + 28, durable::masked(bytes.data(), 28));
  std::ofstream(chunk.path, std::ios::binary | std::ios::trunc) << bytes;
}

// Whether this process maps a file whose path contains `part`.
bool mapped(const std::string& part) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(part) != std::string::npos)
      return true;
  return false;
}

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

// Reads `count` elements, each the 200-byte string write_snapshot wrote at its place, then
// returns what the next read gives.
template <typename Iterator>
Status status_after_elements(Iterator& it, int count) {
  for (int i = 0; i < count; ++i) {
    Element e;
    bool end = false;
    REQUIRE(it.get_next(e, end).ok());
    REQUIRE_FALSE(end);
    REQUIRE(e[0].string_at(0) == std::string(200, static_cast<char>('a' + i % 26)));
  }
  Element e;
  bool end = false;
  return it.get_next(e, end);
}

} // namespace

TEST_CASE("snapshot read-ahead: a damaged chunk after the current one fails after every element "
          "of the current one, naming the damaged chunk") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  Compression compression = Compression::none;
  SUBCASE("uncompressed") {}
  SUBCASE("lz4 (inflated ahead too)") { compression = Compression::lz4; }
  auto chunks = write_snapshot(snap, 3, 50, 200, compression);
  flip_body_byte(chunks[1].path);
  auto it = Dataset::load(snap).make_iterator();
  REQUIRE(it.ok());
  // Chunk 0 is read whole while chunk 1 (damaged) is opened ahead; its error waits its turn.
  Status s = status_after_elements(**it, 50);
  CHECK(s.code() == ErrorCode::data_loss);
  CHECK(s.message().find(chunks[1].path) != std::string::npos);
  CHECK(s.message().find("checksum") != std::string::npos);
}

TEST_CASE("snapshot read-ahead: the next chunk is opened while the current one is read, and a "
          "load closed early leaves no chunk mapped and no thread behind") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  // Chunks of 1.1 MB: mapped (from 1 MiB), so /proc/self/maps shows which are open.
  auto chunks = write_snapshot(snap, 3, 1100, 1000);
  REQUIRE(fs::file_size(chunks[0].path) >= (1u << 20));
  Executor::shared(); // its threads start on first use: counted before
  const std::size_t threads_before = thread_count();
  {
    auto it = Dataset::load(snap).make_iterator();
    REQUIRE(it.ok());
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    CHECK(mapped(chunks[0].path));
    // Nothing more is asked of the load: chunk 1 is mapped by the executor on its own (bounded
    // wait: an idle executor starts it at once).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!mapped(chunks[1].path) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    CHECK(mapped(chunks[1].path));
    CHECK_FALSE(mapped(chunks[2].path)); // one chunk ahead, no more
  }                                      // the element and the load go here
  CHECK_FALSE(mapped(chunks[0].path));
  CHECK_FALSE(mapped(chunks[1].path));
  CHECK(thread_count() <= threads_before); // (an extra executor thread may leave meanwhile)
}

TEST_CASE("snapshot read-ahead: a chunk is taken only under its own path, another drops it") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto chunks = write_snapshot(snap, 2, 1100, 1000);
  kernels::ChunkReadAhead ahead(nullptr);
  CHECK_FALSE(ahead.take(chunks[0].path).has_value()); // nothing ahead

  ahead.start(chunks[0]);
  CHECK(ahead.ahead());
  auto taken = ahead.take(chunks[0].path);
  REQUIRE(taken.has_value());
  REQUIRE(taken->ok());
  CHECK((*taken)->count() == 1100);
  Element e;
  REQUIRE((*taken)->next(e).ok());
  CHECK(e[0].string_at(0) == std::string(1000, 'a'));
  CHECK_FALSE(ahead.ahead());

  ahead.start(chunks[1]);
  CHECK_FALSE(ahead.take(chunks[0].path).has_value()); // not the one ahead: dropped
  CHECK_FALSE(ahead.ahead());
  CHECK_FALSE(mapped(chunks[1].path));

  // Damaged: the error is the one a load gives, naming the chunk.
  flip_body_byte(chunks[1].path);
  ahead.start(chunks[1]);
  auto damaged = ahead.take(chunks[1].path);
  REQUIRE(damaged.has_value());
  CHECK(damaged->status().code() == ErrorCode::data_loss);
  CHECK(damaged->status().message().find(chunks[1].path) != std::string::npos);
}

TEST_CASE("snapshot read-ahead: a chunk opened ahead with an undecodable element hands out the "
          "current chunk, the elements before it, then data_loss naming it") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto chunks = write_snapshot(snap, 3, 50, 200);
  const Element like{Tensor::scalar(std::string(200, 'a'))};
  break_element(chunks[1], like, 20);

  // Chunk 1 passes its checks when it is opened ahead: the decode fails, in its turn.
  auto it = Dataset::load(snap).make_iterator();
  REQUIRE(it.ok());
  Status s = status_after_elements(**it, 70);
  CHECK(s.code() == ErrorCode::data_loss);
  CHECK(s.message().find(chunks[1].path) != std::string::npos);
  CHECK(s.message().find("element 20 of 50") != std::string::npos);
}

TEST_CASE("snapshot read-ahead: elements outlive the load and a chunk's mapping holds until the "
          "last of them goes") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/s";
  auto chunks = write_snapshot(snap, 3, 1100, 1000); // mapped chunks (1.1 MB)
  std::vector<Element> kept;
  {
    auto it = Dataset::load(snap).make_iterator();
    REQUIRE(it.ok());
    for (int i = 0; i < 1100 + 10; ++i) { // chunk 0 and the first 10 of chunk 1
      Element e;
      bool end = false;
      REQUIRE((*it)->get_next(e, end).ok());
      if (i % 100 == 0 || i >= 1100)
        kept.push_back(std::move(e));
    }
  } // the load closes: chunk 2, opened ahead, goes
  CHECK_FALSE(mapped(chunks[2].path));
  CHECK(mapped(chunks[1].path)); // viewed by the elements kept
  for (std::size_t k = 0; k < kept.size(); ++k) {
    const int i = k < 11 ? static_cast<int>(k) * 100 : 1100 + static_cast<int>(k - 11);
    CHECK(kept[k][0].string_at(0) == std::string(1000, static_cast<char>('a' + i % 26)));
  }
  kept.clear();
  CHECK_FALSE(mapped(chunks[0].path));
  CHECK_FALSE(mapped(chunks[1].path));
}
