// load(path, wait, element_spec, num_shards, shard_index): the elements of a snapshot
// (pipeline/io/snapshot_files.hpp), chunk by chunk in (stream, index) order. wait=false reads a
// finished snapshot only; wait=true reads the chunks as they are committed and ends when the
// snapshot is done. A failed snapshot fails the read with the cause its writer recorded. Under
// DYNAMIC sharding the splits name chunks; num_shards/shard_index (FILE sharding) keep the
// chunks whose (stream, index) falls to this shard. Once the snapshot is done (its chunks listed
// for good), the next chunk is opened and checked ahead on the executor while this one is decoded
// (kernels/chunk_read_ahead.hpp).
#include <chrono>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/kernels/chunk_read_ahead.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

constexpr std::chrono::milliseconds kPollInterval{50};

class LoadIterator : public Iterator {
public:
  LoadIterator(std::string dir, bool wait, int64_t num_shards, int64_t shard_index,
               SplitProvider* provider, const PathPolicy* paths, StopCheck stop,
               std::shared_ptr<ExecutorGroup> group)
    : dir_(std::move(dir)), wait_(wait), num_shards_(num_shards), shard_index_(shard_index),
      splits_({}, provider, "load", paths), provider_(provider), paths_(paths), stop_(stop),
      ahead_(std::move(group)) {}

  // A chunk is checked whole (both checksums) when it is opened; its elements are then decoded
  // one at a time into the caller's element, viewing the mapped file (no vector of a chunk's
  // elements, no copy).
  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    while (!reader_ || reader_->done()) {
      if (reader_)
        ahead_.retire(std::move(*reader_));
      reader_.reset();
      snapshot::ChunkRef chunk;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(provider_ ? next_split(chunk, end) : next_chunk(chunk, end));
      if (end) {
        end_of_sequence = true;
        return Status::OK();
      }
      CONVEYOR_RETURN_IF_ERROR(open(chunk));
    }
    if (Status s = reader_->next(out); !s.ok()) {
      reader_.reset(); // read no further after an error
      return data_loss("`load`: snapshot chunk " + chunk_path_ + " is damaged: " + s.message());
    }
    ++in_chunk_;
    return Status::OK();
  }

  // The chunks read (the read set, not a listing position, says what is left) and the place in
  // the open one: restore lists the snapshot again and reopens that chunk at that element.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("load");
    splits_.save(out);
    out.put_bool(started_);
    out.put_int(static_cast<int64_t>(read_.size()));
    for (const auto& [stream, index] : read_) {
      out.put_int(stream);
      out.put_int(index);
    }
    const bool reading = reader_ && !reader_->done();
    out.put_bool(reading);
    if (reading) {
      out.put_bytes(chunk_path_);
      out.put_int(in_chunk_);
    }
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("load"));
    CONVEYOR_RETURN_IF_ERROR(splits_.restore(in));
    started_ = in.get_bool();
    const int64_t count = in.get_int();
    read_.clear();
    ahead_.drop();
    for (int64_t i = 0; i < count && in.status().ok(); ++i) {
      const int64_t stream = in.get_int();
      read_.insert({stream, in.get_int()});
    }
    final_listing_ = false;
    listed_.clear();
    next_listed_ = 0;
    reader_.reset();
    const bool reading = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (!reading)
      return Status::OK();
    const std::string path = in.get_bytes();
    const int64_t skip = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    auto chunk = snapshot::chunk_from_path(path);
    if (!chunk.ok())
      return chunk.status().with_context("`load`");
    if (skip < 0 || skip >= chunk->elements)
      return data_loss("pipeline state: `load` is at element " + std::to_string(skip) + " of " +
                       path + ", which holds " + std::to_string(chunk->elements));
    CONVEYOR_RETURN_IF_ERROR(open(*chunk));
    Element skipped;
    for (int64_t i = 0; i < skip; ++i) // bounded by the chunk's element count
      if (Status s = reader_->next(skipped); !s.ok())
        return damaged_chunk(*chunk, s);
    in_chunk_ = skip;
    return Status::OK();
  }

private:
  // The chunk opened ahead when it is this one, else opened here; then the next one ahead.
  Status open(const snapshot::ChunkRef& chunk) {
    CONVEYOR_RETURN_IF_ERROR(check_path(paths_, chunk.path, PathPolicy::Access::read, "load"));
    auto ahead = ahead_.take(chunk.path);
    Expected<BatchReader> reader = ahead ? std::move(*ahead) : open_chunk_reader(chunk);
    if (!reader.ok())
      return reader.status();
    reader_.emplace(std::move(*reader));
    chunk_path_ = chunk.path;
    in_chunk_ = 0;
    read_ahead();
    return Status::OK();
  }

  // Opens the chunk next_listed would give next, if there is one. Only from the final listing:
  // without it the next chunk is not known yet (wait=true polls), or is the split provider's to
  // choose (a split taken early would be lost by a save).
  void read_ahead() {
    if (provider_ || !final_listing_)
      return;
    for (std::size_t i = next_listed_; i < listed_.size(); ++i) {
      const auto& c = listed_[i];
      if (!mine(c) || read_.count({c.stream, c.index}))
        continue;
      if (check_path(paths_, c.path, PathPolicy::Access::read, "load").ok())
        ahead_.start(c); // refused: open() says so when the chunk's turn comes
      return;
    }
  }

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
    if (final_listing_) // DONE was seen: the listing taken after it holds every chunk
      return next_listed(chunk, end);
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
      if (progress->state == snapshot::State::done) {
        // Listed once, not once per chunk (a directory listing per chunk grows with the square
        // of the chunk count).
        listed_ = std::move(*chunks);
        final_listing_ = true;
        return next_listed(chunk, end);
      }
      for (auto& c : *chunks) {
        if (!mine(c) || read_.count({c.stream, c.index}))
          continue;
        read_.insert({c.stream, c.index});
        chunk = std::move(c);
        return Status::OK();
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  // The next chunk of the final listing that is this shard's and not read yet.
  Status next_listed(snapshot::ChunkRef& chunk, bool& end) {
    for (; next_listed_ < listed_.size(); ++next_listed_) {
      auto& c = listed_[next_listed_];
      if (!mine(c) || read_.count({c.stream, c.index}))
        continue;
      read_.insert({c.stream, c.index});
      chunk = std::move(c);
      ++next_listed_;
      return Status::OK();
    }
    end = true;
    return Status::OK();
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
  bool final_listing_ = false; // listed_ is every chunk (listed after DONE)
  std::vector<snapshot::ChunkRef> listed_;
  std::size_t next_listed_ = 0;
  std::optional<BatchReader> reader_; // the current chunk's elements (it views the chunk)
  std::string chunk_path_;
  int64_t in_chunk_ = 0; // elements of the open chunk handed out
  ChunkReadAhead ahead_; // last: destroyed first, so its open finishes before the rest goes
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
  return IteratorPtr(std::make_unique<LoadIterator>(
    dir, node->bool_attr("wait"), num_shards, shard_index, kctx.split_provider(), kctx.paths(),
    kctx.stop(), kctx.executor_group()));
}

} // namespace conveyor::kernels
