// A distributed snapshot's stream in one process (worker/snapshot_stream.hpp): a writer stopped
// mid-stream and a second writer of the same stream, fed the same journaled splits, write every
// element exactly once; a pipeline that is not per-split resumes from the checkpoint written
// with its last committed chunk (and refuses to when an op cannot save); and the dispatcher state's snapshot records (dispatcher/dispatcher_state.hpp) survive
// the journal codec and a state snapshot.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>

#include "conveyor/functions.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/journal.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/unit/sharding/temp_dir.hpp"
#include "worker/snapshot_stream.hpp"
#include "worker/snapshot_streams.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using conveyor::testing::TempDir;

namespace {

// The dispatcher's side of one stream: the splits handed out so far, by sequence number, drawn
// from one provider and handed out again unchanged to whoever asks for them later.
class JournaledSplits {
public:
  explicit JournaledSplits(const Dataset& d) {
    SplitOptions o;
    o.range_split_size = 10;
    provider_ = std::move(make_split_provider(d, o).value());
  }
  FetchStreamSplits fetch() {
    return [this](int64_t seq) -> Expected<StreamSplits> {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int64_t>(issued_.size()) < seq + 3 && !end_) {
        Split s;
        bool end = false;
        CONVEYOR_RETURN_IF_ERROR(provider_->get_next(s, end));
        if (end)
          end_ = true;
        else
          issued_.push_back(s);
      }
      StreamSplits out;
      for (int64_t i = seq; i < std::min<int64_t>(seq + 3, issued_.size()); ++i)
        out.splits.push_back(issued_[static_cast<std::size_t>(i)]);
      out.end = end_ && seq + static_cast<int64_t>(out.splits.size()) ==
                          static_cast<int64_t>(issued_.size());
      ++fetches_;
      return out;
    };
  }
  int64_t fetches() const { return fetches_; }

private:
  std::mutex mutex_;
  std::unique_ptr<SplitProvider> provider_;
  std::vector<Split> issued_;
  bool end_ = false;
  int64_t fetches_ = 0;
};

StreamTask task_for(const Dataset& d, const std::string& path, bool per_split) {
  StreamTask t;
  t.path = path;
  t.stream = 0;
  t.definition = to_binary(d);
  t.compression = Compression::none;
  t.chunk_bytes = 200; // a few splits per chunk
  t.per_split = per_split;
  return t;
}

std::vector<int64_t> loaded(const std::string& path) {
  std::vector<int64_t> out;
  auto chunks = snapshot::committed_chunks(path);
  REQUIRE(chunks.ok());
  for (const auto& c : *chunks) {
    std::vector<Element> elements;
    REQUIRE(snapshot::read_chunk(c, elements).ok());
    for (const auto& e : elements)
      out.push_back(e[0].at<int64_t>(0));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status create_snapshot(const Dataset& d, const std::string& path) {
  snapshot::Metadata m;
  m.fingerprint = d.fingerprint();
  m.definition = d.to_text();
  m.compression = Compression::none;
  return snapshot::create(path, m);
}

} // namespace

TEST_CASE("snapshot stream: a writer stopped mid-stream is resumed by the next one after its last "
          "committed chunk, every element exactly once") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.path() + "/snap";
  const Dataset d = Dataset::range(1000).map("square");
  REQUIRE(create_snapshot(d, path).ok());
  JournaledSplits journal(d);
  auto fetch = journal.fetch();
  std::atomic<bool> stop{false};
  StreamEnv env;
  env.sync = false;
  env.stop = &stop;
  StreamCounts at_stop;
  env.on_commit = [&](const StreamCounts& c) {
    if (c.chunks >= 3 && !stop.load()) { // the first writer dies after its third chunk
      at_stop = c;
      stop.store(true);
    }
  };
  Status first = write_stream(task_for(d, path, true), fetch, env);
  CHECK(first.code() == ErrorCode::cancelled);
  REQUIRE(at_stop.chunks == 3);
  // The second writer starts from what is on disk: the same three chunks.
  stop.store(false);
  StreamCounts resumed{-1, -1, -1};
  env.on_commit = [&](const StreamCounts& c) {
    if (resumed.chunks < 0)
      resumed = c;
  };
  Status second = write_stream(task_for(d, path, true), fetch, env);
  REQUIRE_MESSAGE(second.ok(), second.to_string());
  CHECK(resumed.chunks == 3);
  CHECK(resumed.elements == at_stop.elements);
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 1000; ++i)
    want.push_back(i * i);
  CHECK(loaded(path) == want);
}

TEST_CASE("snapshot streams: a stream that ends calls on_ended at once, so the worker reports it "
          "without waiting for its next heartbeat") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.path() + "/snap";
  const Dataset d = Dataset::range(100);
  REQUIRE(create_snapshot(d, path).ok());
  JournaledSplits journal(d);
  std::mutex mutex;
  std::condition_variable cv;
  int ended = 0;
  SnapshotStreams streams([&](const msg::snapshot_stream_def&) { return journal.fetch(); }, nullptr,
                          [&] {
                            std::lock_guard<std::mutex> lock(mutex);
                            ++ended;
                            cv.notify_all();
                          });
  msg::snapshot_stream_def def;
  def.path = path;
  def.definition = to_binary(d);
  def.compression = static_cast<uint8_t>(Compression::none);
  def.chunk_bytes = 200;
  def.per_split = true;
  streams.assign({def});
  {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return ended > 0; }));
  }
  auto reports = streams.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].done);
  CHECK(reports[0].elements == 100);
  CHECK(streams.running() == 0);
  streams.assign({}); // the dispatcher recorded it: no longer listed, and no second call
  CHECK(ended == 1);
}

// Every int of every element, in the order the stream's chunks hold them.
std::vector<int64_t> chunk_values(const std::string& path) {
  std::vector<int64_t> out;
  auto chunks = snapshot::committed_chunks(path);
  REQUIRE(chunks.ok());
  for (const auto& c : *chunks) {
    std::vector<Element> elements;
    REQUIRE(snapshot::read_chunk(c, elements).ok());
    for (const auto& e : elements)
      for (int64_t k = 0; k < e[0].num_elements(); ++k)
        out.push_back(e[0].rank() == 0 ? e[0].as_int64() : e[0].at<int64_t>(k));
  }
  return out;
}

TEST_CASE("snapshot stream: a pipeline that is not per-split resumes from the checkpoint written "
          "with its last committed chunk, the same elements in the same order as one writer") {
  const Dataset d = Dataset::range(1000).shuffle(50, 3).batch(7).prefetch(2);
  TempDir dir;
  REQUIRE(dir.ok());
  StreamEnv env;
  env.sync = false;
  // One writer, uninterrupted.
  const std::string whole_path = dir.path() + "/whole";
  REQUIRE(create_snapshot(d, whole_path).ok());
  JournaledSplits whole_journal(d);
  REQUIRE(write_stream(task_for(d, whole_path, false), whole_journal.fetch(), env).ok());
  const std::vector<int64_t> whole = chunk_values(whole_path);
  REQUIRE(whole.size() == 1000);
  // Writers stopped after their 1st, 4th and 5th chunk, each followed by the next.
  const std::string path = dir.path() + "/snap";
  REQUIRE(create_snapshot(d, path).ok());
  JournaledSplits journal(d);
  auto fetch = journal.fetch();
  std::atomic<bool> stop{false};
  env.stop = &stop;
  for (int64_t stop_at : {1, 4, 5}) {
    CAPTURE(stop_at);
    env.on_commit = [&](const StreamCounts& c) {
      if (c.chunks >= stop_at)
        stop.store(true);
    };
    stop.store(false);
    CHECK(write_stream(task_for(d, path, false), fetch, env).code() == ErrorCode::cancelled);
    // A writer that died after writing the next chunk's checkpoint but before the chunk: the
    // stale checkpoint is replaced, never read.
    auto chunks = snapshot::committed_chunks(path);
    REQUIRE(chunks.ok());
    REQUIRE(snapshot::write_checkpoint(path, 0, static_cast<int64_t>(chunks->size()), "junk", false)
              .ok());
  }
  stop.store(false);
  env.on_commit = nullptr;
  REQUIRE(write_stream(task_for(d, path, false), fetch, env).ok());
  CHECK(chunk_values(path) == whole);
  // Only the last two chunks' checkpoints are kept.
  auto chunks = snapshot::committed_chunks(path);
  REQUIRE(chunks.ok());
  const auto last = static_cast<int64_t>(chunks->size()) - 1;
  REQUIRE(last >= 3);
  CHECK(snapshot::read_checkpoint(path, 0, last).ok());
  CHECK(snapshot::read_checkpoint(path, 0, last - 2).status().code() == ErrorCode::not_found);
}

// Writes `d`'s stream 0 under `path` with writers stopped after their `stops` committed chunks,
// each followed by the next, the last one to the end.
void write_with_takeovers(const Dataset& d, const std::string& path,
                          const std::vector<int64_t>& stops) {
  REQUIRE(create_snapshot(d, path).ok());
  JournaledSplits journal(d);
  auto fetch = journal.fetch();
  std::atomic<bool> stop{false};
  StreamEnv env;
  env.sync = false;
  env.stop = &stop;
  for (int64_t stop_at : stops) {
    CAPTURE(stop_at);
    env.on_commit = [&](const StreamCounts& c) {
      if (c.chunks >= stop_at)
        stop.store(true);
    };
    stop.store(false);
    CHECK(write_stream(task_for(d, path, false), fetch, env).code() == ErrorCode::cancelled);
  }
  stop.store(false);
  env.on_commit = nullptr;
  Status last = write_stream(task_for(d, path, false), fetch, env);
  REQUIRE_MESSAGE(last.ok(), last.to_string());
}

TEST_CASE("snapshot stream: a `cache` pipeline's stream taken over after a committed chunk "
          "resumes from its checkpoint, the same elements in the same order as one writer") {
  TempDir dir;
  REQUIRE(dir.ok());
  for (const bool file : {false, true}) {
    CAPTURE(file);
    // A file cache of its own per run: the uninterrupted run's committed file would be read by
    // the next run instead of its input.
    auto dataset = [&](const std::string& name) {
      const Dataset shuffled = Dataset::range(600).shuffle(40, 9);
      return (file ? shuffled.cache(dir.path() + "/" + name) : shuffled.cache()).batch(5);
    };
    const std::string tag = file ? "file" : "memory";
    const Dataset whole_d = dataset(tag + "-whole-cache");
    write_with_takeovers(whole_d, dir.path() + "/" + tag + "-whole", {});
    const std::vector<int64_t> whole = chunk_values(dir.path() + "/" + tag + "-whole");
    REQUIRE(whole.size() == 600);
    const std::string path = dir.path() + "/" + tag + "-snap";
    write_with_takeovers(dataset(tag + "-cache"), path, {1, 3});
    CHECK(chunk_values(path) == whole);
  }
}

TEST_CASE("snapshot stream: a pipeline with an op that cannot save refuses to resume after a "
          "committed chunk, and a damaged checkpoint fails naming it") {
  // A registered source function whose iterator does not save (and is not skip_by_count).
  static const bool registered = [] {
    FunctionDef def;
    def.name = "snapshot_test_unsaved";
    def.kind = FunctionKind::source;
    def.doc = "test helper";
    def.source = [](const Params&) -> Expected<std::unique_ptr<Iterator>> {
      struct Ones : Iterator {
        Status get_next(Element& out, bool& end) override {
          end = false;
          out = Element{Tensor::scalar(int64_t{1})};
          return Status::OK();
        }
      };
      return std::unique_ptr<Iterator>(std::make_unique<Ones>());
    };
    return FunctionRegistry::global().add(def).ok();
  }();
  REQUIRE(registered);
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.path() + "/snap";
  const Dataset d =
    Dataset::zip({Dataset::range(300).map("square"), Dataset::source("snapshot_test_unsaved")});
  REQUIRE(create_snapshot(d, path).ok());
  JournaledSplits journal(d);
  auto fetch = journal.fetch();
  std::atomic<bool> stop{false};
  StreamEnv env;
  env.sync = false;
  env.stop = &stop;
  env.on_commit = [&](const StreamCounts& c) {
    if (c.chunks >= 1)
      stop.store(true);
  };
  CHECK(write_stream(task_for(d, path, false), fetch, env).code() == ErrorCode::cancelled);
  stop.store(false);
  env.on_commit = nullptr;
  Status again = write_stream(task_for(d, path, false), fetch, env);
  CHECK(again.code() == ErrorCode::failed_precondition);
  CHECK(again.message().find("cannot resume exactly once") != std::string::npos);
  // A checkpoint that does not check out is data_loss naming its file.
  REQUIRE(snapshot::write_checkpoint(path, 0, 0, "state", false).ok());
  const std::string file = snapshot::checkpoint_path(path, 0, 0);
  {
    std::FILE* f = std::fopen(file.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, -1, SEEK_END);
    std::fputc('X', f);
    std::fclose(f);
  }
  Status damaged = write_stream(task_for(d, path, false), fetch, env);
  CHECK(damaged.code() == ErrorCode::data_loss);
  CHECK(damaged.message().find(file) != std::string::npos);
}

TEST_CASE("snapshot records: streams, splits, done and finish apply, replay through the journal "
          "codec and survive a state snapshot") {
  using namespace conveyor::msg;
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  records.push_back(CreateSnapshotRecord{"/s", "1000", 1, 4096, 64, true, 5});
  records.push_back(AddSnapshotStreamRecord{"/s", 0, 6});
  records.push_back(AddSnapshotStreamRecord{"/s", 1, 6});
  records.push_back(SnapshotSplitsRecord{
    "/s", 0, 0, {JournalSplit{0, 0, 0, 64, ""}, JournalSplit{0, 1, 64, 128, ""}}, false, 0, 2, 7});
  records.push_back(
    SnapshotSplitsRecord{"/s", 1, 0, {JournalSplit{0, 2, 128, 150, ""}}, true, 0, 3, 8});
  records.push_back(SnapshotSplitsRecord{"/s", 0, 2, {}, true, 0, 3, 9});
  records.push_back(SnapshotStreamDoneRecord{"/s", 1, 10});
  records.push_back(SnapshotStreamWriterRecord{"/s", 0, 3, 10});
  records.push_back(SnapshotStreamWriterRecord{"/s", 0, 4, 10}); // taken over
  DispatcherState state;
  for (const auto& r : records) {
    auto back = Journal::decode(Journal::encode(r));
    REQUIRE(back.ok());
    REQUIRE(state.apply(*back).ok());
  }
  const SnapshotEntry* s = state.snapshot_at("/s");
  REQUIRE(s != nullptr);
  REQUIRE(s->streams.size() == 2);
  CHECK(s->streams[0].splits.size() == 2);
  CHECK(s->streams[0].ended);
  CHECK_FALSE(s->streams[0].done);
  CHECK(s->streams[1].done);
  CHECK(s->streams[0].writer == 4);
  CHECK(s->streams[1].writer == 0);
  CHECK(s->exhausted);
  CHECK(s->next_index == 3);
  // Out of order or contradicting records are refused.
  CHECK_FALSE(state.apply(AddSnapshotStreamRecord{"/s", 5, 11}).ok());
  CHECK_FALSE(state.apply(SnapshotSplitsRecord{"/s", 0, 2, {}, true, 0, 3, 11}).ok()); // ended
  CHECK_FALSE(state.apply(CreateSnapshotRecord{"/s", "1000", 1, 1, 1, true, 12}).ok());
  CHECK_FALSE(state.apply(SnapshotStreamDoneRecord{"/nowhere", 0, 12}).ok());
  CHECK_FALSE(state.apply(SnapshotStreamWriterRecord{"/s", 1, 3, 12}).ok()); // done
  CHECK_FALSE(state.apply(SnapshotStreamWriterRecord{"/s", 0, 0, 12}).ok()); // no worker
  CHECK_FALSE(state.apply(SnapshotStreamWriterRecord{"/s", 7, 3, 12}).ok()); // no such stream
  DispatcherState restored;
  REQUIRE(restored.restore(state.snapshot()).ok());
  CHECK(restored == state);
  REQUIRE(state.apply(SnapshotStreamDoneRecord{"/s", 0, 13}).ok());
  REQUIRE(state.apply(FinishSnapshotRecord{"/s", "", 14}).ok());
  CHECK(state.snapshot_at("/s")->finished);
  CHECK_FALSE(state.apply(AddSnapshotStreamRecord{"/s", 2, 15}).ok()); // finished
  // A finished snapshot's path may be saved again.
  CHECK(state.apply(CreateSnapshotRecord{"/s", "1000", 1, 1, 1, true, 16}).ok());
}
