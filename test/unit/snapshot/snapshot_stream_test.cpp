// A distributed snapshot's stream in one process (worker/snapshot_stream.hpp): a writer stopped
// mid-stream and a second writer of the same stream, fed the same journaled splits, write every
// element exactly once; a pipeline that is not per-split refuses to resume after a committed
// chunk; and the dispatcher state's snapshot records (dispatcher/dispatcher_state.hpp) survive
// the journal codec and a state snapshot.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/journal.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/unit/sharding/temp_dir.hpp"
#include "worker/snapshot_stream.hpp"

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

TEST_CASE("snapshot stream: a pipeline that is not per-split refuses to resume after a committed "
          "chunk") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.path() + "/snap";
  const Dataset d = Dataset::range(1000).batch(7);
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
  CHECK(s->exhausted);
  CHECK(s->next_index == 3);
  // Out of order or contradicting records are refused.
  CHECK_FALSE(state.apply(AddSnapshotStreamRecord{"/s", 5, 11}).ok());
  CHECK_FALSE(state.apply(SnapshotSplitsRecord{"/s", 0, 2, {}, true, 0, 3, 11}).ok()); // ended
  CHECK_FALSE(state.apply(CreateSnapshotRecord{"/s", "1000", 1, 1, 1, true, 12}).ok());
  CHECK_FALSE(state.apply(SnapshotStreamDoneRecord{"/nowhere", 0, 12}).ok());
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
