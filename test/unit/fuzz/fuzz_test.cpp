// Fuzz targets (issue 33): one per wire parser and one for the journal reader, each a seeded
// mutation loop (test/unit/fuzz/mutator.hpp) over the seeds in test/fuzz/corpus/<target>/.
// Each asserts only: no crash, no hang (every input within kSlowInput), an error or a valid
// result. Deterministic per seed: CONVEYOR_FUZZ_SEED (default 1) and CONVEYOR_FUZZ_ITERATIONS
// (default: a few seconds' worth per target) reproduce or lengthen a run.
// CONVEYOR_FUZZ_WRITE_CORPUS=1 rewrites the seed files from the generators below.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "dispatcher/journal.hpp"
#include "net/bulk_stream_reader.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "pipeline/tensor/codec.hpp"
#include "test/unit/fuzz/mutator.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
namespace fs = std::filesystem;

namespace {

constexpr auto kSlowInput = std::chrono::seconds(5); // far above any input's time, even in ASan

std::string corpus_dir(const std::string& target) {
  return std::string(CONVEYOR_SOURCE_DIR) + "/test/fuzz/corpus/" + target;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, std::string_view data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
    .write(data.data(), static_cast<std::streamsize>(data.size()));
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// The seeds: the committed files, or (CONVEYOR_FUZZ_WRITE_CORPUS=1) `generate`'s, written first.
std::vector<std::string>
load_corpus(const std::string& target,
            const std::function<std::map<std::string, std::string>()>& generate) {
  const auto dir = corpus_dir(target);
  if (env_or("CONVEYOR_FUZZ_WRITE_CORPUS", 0) == 1) {
    fs::create_directories(dir);
    for (const auto& [name, bytes] : generate())
      write_bytes(dir + "/" + name, bytes);
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    names.push_back(e.path().string());
  std::sort(names.begin(), names.end()); // directory order is not deterministic
  std::vector<std::string> out;
  for (const auto& n : names)
    out.push_back(read_bytes(n));
  return out;
}

// Runs `one` on every seed (each must give a valid result: the corpus is meaningful), then on
// the mutated inputs.
void run(const std::string& target, uint64_t default_iterations,
         const std::function<std::map<std::string, std::string>()>& generate,
         const std::function<bool(const std::string&)>& one) {
  const auto corpus = load_corpus(target, generate);
  REQUIRE_MESSAGE(!corpus.empty(), "no seeds in " << corpus_dir(target));
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(one(corpus[i]), "seed " << i << " of " << corpus_dir(target) << " is not valid");
  }
  const uint64_t seed = env_or("CONVEYOR_FUZZ_SEED", 1);
  const uint64_t iterations = env_or("CONVEYOR_FUZZ_ITERATIONS", default_iterations);
  fuzz::Mutator mutator(seed, corpus);
  uint64_t valid = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    const auto input = mutator.next();
    INFO("target " << target << ", CONVEYOR_FUZZ_SEED=" << seed << ", iteration " << i
                   << ", input of " << input.size() << " bytes");
    const auto started = std::chrono::steady_clock::now();
    valid += one(input) ? 1 : 0;
    REQUIRE(std::chrono::steady_clock::now() - started < kSlowInput);
  }
  MESSAGE(target << ": " << iterations << " inputs, " << valid << " valid");
}

// --- element and batch codec

std::vector<Element> sample_elements() {
  std::vector<Element> out;
  for (const char* text : {"(1, \"a\")", "[1, 2, 3]", "[[1.5, 2.5], [3.5, 4.5]]",
                           "(\"hello\", [true, false], int32(7))", "\"\"", "[[\"x\", \"yz\"]]"}) {
    auto e = parse_element(text);
    REQUIRE_MESSAGE(e.ok(), text << ": " << e.status().to_string());
    out.push_back(*e);
  }
  return out;
}

std::map<std::string, std::string> codec_seeds() {
  std::map<std::string, std::string> out;
  auto elements = sample_elements();
  for (std::size_t i = 0; i < elements.size(); ++i) {
    std::string bytes;
    encode_element(elements[i], bytes);
    out["element-" + std::to_string(i)] = bytes;
  }
  out["batch-none"] = encode_batch(elements, Compression::none);
  out["batch-lz4"] = encode_batch(elements, Compression::lz4);
  return out;
}

bool codec_one(const std::string& input) {
  bool valid = false;
  auto element = decode_element(input);
  if (element.ok()) { // a valid element encodes and decodes again
    std::string again;
    encode_element(*element, again);
    REQUIRE(decode_element(again).ok());
    valid = true;
  }
  std::vector<Element> batch;
  if (decode_batch(input, batch).ok()) {
    std::vector<Element> back;
    REQUIRE(decode_batch(encode_batch(batch, Compression::none), back).ok());
    REQUIRE(back.size() == batch.size());
    valid = true;
  }
  return valid;
}

// --- bulk stream (ack, then frame header + payload, ...)

std::map<std::string, std::string> bulk_seeds() {
  std::map<std::string, std::string> out;
  namespace bulk = actors::bulk;
  auto batch = encode_batch(sample_elements(), Compression::none);
  std::string stream(bulk::kAckBytes, '\0');
  bulk::write_ack(stream.data(), 7);
  for (uint32_t i = 0; i < 2; ++i) {
    std::vector<char> frame(bulk::kFrameHeaderBytes + batch.size());
    bulk::FrameHeader h;
    h.task = 3;
    h.batch_seq = i;
    h.index = i;
    h.count = 2;
    bulk::write_frame_header(frame, h);
    std::copy(batch.begin(), batch.end(), frame.begin() + bulk::kFrameHeaderBytes);
    stream.append(frame.data(), frame.size());
  }
  out["two-frames"] = stream;
  out["ack-only"] = stream.substr(0, bulk::kAckBytes);
  return out;
}

bool bulk_one(const std::string& input) {
  namespace bulk = actors::bulk;
  bulk::StreamReader reader;
  std::size_t pos = 0;
  bool broken = false;
  // Every unit consumes input, so the loop ends; a unit is cut only from bytes that exist (the
  // announced length is never allocated up front here, as the brokers do).
  while (!broken) {
    const std::size_t want = reader.next_size();
    if (want > input.size() - pos)
      break;
    std::vector<char> unit(input.begin() + static_cast<long>(pos),
                           input.begin() + static_cast<long>(pos + want));
    pos += want;
    const bool payload = reader.payload_next();
    auto event = reader.apply(unit);
    if (auto* b = std::get_if<bulk::StreamReader::Broken>(&event)) {
      REQUIRE_FALSE(b->why.empty());
      broken = true;
    } else if (auto* p = std::get_if<bulk::StreamReader::Payload>(&event)) {
      REQUIRE(payload);
      REQUIRE(p->header.length == want);
      std::vector<Element> elements; // the consumer decodes the payload next
      (void)decode_batch(std::string_view(unit.data(), unit.size()), elements);
    }
    if (want == 0 && !broken && pos == input.size())
      break; // a zero-length payload at the very end: nothing more can come
  }
  return !broken;
}

// --- TFRecord files

std::map<std::string, std::string> tfrecord_seeds() {
  std::map<std::string, std::string> out;
  testing::TempDir dir;
  REQUIRE(dir.ok());
  const auto path = dir.path() + "/seed.tfrecord";
  {
    auto w = TFRecordWriter::open(path);
    REQUIRE(w.ok());
    for (const char* r : {"first record", "", "a third, longer record with some bytes in it"})
      REQUIRE((*w)->write(r).ok());
    REQUIRE((*w)->close().ok());
  }
  out["three-records"] = read_bytes(path);
  return out;
}

bool tfrecord_one(const std::string& input) {
  static testing::TempDir dir;
  REQUIRE(dir.ok());
  const auto path = dir.path() + "/input.tfrecord";
  // A new file each time: ext4 flushes a file truncated and rewritten on close (auto_da_alloc),
  // which made this target wait on the disk (12 s instead of < 1 s).
  std::error_code ec;
  fs::remove(path, ec);
  write_bytes(path, input);
  auto reader = TFRecordReader::open(path);
  REQUIRE(reader.ok());
  std::string record;
  uint64_t total = 0;
  // Each good record takes at least 16 bytes of the file: the loop is bounded by its size.
  for (std::size_t i = 0; i <= input.size() / 16 + 1; ++i) {
    bool eof = false;
    auto s = (*reader)->read(record, eof);
    if (!s.ok()) {
      REQUIRE(s.code() == ErrorCode::data_loss);
      return false;
    }
    if (eof)
      return true;
    total += 16 + record.size();
    REQUIRE(total <= input.size());
  }
  FAIL("more records than the file can hold");
  return false;
}

// --- the text form (datasets and element literals)

std::map<std::string, std::string> text_seeds() {
  return {
    {"pipeline-1", "range(100).map(square).shuffle(16, seed=3).batch(8)"},
    {"pipeline-2",
     "zip(range(3), from_tensor_slices([\"a\", \"b\", \"c\"])).map(scale(factor=2.5))"},
    {"pipeline-3", "range(10).filter(is_even).repeat(2).take(7).prefetch(AUTOTUNE)"},
    {"pipeline-4", "from_tensor_slices([[1, 2], [3, 4]]).padded_batch(2, drop_remainder=true)"},
    {"element-1", "(1, \"a\", [true, false], int32(7), float64(2.5))"},
  };
}

bool text_one(const std::string& input) {
  bool valid = false;
  auto dataset = parse_dataset(input);
  if (dataset.ok()) { // to_text prints a form that parses back
    auto back = parse_dataset(to_text(*dataset));
    REQUIRE_MESSAGE(back.ok(), to_text(*dataset) << ": " << back.status().to_string());
    valid = true;
  } else {
    REQUIRE(!dataset.status().message().empty());
  }
  if (parse_element(input).ok())
    valid = true;
  return valid;
}

// --- the journal reader (a whole segment, as the dispatcher opens it at start-up)

std::map<std::string, std::string> journal_seeds() {
  using namespace actors;
  using namespace msg;
  testing::TempDir dir;
  REQUIRE(dir.ok());
  JournalOptions options{dir.path()};
  options.sync = false;
  DispatcherState state;
  auto j = Journal::open(options, state);
  REQUIRE(j.ok());
  (*j)->append(RegisterDatasetRecord{"1000", "fp", "range(10)", 1, 0}, nullptr);
  (*j)->append(RegisterWorkerRecord{1, "127.0.0.1:5001", 0}, nullptr);
  (*j)->append(CreateJobRecord{1, "1000", "named", 1, -1, "AUTO", 0}, nullptr);
  (*j)->append(CreateTaskRecord{1, 1, 1, 0}, nullptr);
  (*j)->append(SplitPositionRecord{1, 0, 0, 3, 3, 0, {}, {}}, nullptr);
  // format 12: a split of a second splittable source (zip, concatenate), handed out and finished
  (*j)->append(SplitPositionRecord{1, 0, 0, 1, 4, 0, {JournalSplit{0, 0, 0, 64, "", 1}}, {}, 1},
               nullptr);
  (*j)->append(SplitPositionRecord{1, 0, 0, 0, 0, 0, {}, {JournalSplitKey{0, 0, 1}}}, nullptr);
  (*j)->append(FinishTaskRecord{1, "", 0}, nullptr);
  (*j)->append(CreateSnapshotRecord{"/s", "1000", 1, 4096, 64, true, 0}, nullptr);
  (*j)->append(AddSnapshotStreamRecord{"/s", 0, 0}, nullptr);
  (*j)->append(SnapshotSplitsRecord{"/s", 0, 0, {JournalSplit{0, 0, 0, 64, ""}}, true, 0, 1, 0},
               nullptr);
  (*j)->append(SnapshotStreamWriterRecord{"/s", 0, 1, 0}, nullptr);
  // format 15: an OFF read resumed from a cursor of two slots, its first task taking the first
  CreateJobRecord resumed{2, "1000", "", 0, -1, "AUTO", 0};
  resumed.off_slots = {OffSlot{3, 40}, OffSlot{4, 55}};
  (*j)->append(resumed, nullptr);
  (*j)->append(CreateTaskRecord{2, 2, 1, 0}, nullptr);
  // format 16: a coordinated read by 2 resumed from cursors saved in job 1; both trainers' shares
  CreateJobRecord coordinated{3, "1000", "coord", 0, 2, "AUTO", 0};
  coordinated.resumed_from = 1;
  (*j)->append(CreateNamedJobRecord{coordinated, 1}, nullptr);
  (*j)->append(CoordinatedResumeRecord{3, 1, {OffSlot{3, 40}, OffSlot{4, 60}}, 0}, nullptr);
  (*j)->append(CoordinatedResumeRecord{3, 0, {OffSlot{3, 40}, OffSlot{4, 56}}, 0}, nullptr);
  (*j)->append(CreateTaskRecord{3, 3, 1, 0}, nullptr);
  REQUIRE((*j)->flush().ok());
  auto path = Journal::segment_path(dir.path(), 0);
  j->reset();
  return {{"segment", read_bytes(path)}};
}

bool journal_one(const std::string& input) {
  using namespace actors;
  static testing::TempDir dir;
  REQUIRE(dir.ok());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.path(), ec))
    fs::remove(e.path(), ec);
  write_bytes(Journal::segment_path(dir.path(), 0), input);
  JournalOptions options{dir.path()};
  options.sync = false;
  DispatcherState state;
  auto j = Journal::open(options, state);
  (void)Journal::decode(input); // the record decoder alone, on arbitrary bytes
  if (!j.ok()) {
    REQUIRE(j.status().code() == ErrorCode::data_loss);
    return false;
  }
  return true;
}

} // namespace

TEST_CASE("fuzz: element and batch codec decode") { run("codec", 100000, codec_seeds, codec_one); }

TEST_CASE("fuzz: bulk stream reader (ack, frame headers, payloads)") {
  run("bulk_stream", 100000, bulk_seeds, bulk_one);
}

TEST_CASE("fuzz: TFRecord reader") { run("tfrecord", 3000, tfrecord_seeds, tfrecord_one); }

TEST_CASE("fuzz: text form parser") { run("text_form", 20000, text_seeds, text_one); }

TEST_CASE("fuzz: journal reader") { run("journal", 1500, journal_seeds, journal_one); }
