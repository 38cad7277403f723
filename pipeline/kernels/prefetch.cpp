// prefetch(buffer_size): fills a bounded buffer from the input ahead of the consumer, as work on
// the process's executor (pipeline/runtime/executor.hpp): one fill at a time pulls the input until the
// buffer holds buffer_size entries, then gives its thread back; the consumer takes the whole
// buffer at once and schedules the next fill (double-buffered: while the consumer drains up to
// buffer_size taken entries, a fill produces up to buffer_size more). A consumer that finds the
// buffer empty with the fill still queued runs the fill itself (caller-runs): busy executor
// threads delay it, never stall it. Results (elements, errors, end) come out in input order.
// When the input says `unavailable`, fills pause until the consumer has received it and asks
// again, so the retry happens on the consumer's schedule, not in a busy loop. Buffered elements
// count against the job's memory budget from when they were produced until the consumer takes
// them; an element past the budget is queued as that error instead. A fill is a CallRun and the
// consumer's waits give back its thread's lease (pipeline/runtime/thread_lease.hpp): the Python
// trainer pipeline keeps the GIL across a fill's calls, and a wait may end with the lease's
// check() error (Ctrl-C), the buffer left as it was.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>

#include "pipeline/runtime/executor.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/runtime/memory_budget.hpp"
#include "pipeline/runtime/thread_lease.hpp"

namespace conveyor::kernels {

namespace {

// buffer_size = AUTOTUNE.
constexpr int64_t kAutotuneBufferSize = 8;
constexpr int kSpinsBeforeSleep = 32;

class PrefetchIterator : public Iterator {
public:
  PrefetchIterator(IteratorPtr input, int64_t capacity, MemoryBudget* budget,
                   std::shared_ptr<ExecutorGroup> group)
    : input_(std::move(input)), capacity_(capacity), budget_(budget),
      queue_(Executor::shared().make_queue(std::move(group))) {}

  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true; // a running fill stops after the input call in progress
    }
    give_back_lease();         // the running fill may need it to return
    queue_->cancel_and_wait(); // a queued fill is dropped; a running one has returned
    if (budget_ != nullptr)    // what is still buffered goes back to the job's budget
      budget_->release(charged_.load(std::memory_order_relaxed));
  }

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (ready_.empty())
      CONVEYOR_RETURN_IF_ERROR(take_buffer());
    if (ready_.front().end) { // stays queued: later calls keep getting the end
      end_of_sequence = true;
      return Status::OK();
    }
    Entry entry = std::move(ready_.front());
    ready_.pop_front();
    if (entry.bytes > 0) {
      budget_->release(entry.bytes);
      charged_.fetch_sub(entry.bytes, std::memory_order_relaxed);
    }
    if (!entry.status.ok())
      return entry.status;
    out = std::move(entry.element);
    return Status::OK();
  }

  // Fills pause (the one running stops after its input call), so the buffered entries and the
  // input's state are taken with nothing in flight between them.
  Status save(IteratorStateWriter& out) override {
    std::unique_lock<std::mutex> lock(mu_);
    saving_ = true;
    consumer_waiting_ = true;
    filled_.wait(lock, [this] { return fill_ != Fill::running; });
    consumer_waiting_ = false;
    out.put_tag("prefetch");
    out.put_bool(paused_);
    out.put_bool(ended_);
    out.put_int(static_cast<int64_t>(ready_.size() + buffer_.size()));
    for (const auto* entries : {&ready_, &buffer_})
      for (const Entry& entry : *entries) {
        out.put_status(entry.status);
        out.put_bool(entry.end);
        if (entry.status.ok() && !entry.end)
          out.put_element(entry.element);
      }
    lock.unlock();
    Status st = input_->save(out); // no fill calls the input while saving_
    lock.lock();
    saving_ = false;
    return st;
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("prefetch"));
    paused_ = in.get_bool();
    ended_ = in.get_bool();
    const int64_t count = in.get_int();
    for (int64_t i = 0; i < count && in.status().ok(); ++i) {
      Entry entry;
      entry.status = in.get_status();
      entry.end = in.get_bool();
      if (entry.status.ok() && !entry.end) {
        entry.element = in.get_element();
        CONVEYOR_RETURN_IF_ERROR(charge(entry));
      }
      buffer_.push_back(std::move(entry));
    }
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  struct Entry {
    Status status;
    Element element;
    bool end = false;
    int64_t bytes = 0; // charged to the budget while buffered
  };
  enum class Fill { idle, queued, running };

  // Waits for entries and moves all of them to ready_ at once (one lock and at most one wake-up
  // per buffer, not per element), then schedules the next fill. An error: the lease's check
  // ended the wait (nothing taken, the fill goes on).
  Status take_buffer() {
    std::unique_lock<std::mutex> lock(mu_);
    if (paused_ && buffer_.empty()) // the consumer already got the `unavailable`: retry now
      paused_ = false;
    schedule_fill();
    // A fill running elsewhere with a fast input refills within a few yields; sleeping at once
    // would cost a context switch.
    for (int spins = 0; buffer_.empty(); ++spins) {
      if (fill_ == Fill::queued) { // not started: run it here rather than wait for a thread
        lock.unlock();
        queue_->run_one();
        lock.lock();
        continue;
      }
      if (spins < kSpinsBeforeSleep) {
        lock.unlock();
        give_back_lease(); // the running fill may need it
        std::this_thread::yield();
        lock.lock();
        continue;
      }
      consumer_waiting_ = true;
      // The running fill adds one.
      Status st = wait_giving_back(filled_, lock, [this] { return !buffer_.empty(); });
      consumer_waiting_ = false;
      if (!st.ok())
        return st;
    }
    ready_.swap(buffer_);
    schedule_fill();
    return Status::OK();
  }

  // Under mu_: queues a fill unless one is queued or running, the buffer is full, the input
  // ended, or an `unavailable` waits for the consumer.
  void schedule_fill() {
    if (fill_ != Fill::idle || paused_ || ended_ || cancelled_ || saving_ ||
        static_cast<int64_t>(buffer_.size()) >= capacity_)
      return;
    fill_ = Fill::queued;
    queue_->submit([this] { fill(); }); // the destructor drops or waits for it
  }

  // Pulls the input until the buffer is full (only one fill runs at a time: input_ is never
  // called concurrently).
  void fill() {
    CallRun run; // a lease its calls adopt is given back before the thread goes
    std::unique_lock<std::mutex> lock(mu_);
    fill_ = Fill::running;
    while (!cancelled_ && !saving_ && !paused_ && !ended_ &&
           static_cast<int64_t>(buffer_.size()) < capacity_) {
      lock.unlock();
      Entry entry = produce();
      lock.lock();
      paused_ = entry.status.code() == ErrorCode::unavailable;
      ended_ = entry.end;
      buffer_.push_back(std::move(entry));
      if (consumer_waiting_)
        filled_.notify_one();
    }
    fill_ = Fill::idle;
    if (consumer_waiting_) // a save waits for this fill to stop
      filled_.notify_one();
  }

  Entry produce() {
    Entry entry;
    bool end = false;
    entry.status = input_->get_next(entry.element, end);
    entry.end = entry.status.ok() && end;
    if (entry.status.ok() && !end)
      entry.status = charge(entry);
    return entry;
  }

  // An element entry's footprint against the job's budget; past it, the entry becomes that error.
  Status charge(Entry& entry) {
    if (budget_ == nullptr)
      return Status::OK();
    const int64_t bytes = static_cast<int64_t>(sizeof(Entry)) + element_heap_bytes(entry.element);
    Status st = budget_->charge(bytes, "prefetch");
    if (st.ok()) {
      entry.bytes = bytes;
      charged_.fetch_add(bytes, std::memory_order_relaxed);
    } else {
      entry.element = Element{};
    }
    return st;
  }

  IteratorPtr input_;
  int64_t capacity_;
  MemoryBudget* budget_;            // null = no budget
  std::atomic<int64_t> charged_{0}; // what buffered entries hold of it
  std::mutex mu_;
  std::condition_variable filled_; // the consumer waits for an entry
  std::deque<Entry> buffer_;       // filled by fills
  std::deque<Entry> ready_;        // taken from buffer_, drained by the consumer without locking
  Fill fill_ = Fill::idle;
  bool paused_ = false; // an `unavailable` is queued or not yet retried
  bool ended_ = false;  // the input's end is buffered: no more fills
  bool cancelled_ = false;
  bool saving_ = false;              // save() runs: no fill starts or goes on
  bool consumer_waiting_ = false;    // notify only a thread that sleeps: wake-ups are the cost here
  std::unique_ptr<WorkQueue> queue_; // last: destroyed first (after the destructor drained it)
};

} // namespace

MakeResult make_prefetch(const NodePtr& node, const KernelContext& kctx) {
  int64_t buffer_size = node->int_attr("buffer_size");
  if (buffer_size == kAutotune)
    buffer_size = kAutotuneBufferSize;
  if (buffer_size < 0)
    return invalid_argument(
      "`prefetch` argument `buffer_size` must be non-negative or AUTOTUNE, got " +
      std::to_string(buffer_size));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  if (buffer_size == 0) // no buffer: nothing to prefetch
    return input;
  return IteratorPtr(std::make_unique<PrefetchIterator>(std::move(*input), buffer_size,
                                                        kctx.memory(), kctx.executor_group()));
}

} // namespace conveyor::kernels
