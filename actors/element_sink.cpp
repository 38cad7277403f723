#include "actors/element_sink.hpp"

namespace conveyor::actors {

void QueueSink::push(std::vector<Element>&& elements, const msg::stream_stats& stats) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    for (auto& e : elements)
      queue_.push_back(std::move(e));
    stats_ = stats;
  }
  cv_.notify_all();
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

QueueSink::Wait QueueSink::take_all(std::deque<Element>& out, std::chrono::milliseconds timeout,
                                    Status& status) {
  std::unique_lock<std::mutex> lock{mu_};
  cv_.wait_for(lock, timeout, [this] { return !queue_.empty() || finished_; });
  if (!queue_.empty()) {
    if (out.empty())
      out.swap(queue_);
    else
      for (auto& e : queue_)
        out.push_back(std::move(e));
    queue_.clear();
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

} // namespace conveyor::actors
