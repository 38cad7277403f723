// prefetch(buffer_size): a background thread pulls the input into a bounded buffer ahead of the
// consumer (double-buffered: while the consumer drains up to buffer_size taken entries, the thread
// fills up to buffer_size more). Results (elements, errors, end) come out in input order. When the
// input says `unavailable`, the thread queues that status and pauses until the consumer has
// received it and asks again, so the retry happens on the consumer's schedule, not in a busy loop.
// Buffered elements count against the job's memory budget from when the thread produced them
// until the consumer takes them; an element past the budget is queued as that error instead.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>

#include "pipeline/kernels/kernel.hpp"
#include "pipeline/memory_budget.hpp"

namespace conveyor::kernels {

namespace {

// buffer_size = AUTOTUNE.
constexpr int64_t kAutotuneBufferSize = 8;
constexpr int kSpinsBeforeSleep = 32;

class PrefetchIterator : public Iterator {
public:
  PrefetchIterator(IteratorPtr input, int64_t capacity, MemoryBudget* budget)
      : input_(std::move(input)), capacity_(capacity), budget_(budget) {}

  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    space_.notify_one();
    if (thread_.joinable())
      thread_.join(); // waits for the input call in progress, if any
    if (budget_ != nullptr) // what is still buffered goes back to the job's budget
      budget_->release(charged_.load(std::memory_order_relaxed));
  }

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (ready_.empty())
      take_buffer();
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

private:
  struct Entry {
    Status status;
    Element element;
    bool end = false;
    int64_t bytes = 0; // charged to the budget while buffered
  };

  // Waits for entries and moves all of them to ready_ at once (one lock and at most one wake-up
  // per buffer, not per element).
  void take_buffer() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable())
      thread_ = std::thread([this] { produce(); });
    if (paused_ && buffer_.empty()) { // the consumer already got the `unavailable`: retry now
      paused_ = false;
      space_.notify_one();
    }
    // A fast input refills within a few yields; sleeping at once would cost a context switch.
    for (int spins = 0; spins < kSpinsBeforeSleep && buffer_.empty() && !paused_; ++spins) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    if (buffer_.empty()) {
      consumer_waiting_ = true;
      filled_.wait(lock, [this] { return !buffer_.empty(); });
      consumer_waiting_ = false;
    }
    ready_.swap(buffer_);
    if (producer_waiting_)
      space_.notify_one();
  }

  void produce() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        producer_waiting_ = true;
        space_.wait(lock, [this] {
          return cancelled_ || (!paused_ && static_cast<int64_t>(buffer_.size()) < capacity_);
        });
        producer_waiting_ = false;
        if (cancelled_)
          return;
      }
      Entry entry;
      bool end = false;
      entry.status = input_->get_next(entry.element, end); // only this thread touches input_
      entry.end = entry.status.ok() && end;
      if (budget_ != nullptr && entry.status.ok() && !end) {
        const auto bytes = static_cast<int64_t>(entry.element.byte_size());
        entry.status = budget_->charge(bytes, "prefetch");
        if (entry.status.ok()) {
          entry.bytes = bytes;
          charged_.fetch_add(bytes, std::memory_order_relaxed);
        } else {
          entry.element = Element{};
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = entry.status.code() == ErrorCode::unavailable;
      buffer_.push_back(std::move(entry));
      if (consumer_waiting_)
        filled_.notify_one();
      if (buffer_.back().end)
        return;
    }
  }

  IteratorPtr input_;
  int64_t capacity_;
  MemoryBudget* budget_;                // null = no budget
  std::atomic<int64_t> charged_{0};     // what buffered entries hold of it
  std::mutex mu_;
  std::condition_variable filled_; // the consumer waits for an entry
  std::condition_variable space_;  // the producer waits for room (or a retry after `unavailable`)
  std::deque<Entry> buffer_; // filled by the producer
  std::deque<Entry> ready_;  // taken from buffer_, drained by the consumer without locking
  bool paused_ = false;    // an `unavailable` is queued or not yet retried
  bool cancelled_ = false;
  bool consumer_waiting_ = false; // notify only a thread that sleeps: wake-ups are the cost here
  bool producer_waiting_ = false;
  std::thread thread_;     // started by the first get_next
};

} // namespace

MakeResult make_prefetch(const NodePtr& node, const KernelContext& kctx) {
  int64_t buffer_size = node->int_attr("buffer_size");
  if (buffer_size == kAutotune)
    buffer_size = kAutotuneBufferSize;
  if (buffer_size < 0)
    return invalid_argument("`prefetch` argument `buffer_size` must be non-negative or AUTOTUNE, got " +
                            std::to_string(buffer_size));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  if (buffer_size == 0) // no buffer: nothing to prefetch
    return input;
  return IteratorPtr(std::make_unique<PrefetchIterator>(std::move(*input), buffer_size, kctx.memory()));
}

} // namespace conveyor::kernels
