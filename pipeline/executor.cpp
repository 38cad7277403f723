#include "pipeline/executor.hpp"

#include <algorithm>

#include "pipeline/per_process.hpp"

namespace conveyor {

Executor& Executor::shared() {
  // Per process: a forked child (a PyTorch DataLoader worker) has none of the pool's threads.
  static PerProcess<Executor> executor;
  return executor.get([] {
    return new Executor(std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  });
}

Executor::Executor(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i)
    threads_.emplace_back([this] { work(); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    t.join();
}

std::unique_ptr<WorkQueue> Executor::make_queue() { return std::make_unique<WorkQueue>(*this); }

void Executor::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
    if (stopping_)
      return;
    WorkQueue* q = ready_.front();
    ready_.pop_front();
    auto item = std::move(q->pending_.front());
    q->pending_.pop_front();
    if (q->pending_.empty())
      q->in_ready_ = false;
    else
      ready_.push_back(q); // its next item waits for the other queues' turns
    ++q->running_;
    // submit() wakes a thread only when a queue becomes ready; more work behind this item
    // wakes the next thread here, so idle threads never sleep while work waits.
    const bool more = !ready_.empty();
    lock.unlock();
    if (more)
      wake_.notify_one();
    item();
    item = nullptr; // what it captured goes before the queue may go
    lock.lock();
    if (--q->running_ == 0)
      q->idle_.notify_all(); // under the lock: `q` is alive until this returns
  }
}

void WorkQueue::submit(std::function<void()> item) {
  {
    std::lock_guard<std::mutex> lock(ex_.mu_);
    pending_.push_back(std::move(item));
    if (in_ready_)
      return;
    in_ready_ = true;
    ex_.ready_.push_back(this);
  }
  ex_.wake_.notify_one();
}

bool WorkQueue::run_one() {
  std::function<void()> item;
  {
    std::lock_guard<std::mutex> lock(ex_.mu_);
    if (pending_.empty())
      return false;
    item = std::move(pending_.front());
    pending_.pop_front();
    if (pending_.empty() && in_ready_) {
      in_ready_ = false;
      ex_.ready_.erase(std::find(ex_.ready_.begin(), ex_.ready_.end(), this));
    }
    ++running_;
  }
  item();
  item = nullptr;
  std::lock_guard<std::mutex> lock(ex_.mu_);
  if (--running_ == 0)
    idle_.notify_all();
  return true;
}

void WorkQueue::cancel_and_wait() {
  std::deque<std::function<void()>> dropped; // destroyed after the lock is released
  std::unique_lock<std::mutex> lock(ex_.mu_);
  dropped.swap(pending_);
  if (in_ready_) {
    in_ready_ = false;
    ex_.ready_.erase(std::find(ex_.ready_.begin(), ex_.ready_.end(), this));
  }
  idle_.wait(lock, [this] { return running_ == 0; });
}

} // namespace conveyor
