#include "pipeline/kernels/chunk_read_ahead.hpp"

#include <utility>

namespace conveyor::kernels {

Status damaged_chunk(const snapshot::ChunkRef& chunk, const Status& why) {
  return data_loss("`load`: snapshot chunk " + chunk.path + " is damaged: " + why.message());
}

Expected<BatchReader> open_chunk_reader(const snapshot::ChunkRef& chunk) {
  auto data = snapshot::open_chunk(chunk);
  if (!data.ok())
    return data.status().with_context("`load`");
  auto reader = BatchReader::open(data->body, std::move(data->owner));
  if (!reader.ok())
    return damaged_chunk(chunk, reader.status());
  if (static_cast<int64_t>(reader->count()) != chunk.elements)
    return damaged_chunk(chunk,
                         data_loss("its batch holds " + std::to_string(reader->count()) +
                                   " elements, its header says " + std::to_string(chunk.elements)));
  return reader;
}

ChunkReadAhead::ChunkReadAhead(std::shared_ptr<ExecutorGroup> group)
  : queue_(Executor::shared().make_queue(std::move(group))) {}

ChunkReadAhead::~ChunkReadAhead() {
  queue_->cancel_and_wait(); // before the members a running open stores into go
}

void ChunkReadAhead::start(const snapshot::ChunkRef& chunk) {
  drop();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    path_ = chunk.path;
    generation = ++generation_;
  }
  queue_->submit([this, chunk, generation] { open(chunk, generation); });
}

void ChunkReadAhead::open(const snapshot::ChunkRef& chunk, uint64_t generation) {
  auto opened = open_chunk_reader(chunk);
  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_)
    return; // dropped meanwhile (its bytes go with `opened`)
  result_.emplace(std::move(opened));
  opened_.notify_all();
}

std::optional<Expected<BatchReader>> ChunkReadAhead::take(const std::string& path) {
  std::unique_lock<std::mutex> lock(mu_);
  if (path_.empty() || path_ != path) {
    lock.unlock();
    drop();
    return std::nullopt;
  }
  while (!result_) {
    lock.unlock();
    const bool ran_here = queue_->run_one(); // not started yet: open it on this thread
    lock.lock();
    if (!ran_here)
      opened_.wait(lock, [this] { return result_.has_value(); });
  }
  std::optional<Expected<BatchReader>> out = std::move(result_);
  result_.reset();
  path_.clear();
  return out;
}

void ChunkReadAhead::drop() {
  std::optional<Expected<BatchReader>> dropped; // its bytes released after the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (path_.empty())
      return;
    path_.clear();
    ++generation_;
    dropped.swap(result_);
  }
  queue_->cancel_and_wait();
}

void ChunkReadAhead::retire(BatchReader reader) {
  // Queued behind the open ahead (take() runs the oldest first, and goes on until its chunk is
  // open); dropped with it, on the dropping thread.
  queue_->submit([reader = std::move(reader)] {});
}

bool ChunkReadAhead::ahead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !path_.empty();
}

} // namespace conveyor::kernels
