// prefetch(buffer_size): a background thread pulls the input into a bounded buffer ahead of the
// consumer. Results (elements, errors, end) come out in input order. When the input says
// `unavailable`, the thread queues that status and pauses until the consumer has received it and
// asks again, so the retry happens on the consumer's schedule, not in a busy loop.
#include <condition_variable>
#include <deque>
#include <thread>

#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

// buffer_size = AUTOTUNE.
constexpr int64_t kAutotuneBufferSize = 8;

class PrefetchIterator : public Iterator {
public:
  PrefetchIterator(IteratorPtr input, int64_t capacity) : input_(std::move(input)), capacity_(capacity) {}

  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable())
      thread_.join(); // waits for the input call in progress, if any
  }

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable())
      thread_ = std::thread([this] { produce(); });
    if (paused_ && buffer_.empty()) { // the consumer already got the `unavailable`: retry now
      paused_ = false;
      changed_.notify_all();
    }
    changed_.wait(lock, [this] { return !buffer_.empty(); });
    Entry entry = std::move(buffer_.front());
    if (entry.end) { // stays queued: later calls keep getting the end
      end_of_sequence = true;
      return Status::OK();
    }
    buffer_.pop_front();
    changed_.notify_all();
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
  };

  void produce() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [this] {
          return cancelled_ || (!paused_ && static_cast<int64_t>(buffer_.size()) < capacity_);
        });
        if (cancelled_)
          return;
      }
      Entry entry;
      bool end = false;
      entry.status = input_->get_next(entry.element, end); // only this thread touches input_
      entry.end = entry.status.ok() && end;
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = entry.status.code() == ErrorCode::unavailable;
      buffer_.push_back(std::move(entry));
      changed_.notify_all();
      if (buffer_.back().end)
        return;
    }
  }

  IteratorPtr input_;
  int64_t capacity_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Entry> buffer_;
  bool paused_ = false;    // an `unavailable` is queued or not yet retried
  bool cancelled_ = false;
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
  return IteratorPtr(std::make_unique<PrefetchIterator>(std::move(*input), buffer_size));
}

} // namespace conveyor::kernels
