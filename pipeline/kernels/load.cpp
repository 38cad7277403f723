// load(path, wait, element_spec, num_shards, shard_index): the elements of a snapshot
// (pipeline/io/snapshot_files.hpp), chunk by chunk in (stream, index) order. wait=false reads a
// finished snapshot only; wait=true reads the chunks as they are committed and ends when the
// snapshot is done. A failed snapshot fails the read with the cause its writer recorded. Under
// DYNAMIC sharding the splits name chunks; num_shards/shard_index (FILE sharding) keep the
// chunks whose (stream, index) falls to this shard.
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

constexpr std::chrono::milliseconds kPollInterval{50};

class LoadIterator : public Iterator {
public:
  LoadIterator(std::string dir, bool wait, int64_t num_shards, int64_t shard_index,
               SplitProvider* provider, const PathPolicy* paths, StopCheck stop)
    : dir_(std::move(dir)), wait_(wait), num_shards_(num_shards), shard_index_(shard_index),
      splits_({}, provider, "load", paths), provider_(provider), paths_(paths), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    while (next_ == buffer_.size()) {
      buffer_.clear();
      next_ = 0;
      snapshot::ChunkRef chunk;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(provider_ ? next_split(chunk, end) : next_chunk(chunk, end));
      if (end) {
        end_of_sequence = true;
        return Status::OK();
      }
      CONVEYOR_RETURN_IF_ERROR(check_path(paths_, chunk.path, PathPolicy::Access::read, "load"));
      CONVEYOR_RETURN_IF_ERROR(snapshot::read_chunk(chunk, buffer_).with_context("`load`"));
    }
    out = std::move(buffer_[next_++]);
    return Status::OK();
  }

private:
  Status next_split(snapshot::ChunkRef& chunk, bool& end) {
    std::string file;
    CONVEYOR_RETURN_IF_ERROR(splits_.next(file, end));
    if (end)
      return Status::OK();
    auto ref = snapshot::chunk_from_path(file);
    if (!ref.ok())
      return ref.status().with_context("`load`");
    chunk = std::move(*ref);
    return Status::OK();
  }

  bool mine(const snapshot::ChunkRef& c) const {
    return (c.stream * 1000003 + c.index) % num_shards_ == shard_index_;
  }

  // The first committed chunk not read yet (chunks may be committed out of order by concurrent
  // streams, so the read set, not a position, says what is left).
  Status next_chunk(snapshot::ChunkRef& chunk, bool& end) {
    for (;;) {
      CONVEYOR_RETURN_IF_ERROR(stop_.check("load"));
      if (wait_ && !started_) { // wait=true may start before the save created the snapshot
        auto metadata = snapshot::read_metadata(dir_);
        if (!metadata.ok() && metadata.status().code() != ErrorCode::not_found)
          return metadata.status().with_context("`load`");
        if (!metadata.ok()) {
          std::this_thread::sleep_for(kPollInterval);
          continue;
        }
        started_ = true;
      }
      // Progress first: chunks committed before DONE are all in the listing that follows.
      auto progress = snapshot::progress(dir_);
      if (!progress.ok())
        return progress.status().with_context("`load`");
      if (progress->state == snapshot::State::failed)
        return failed_precondition("`load`: the snapshot at " + dir_ +
                                   " failed while it was written: " + progress->error);
      if (progress->state == snapshot::State::writing && !wait_)
        return failed_precondition("`load`: the snapshot at " + dir_ +
                                   " is still being written (it has no DONE marker): load it with "
                                   "wait=true to read it while it is written");
      auto chunks = snapshot::committed_chunks(dir_);
      if (!chunks.ok())
        return chunks.status().with_context("`load`");
      for (auto& c : *chunks) {
        if (!mine(c) || read_.count({c.stream, c.index}))
          continue;
        read_.insert({c.stream, c.index});
        chunk = std::move(c);
        return Status::OK();
      }
      if (progress->state == snapshot::State::done) {
        end = true;
        return Status::OK();
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  std::string dir_;
  bool wait_;
  int64_t num_shards_;
  int64_t shard_index_;
  FileSequence splits_;
  SplitProvider* provider_;
  const PathPolicy* paths_;
  StopCheck stop_;
  bool started_ = false; // wait=true: the snapshot's metadata exists
  std::set<std::pair<int64_t, int64_t>> read_;
  std::vector<Element> buffer_; // the current chunk's elements
  std::size_t next_ = 0;
};

} // namespace

MakeResult make_load(const NodePtr& node, const KernelContext& kctx) {
  const std::string dir = node->string_attr("path");
  const int64_t num_shards = node->int_attr("num_shards");
  const int64_t shard_index = node->int_attr("shard_index");
  if (num_shards < 1 || shard_index < 0 || shard_index >= num_shards)
    return invalid_argument("`load`: shard_index must be in [0, num_shards), got shard_index " +
                            std::to_string(shard_index) + " of num_shards " +
                            std::to_string(num_shards));
  CONVEYOR_RETURN_IF_ERROR(
    check_path(kctx.paths(), dir + "/snapshot.metadata", PathPolicy::Access::read, "load"));
  auto metadata = snapshot::read_metadata(dir);
  if (!metadata.ok() &&
      !(metadata.status().code() == ErrorCode::not_found && node->bool_attr("wait")))
    return metadata.status().with_context("`load`");
  return IteratorPtr(std::make_unique<LoadIterator>(dir, node->bool_attr("wait"), num_shards,
                                                    shard_index, kctx.split_provider(),
                                                    kctx.paths(), kctx.stop()));
}

} // namespace conveyor::kernels
