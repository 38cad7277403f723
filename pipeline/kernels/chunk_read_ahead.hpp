// Private to the `load` kernel: opening a snapshot chunk (read or mapped, both checksums checked,
// the batch header read and an lz4 body inflated) one chunk ahead of the reader, on the process's
// executor (pipeline/runtime/executor.hpp), as tf.data's snapshot reader does on reader threads.
// A 1 KiB-element load cannot check a chunk and decode it on one core in the time a raw read
// copies it (docs/BENCHMARKS.md, "Where a 1 KiB load's time goes"): here the next chunk's pages
// are mapped and checked while the elements of the current one are decoded.
//
// The read-ahead changes nothing the iterator saves and hands nothing out by itself: the iterator
// takes an opened chunk only when that chunk becomes its current one, so a damaged chunk fails
// after every element of the chunks before it, naming it, as without the read-ahead. At most one
// chunk is open ahead (its bytes held until taken or dropped). When no executor thread has
// started the open by the time the reader needs the chunk (a busy machine), the reader runs it
// itself (caller-runs, as prefetch does): never slower than opening it in turn, but then with no
// overlap.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/runtime/executor.hpp"
#include "pipeline/tensor/codec.hpp"

namespace conveyor::kernels {

// The chunk, checked and ready to decode; errors name the chunk (data_loss for a damaged one).
Expected<BatchReader> open_chunk_reader(const snapshot::ChunkRef& chunk);
// data_loss "`load`: snapshot chunk PATH is damaged: WHY".
Status damaged_chunk(const snapshot::ChunkRef& chunk, const Status& why);

class ChunkReadAhead {
public:
  explicit ChunkReadAhead(std::shared_ptr<ExecutorGroup> group);
  ~ChunkReadAhead(); // drops a chunk not started, waits for one being opened
  ChunkReadAhead(const ChunkReadAhead&) = delete;
  ChunkReadAhead& operator=(const ChunkReadAhead&) = delete;

  // Starts opening `chunk` on an executor thread, dropping the one ahead before (if any).
  void start(const snapshot::ChunkRef& chunk);
  // What opening `path` gave, when it is the chunk ahead: waits for it, or opens it on this
  // thread when no executor thread has started it. nullopt otherwise (the one ahead is dropped).
  std::optional<Expected<BatchReader>> take(const std::string& path);
  // Drops the chunk ahead (waits for it when it is being opened).
  void drop();
  // Lets go of a read chunk on an executor thread: when the reader held its last reference,
  // unmapping it (tens of microseconds for 8 MiB) is not the reader's wait. Elements still
  // alive keep it, as ever.
  void retire(BatchReader reader);
  // Whether a chunk is ahead (started and not taken or dropped).
  bool ahead() const;

private:
  void open(const snapshot::ChunkRef& chunk, uint64_t generation);

  std::unique_ptr<WorkQueue> queue_;
  mutable std::mutex mu_;
  std::condition_variable opened_;
  std::string path_;        // of the chunk ahead ("" = none)
  uint64_t generation_ = 0; // of the chunk ahead: an item of a dropped one stores nothing
  std::optional<Expected<BatchReader>> result_;
};

} // namespace conveyor::kernels
