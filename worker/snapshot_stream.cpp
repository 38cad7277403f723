#include "worker/snapshot_stream.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <deque>
#include <thread>

#include "conveyor/iterator_state.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/io/snapshot_writer.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/runtime/stop_flag.hpp"

namespace conveyor::actors {

namespace {

constexpr std::chrono::milliseconds kRetryAfter{100};
constexpr const char* kCheckpointTag = "snapshot stream";

bool stopped(const std::atomic<bool>* stop) {
  return stop && stop->load(std::memory_order_relaxed);
}

// The pipeline's SplitProvider: the stream's splits in sequence, fetched a few at a time and
// blocking while the dispatcher is away. current() = the sequence number of the split the
// pipeline read last.
class StreamSplitFeed : public SplitProvider {
public:
  StreamSplitFeed(const FetchStreamSplits& fetch, int64_t first_seq, const std::atomic<bool>* stop,
                  std::string what)
    : fetch_(fetch), next_fetch_(first_seq), current_(first_seq - 1), stop_(stop),
      what_(std::move(what)) {}

  Status get_next(Split& out, bool& end_of_splits) override {
    // Bounded by the stop flag: the worker stops a stream the dispatcher no longer lists.
    while (buffer_.empty() && !ended_) {
      if (stopped(stop_))
        return StopCheck::stopped_status(what_);
      auto got = fetch_(next_fetch_);
      if (!got.ok()) {
        const ErrorCode code = got.status().code();
        if (code != ErrorCode::unavailable && code != ErrorCode::deadline_exceeded)
          return got.status().with_context(what_);
        std::this_thread::sleep_for(kRetryAfter);
        continue;
      }
      next_fetch_ += static_cast<int64_t>(got->splits.size());
      buffer_.insert(buffer_.end(), got->splits.begin(), got->splits.end());
      ended_ = got->end;
    }
    end_of_splits = buffer_.empty();
    if (end_of_splits)
      return Status::OK();
    out = std::move(buffer_.front());
    buffer_.pop_front();
    ++current_;
    return Status::OK();
  }
  SplitPosition position() const override { return {0, current_ + 1}; }
  Status restore(const SplitPosition&) override {
    return unimplemented("a snapshot stream resumes from its committed chunks, not a position");
  }
  int64_t current() const { return current_; }

private:
  const FetchStreamSplits& fetch_;
  int64_t next_fetch_;
  int64_t current_;
  const std::atomic<bool>* stop_;
  std::string what_;
  std::deque<Split> buffer_;
  bool ended_ = false;
};

int64_t file_bytes(const std::string& path) {
  struct stat s {};
  return ::stat(path.c_str(), &s) == 0 ? static_cast<int64_t>(s.st_size) : 0;
}

} // namespace

Status write_stream(const StreamTask& task, const FetchStreamSplits& fetch, const StreamEnv& env) {
  bool can_save = true;
  const std::string what =
    "stream " + std::to_string(task.stream) + " of the snapshot at " + task.path;
  CONVEYOR_RETURN_IF_ERROR(check_path(env.paths, task.path, PathPolicy::Access::write, "save"));
  auto dataset = from_binary(task.definition);
  if (!dataset.ok())
    return dataset.status().with_context(what);
  // What earlier writers of this stream committed.
  auto committed = snapshot::committed_chunks(task.path);
  if (!committed.ok())
    return committed.status().with_context(what);
  StreamCounts counts;
  int64_t resume = 0;
  for (const auto& c : *committed) {
    if (c.stream != task.stream)
      continue;
    resume = std::max(resume, c.index + 1);
    ++counts.chunks;
    counts.elements += c.elements;
    counts.bytes += file_bytes(c.path);
  }
  // Not per-split: the pipeline resumes from the checkpoint written with the last chunk.
  std::string checkpoint;
  int64_t first_seq = task.per_split ? resume : 0;
  if (!task.per_split && counts.chunks > 0) {
    auto read = snapshot::read_checkpoint(task.path, task.stream, resume - 1);
    if (read.status().code() == ErrorCode::not_found)
      return failed_precondition(
        what + " was cut short after committing " + std::to_string(counts.chunks) +
        " chunk(s) without a checkpoint of its pipeline (" +
        snapshot::checkpoint_path(task.path, task.stream, resume - 1) +
        ": an op of it cannot save its state, such as a registered source function whose iterator "
        "does not save), and "
        "its pipeline is not per-split, so it cannot resume exactly once; "
        "remove the snapshot directory and save again");
    if (!read.ok())
      return read.status().with_context(what);
    IteratorStateReader in(*read);
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag(kCheckpointTag).with_context(what));
    first_seq = in.get_int();
    checkpoint = in.get_bytes();
    CONVEYOR_RETURN_IF_ERROR(in.status().with_context(what));
    if (first_seq < 0 || checkpoint.empty() || !in.at_end())
      return data_loss(what + ": checkpoint " +
                       snapshot::checkpoint_path(task.path, task.stream, resume - 1) +
                       " does not hold a stream's state");
  }
  if (env.on_commit)
    env.on_commit(counts);

  StreamSplitFeed splits(fetch, first_seq, env.stop, what);
  IteratorContext ctx;
  ctx.functions = env.functions ? env.functions : &FunctionRegistry::global();
  ctx.paths = env.paths;
  ctx.stop = env.stop;
  ctx.split_provider = &splits;
  auto it = dataset->make_iterator(ctx);
  if (!it.ok())
    return it.status().with_context(what);
  if (!checkpoint.empty()) {
    IteratorStateReader in(checkpoint);
    Status restored = (*it)->restore(in);
    if (restored.ok() && !in.at_end())
      restored = data_loss("pipeline state: bytes left after the pipeline's state");
    CONVEYOR_RETURN_IF_ERROR(restored.with_context(what + ", restoring the checkpoint of chunk " +
                                                   std::to_string(resume - 1)));
  }
  snapshot::WriterOptions w;
  w.stream = task.stream;
  w.first_chunk = task.per_split ? 0 : resume;
  if (!task.per_split) {
    // The pipeline's state right after the chunk's last element, with the split it reads next:
    // what a later writer of this stream restores. An op that cannot save leaves the chunks
    // without a checkpoint (the stream is then written, but cannot resume).
    w.before_commit = [&](int64_t index) {
      if (!can_save)
        return Status::OK();
      IteratorStateWriter state;
      Status saved = (*it)->save(state);
      if (saved.code() == ErrorCode::failed_precondition) {
        can_save = false;
        return Status::OK();
      }
      CONVEYOR_RETURN_IF_ERROR(saved.with_context(what));
      IteratorStateWriter out;
      out.put_tag(kCheckpointTag);
      out.put_int(splits.current() + 1);
      out.put_bytes(state.bytes());
      CONVEYOR_RETURN_IF_ERROR(
        snapshot::write_checkpoint(task.path, task.stream, index, out.bytes(), env.sync));
      // Chunk index - 1 is committed (chunks commit in order), so only its checkpoint and this
      // one can be needed: one holding a shuffle buffer can be large.
      if (index >= 2)
        std::remove(snapshot::checkpoint_path(task.path, task.stream, index - 2).c_str());
      return Status::OK();
    };
  }
  w.compression = task.compression;
  w.chunk_bytes = static_cast<std::size_t>(std::max<int64_t>(1, task.chunk_bytes));
  w.sync = env.sync;
  w.split_aligned = task.per_split;
  snapshot::StreamWriter writer(task.path, w);
  int64_t reported = 0;
  auto report = [&] {
    if (writer.chunks() == reported)
      return;
    reported = writer.chunks();
    StreamCounts now = counts;
    now.chunks += writer.chunks();
    now.elements += writer.elements();
    now.bytes += writer.file_bytes();
    if (env.on_commit)
      env.on_commit(now);
  };
  int64_t seen = splits.current();
  for (;;) {
    if (stopped(env.stop))
      return StopCheck::stopped_status(what);
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR((*it)->get_next(e, end).with_context(what));
    if (task.per_split && splits.current() != seen) {
      // The pipeline moved to a later split: what it produced before came from the earlier ones.
      CONVEYOR_RETURN_IF_ERROR(writer.end_of_splits(splits.current() - 1, false));
      seen = splits.current();
    }
    if (end)
      break;
    CONVEYOR_RETURN_IF_ERROR(writer.append(std::move(e)));
    report();
  }
  if (task.per_split)
    CONVEYOR_RETURN_IF_ERROR(writer.end_of_splits(splits.current(), true));
  else
    CONVEYOR_RETURN_IF_ERROR(writer.finish());
  report();
  return Status::OK();
}

} // namespace conveyor::actors
