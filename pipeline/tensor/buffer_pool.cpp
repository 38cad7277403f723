#include "pipeline/tensor/buffer_pool.hpp"

#include <memory>
#include <utility>

namespace conveyor {

BufferPool& BufferPool::global() {
  static BufferPool* pool = new BufferPool(); // leaked on purpose: see the header
  return *pool;
}

std::vector<char> BufferPool::acquire(std::size_t n, bool filled) {
  std::vector<char> out;
  if (n >= kMinPooledBytes) {
    std::lock_guard lock(mu_);
    auto best = free_.end();
    // Ranks a fitting buffer: filled callers first want size >= n, then the smallest capacity.
    auto better = [&](const std::vector<char>& a, const std::vector<char>& b) {
      if (filled && (a.size() >= n) != (b.size() >= n))
        return a.size() >= n;
      if (!filled && a.size() != b.size()) // leave the long ones to filled callers
        return a.size() < b.size();
      return a.capacity() < b.capacity();
    };
    // Among equals the newest: the buffer released last is the likeliest still in the CPU's
    // caches, and the kernel's copy into a cold 1 MiB buffer costs twice a warm one's.
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const std::size_t cap = it->capacity();
      if (cap >= n && cap / 2 <= n && (best == free_.end() || !better(*best, *it)))
        best = it;
    }
    if (best != free_.end()) {
      ++hits_;
      retained_ -= best->capacity();
      out = std::move(*best);
      free_.erase(best);
      return out;
    }
    ++misses_;
  }
  out.reserve(n);
  return out;
}

void BufferPool::release(std::vector<char>&& buf) {
  const std::size_t cap = buf.capacity();
  if (cap < kMinPooledBytes || cap > max_retained_) {
    std::vector<char>{}.swap(buf);
    return;
  }
  std::vector<std::vector<char>> evicted; // freed outside the lock
  {
    std::lock_guard lock(mu_);
    while (retained_ + cap > max_retained_ && !free_.empty()) {
      retained_ -= free_.front().capacity();
      evicted.push_back(std::move(free_.front()));
      free_.pop_front();
    }
    retained_ += cap;
    free_.push_back(std::move(buf));
  }
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard lock(mu_);
  Stats s;
  s.hits = hits_;
  s.misses = misses_;
  s.retained_bytes = static_cast<int64_t>(retained_);
  s.retained_buffers = static_cast<int64_t>(free_.size());
  return s;
}

namespace {
struct ReturnToPool {
  void operator()(std::vector<char>* v) const {
    BufferPool::global().release(std::move(*v));
    delete v;
  }
};
} // namespace

StorageOwner pooled_storage(std::vector<char>&& buf, const char** data) {
  std::shared_ptr<std::vector<char>> owner(new std::vector<char>(std::move(buf)), ReturnToPool{});
  if (data)
    *data = owner->data();
  return owner;
}

} // namespace conveyor
