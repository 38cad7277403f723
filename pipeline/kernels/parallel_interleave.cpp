// interleave(fn, cycle_length, block_length, num_parallel_calls > 1, deterministic): see
// parallel_interleave.hpp. The consumer walks the cycle exactly as InterleaveIterator does; a
// slot's next block comes from a fetch queued on the executor (or run here when the caller has to
// wait: the oldest queued fetch first, as the parallel map does).
#include "pipeline/kernels/parallel_interleave.hpp"

#include <condition_variable>
#include <mutex>

#include "pipeline/runtime/executor.hpp"

namespace conveyor::kernels {

namespace {

// Up to `want` elements of one inner dataset; `status` (an error) or `end` stop it early.
struct Block {
  std::vector<Element> elements;
  Status status = Status::OK();
  bool end = false;
};

struct Slot {
  explicit Slot(IteratorPtr it) : iterator(std::move(it)) {}
  IteratorPtr iterator; // used by one thread at a time: its fetch, or none
  // Guarded by Shared::mu; `block` belongs to the fetch while in_flight, then to the consumer.
  bool in_flight = false;
  bool ready = false;
  Block block;
  std::size_t next = 0; // the consumer's place in `block`
};

struct Shared {
  std::mutex mu;
  std::condition_variable finished;
  int64_t in_flight = 0;
  bool consumer_waiting = false;
};

class ParallelInterleaveIterator : public Iterator {
public:
  ParallelInterleaveIterator(IteratorPtr input, DatasetFunction fn, int64_t cycle_length,
                             int64_t block_length, int64_t parallelism, bool deterministic,
                             std::shared_ptr<ExecutorGroup> group, StopCheck stop)
    : group_(std::move(group)), input_(std::move(input)), fn_(std::move(fn)),
      cycle_(static_cast<std::size_t>(cycle_length)), block_length_(block_length),
      parallelism_(parallelism), deterministic_(deterministic), stop_(stop),
      shared_(std::make_shared<Shared>()) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    while (!end_of_input_ || num_open_ > 0) {
      CONVEYOR_RETURN_IF_ERROR(stop_.check("interleave"));
      if (!cycle_[cycle_index_] && !end_of_input_) {
        CONVEYOR_RETURN_IF_ERROR(open_slot());
        continue;
      }
      if (!cycle_[cycle_index_]) {
        advance();
        continue;
      }
      if (!deterministic_ && block_index_ == 0 && !is_ready(*cycle_[cycle_index_]))
        move_to_a_ready_slot();
      read_ahead();
      const std::shared_ptr<Slot> slot = cycle_[cycle_index_];
      wait_ready(*slot);
      Block& block = slot->block;
      if (slot->next < block.elements.size()) {
        out = std::move(block.elements[slot->next++]);
        if (++block_index_ == block_length_) {
          release_block(*slot);
          advance();
        }
        return Status::OK();
      }
      // The block is used up short of block_length: its error, its dataset's end, or (after an
      // error earlier in this block) the rest is fetched next.
      const Status status = block.status;
      const bool end = block.end;
      release_block(*slot);
      if (!status.ok())
        return status; // the slot stays, as in the sequential interleave
      if (end) {
        cycle_[cycle_index_].reset();
        --num_open_;
        advance();
      }
    }
    end_of_sequence = true;
    return Status::OK();
  }

private:
  Status open_slot() {
    Element in;
    bool input_end = false;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(in, input_end));
    if (input_end) {
      end_of_input_ = true;
      return Status::OK();
    }
    auto inner = fn_.make_iterator(in, next_input_index_++);
    if (!inner.ok())
      return inner.status();
    cycle_[cycle_index_] = std::make_shared<Slot>(std::move(*inner));
    ++num_open_;
    return Status::OK();
  }

  void advance() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % cycle_.size();
  }

  bool is_ready(const Slot& slot) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return slot.ready;
  }

  void move_to_a_ready_slot() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (std::size_t k = 1; k < cycle_.size(); ++k) {
      const std::size_t i = (cycle_index_ + k) % cycle_.size();
      if (cycle_[i] && cycle_[i]->ready) {
        cycle_index_ = i;
        return;
      }
    }
  }

  // Fetches for the open slots in the order they will be read, up to `parallelism_` at once;
  // the slot being read always gets one (it must not wait behind read-ahead).
  void read_ahead() {
    for (std::size_t k = 0; k < cycle_.size(); ++k) {
      const std::size_t i = (cycle_index_ + k) % cycle_.size();
      const std::shared_ptr<Slot>& slot = cycle_[i];
      if (!slot)
        continue;
      std::unique_lock<std::mutex> lock(shared_->mu);
      if (slot->in_flight || slot->ready)
        continue;
      if (k > 0 && shared_->in_flight >= parallelism_)
        break;
      slot->in_flight = true;
      ++shared_->in_flight;
      lock.unlock();
      submit(slot, k == 0 ? block_length_ - block_index_ : block_length_);
    }
  }

  void submit(const std::shared_ptr<Slot>& slot, int64_t want) {
    if (!queue_)
      queue_ = Executor::shared().make_queue(group_);
    queue_->submit([slot, want, shared = shared_, stop = stop_]() {
      Block block;
      for (int64_t n = 0; n < want; ++n) {
        if (stop.stopped()) { // a stopped pipeline reads no further
          block.status = StopCheck::stopped_status("interleave");
          break;
        }
        Element e;
        bool end = false;
        block.status = slot->iterator->get_next(e, end);
        if (!block.status.ok())
          break;
        if (end) {
          block.end = true;
          break;
        }
        block.elements.push_back(std::move(e));
      }
      std::lock_guard<std::mutex> lock(shared->mu);
      slot->block = std::move(block);
      slot->next = 0;
      slot->ready = true;
      slot->in_flight = false;
      --shared->in_flight;
      if (shared->consumer_waiting)
        shared->finished.notify_one();
    });
  }

  // Until `slot`'s block is there; runs queued fetches here meanwhile (the oldest first).
  void wait_ready(Slot& slot) {
    for (;;) {
      if (is_ready(slot))
        return;
      if (queue_ && queue_->run_one())
        continue;
      std::unique_lock<std::mutex> lock(shared_->mu);
      if (slot.ready)
        return;
      shared_->consumer_waiting = true; // set with the check: no wake-up is missed
      shared_->finished.wait(lock);
      shared_->consumer_waiting = false;
    }
  }

  void release_block(Slot& slot) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    slot.ready = false;
    slot.block = Block{};
    slot.next = 0;
  }

  std::shared_ptr<ExecutorGroup> group_;
  IteratorPtr input_;
  DatasetFunction fn_;
  std::vector<std::shared_ptr<Slot>> cycle_;
  int64_t block_length_;
  int64_t parallelism_;
  bool deterministic_;
  StopCheck stop_;
  std::shared_ptr<Shared> shared_;
  std::size_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t num_open_ = 0;
  int64_t next_input_index_ = 0;
  bool end_of_input_ = false;
  std::unique_ptr<WorkQueue> queue_; // last: destroyed (drained) first
};

} // namespace

IteratorPtr make_parallel_interleave(IteratorPtr input, DatasetFunction fn, int64_t cycle_length,
                                     int64_t block_length, int64_t parallelism, bool deterministic,
                                     std::shared_ptr<ExecutorGroup> group, StopCheck stop) {
  return std::make_unique<ParallelInterleaveIterator>(std::move(input), std::move(fn), cycle_length,
                                                      block_length, parallelism, deterministic,
                                                      std::move(group), stop);
}

} // namespace conveyor::kernels
