#include "consumer/element_sink.hpp"

namespace conveyor::actors {

void QueueSink::job_details(const msg::job_info& info) {
  std::lock_guard<std::mutex> guard{mu_};
  info_ = info;
  info_.handle = nullptr; // (only the description is kept)
}

msg::job_info QueueSink::job_info() const {
  std::lock_guard<std::mutex> guard{mu_};
  return info_;
}

void QueueSink::joined(msg::job_id_t job) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    job_ = job;
  }
  cv_.notify_all();
}

Status QueueSink::wait_joined(std::chrono::milliseconds timeout, msg::job_id_t& job) {
  std::unique_lock<std::mutex> lock{mu_};
  if (!cv_.wait_for(lock, timeout, [this] { return job_.has_value() || finished_; }))
    return Status{ErrorCode::deadline_exceeded,
                  "joining the job took longer than " + std::to_string(timeout.count()) + " ms"};
  if (job_) {
    job = *job_;
    return Status::OK();
  }
  return final_;
}

Status QueueSink::push(ReadyElements&& elements, const msg::stream_stats& stats) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    queue_.append(std::move(elements));
    stats_ = stats;
  }
  cv_.notify_all();
  return Status::OK();
}

void QueueSink::splits_finished(const std::vector<std::pair<int64_t, int64_t>>& splits) {
  if (splits.empty())
    return;
  {
    std::lock_guard<std::mutex> guard{mu_};
    queue_.add_finished(splits);
  }
  cv_.notify_all();
}

void QueueSink::final_stats(const msg::stream_stats& stats) {
  std::lock_guard<std::mutex> guard{mu_};
  stats_ = stats;
}

void QueueSink::finish(Status status) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (finished_)
      return;
    finished_ = true;
    final_ = std::move(status);
  }
  cv_.notify_all();
}

void QueueSink::cancel() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    cancelled_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

QueueSink::Wait QueueSink::take_all(ReadyElements& out, std::chrono::milliseconds timeout,
                                    Status& status) {
  std::unique_lock<std::mutex> lock{mu_};
  cv_.wait_for(lock, timeout, [this] { return queue_.has_news() || finished_ || cancelled(); });
  if (cancelled()) {
    status = Status{ErrorCode::cancelled, "the stream was cancelled"};
    return Wait::error;
  }
  if (queue_.has_news()) {
    out.append(std::move(queue_)); // (leaves queue_ empty)
    return Wait::elements;
  }
  if (finished_) {
    status = final_;
    return final_.ok() ? Wait::end : Wait::error;
  }
  return Wait::timeout;
}

msg::stream_stats QueueSink::stats() const {
  std::lock_guard<std::mutex> guard{mu_};
  return stats_;
}

void QueueSink::task_slot(int64_t slot, int64_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  task_slots_.emplace(slot, base);
}

std::map<int64_t, int64_t> QueueSink::task_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return task_slots_;
}

void QueueSink::task_slot_end(int64_t slot, int64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  task_slot_ends_[slot] = end;
}

std::map<int64_t, int64_t> QueueSink::task_slot_ends() const {
  std::lock_guard<std::mutex> lock(mu_);
  return task_slot_ends_;
}

} // namespace conveyor::actors
