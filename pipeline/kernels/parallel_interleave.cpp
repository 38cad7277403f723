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
  Slot(IteratorPtr it, Element in, int64_t index)
    : iterator(std::move(it)), arg(std::move(in)), arg_index(index) {}
  IteratorPtr iterator; // used by one thread at a time: its fetch, or none
  Element arg;          // the input element `iterator` was made from (a checkpoint makes it again)
  int64_t arg_index;
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

  // After the fetches in flight finish: each open slot's input element, its block read ahead but
  // not handed out (elements, error, end) and its inner iterator's state, then the input's.
  Status save(IteratorStateWriter& out) override {
    wait_all();
    out.put_tag("parallel interleave");
    out.put_int(static_cast<int64_t>(cycle_index_));
    out.put_int(block_index_);
    out.put_int(next_input_index_);
    out.put_bool(end_of_input_);
    for (const std::shared_ptr<Slot>& slot : cycle_) {
      out.put_bool(slot != nullptr);
      if (!slot)
        continue;
      out.put_element(slot->arg);
      out.put_int(slot->arg_index);
      out.put_bool(slot->ready);
      if (slot->ready) {
        const Block& block = slot->block;
        out.put_elements(std::vector<Element>(
          block.elements.begin() + static_cast<std::ptrdiff_t>(slot->next), block.elements.end()));
        out.put_status(block.status);
        out.put_bool(block.end);
      }
      CONVEYOR_RETURN_IF_ERROR(slot->iterator->save(out));
    }
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    wait_all();
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("parallel interleave"));
    const int64_t cycle_index = in.get_int();
    block_index_ = in.get_int();
    next_input_index_ = in.get_int();
    end_of_input_ = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    CONVEYOR_RETURN_IF_ERROR(check_cycle_slot(cycle_index, cycle_.size()));
    cycle_index_ = static_cast<std::size_t>(cycle_index);
    num_open_ = 0;
    for (std::shared_ptr<Slot>& slot : cycle_) {
      slot.reset();
      if (!in.get_bool())
        continue;
      Element arg = in.get_element();
      const int64_t arg_index = in.get_int();
      const bool ready = in.get_bool();
      Block block;
      if (ready) {
        block.elements = in.get_elements();
        block.status = in.get_status();
        block.end = in.get_bool();
      }
      CONVEYOR_RETURN_IF_ERROR(in.status());
      auto inner = fn_.make_iterator(arg, arg_index);
      if (!inner.ok())
        return inner.status();
      slot = std::make_shared<Slot>(std::move(*inner), std::move(arg), arg_index);
      slot->ready = ready;
      slot->block = std::move(block);
      ++num_open_;
      CONVEYOR_RETURN_IF_ERROR(slot->iterator->restore(in));
    }
    return input_->restore(in);
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
    const int64_t index = next_input_index_++;
    auto inner = fn_.make_iterator(in, index);
    if (!inner.ok())
      return inner.status();
    cycle_[cycle_index_] = std::make_shared<Slot>(std::move(*inner), std::move(in), index);
    ++num_open_;
    return Status::OK();
  }

  // Until no fetch is in flight (running queued ones here): a checkpoint is taken with every
  // inner iterator idle.
  void wait_all() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(shared_->mu);
        if (shared_->in_flight == 0)
          return;
      }
      if (queue_ && queue_->run_one())
        continue;
      std::unique_lock<std::mutex> lock(shared_->mu);
      if (shared_->in_flight == 0)
        return;
      shared_->consumer_waiting = true;
      shared_->finished.wait(lock);
      shared_->consumer_waiting = false;
    }
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
