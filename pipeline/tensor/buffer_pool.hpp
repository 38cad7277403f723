// A process-wide pool of large byte buffers for the bulk data path (net/bulk.hpp).
//
// Why: every fresh large allocation is new virtual memory, and the first touch of each 4 KiB page
// is a page fault (256 for a 1 MiB frame). On virtual machines a fault costs microseconds, and
// `conveyor bench service` spent most of its CPU time in them: the worker's frame buffer (encode)
// and the consumer's receive buffer were both fresh for every element. Buffers recycled through
// this pool are already mapped, so a steady stream allocates nothing new.
//
// Who uses it: the consumer's bulk client receives each frame into an acquire()d buffer, and
// pooled_storage() makes it the elements' storage, which returns to the pool when the last
// tensor sharing it is gone. On the worker, a frame views its tensors' storage (no buffer of
// its own) unless it is compressed: those are encoded into acquire()d buffers that the bulk
// writer release()s once written. TLS: a worker seals each frame into an acquire()d buffer, and
// the consumer reads each sealed record into one.
//
// Bounded: at most max_retained_bytes sit in the pool (the oldest go first); buffers below
// kMinPooledBytes are not pooled (malloc serves those without faults).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "conveyor/tensor.hpp"

namespace conveyor {

class BufferPool {
public:
  static constexpr std::size_t kMinPooledBytes = 64 << 10;
  static constexpr std::size_t kDefaultMaxRetainedBytes = std::size_t{128} << 20;

  explicit BufferPool(std::size_t max_retained_bytes = kDefaultMaxRetainedBytes)
    : max_retained_(max_retained_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The process's pool (never destroyed, so storage released during static destruction is safe).
  static BufferPool& global();

  // A buffer whose capacity is at least `n`: a pooled one whose capacity is in [n, 2n] (the
  // smallest such), or a new (empty) one. A pooled buffer keeps its size and old bytes: a caller
  // that will overwrite n bytes anyway asks `filled` and gets, where the pool has one, a buffer
  // already at least n long, so that growing it to n zero-fills nothing (CAF's read buffer
  // resize); others clear() it (free for chars), and get the shortest fitting one, which
  // leaves the long ones to filled callers (a process that both sends and receives frames).
  // Among equals, the one released last: it is the likeliest still in the CPU's caches.
  std::vector<char> acquire(std::size_t n, bool filled = false);
  // Keeps `buf` (size and bytes as they are) for a later acquire, or frees it when it is small
  // or does not fit.
  void release(std::vector<char>&& buf);

  struct Stats {
    int64_t hits = 0;   // acquire() served from the pool
    int64_t misses = 0; // acquire() allocated (n >= kMinPooledBytes)
    int64_t retained_bytes = 0;
    int64_t retained_buffers = 0;
  };
  Stats stats() const;

private:
  mutable std::mutex mu_;
  std::size_t max_retained_;
  std::size_t retained_ = 0;
  std::deque<std::vector<char>> free_; // oldest first
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// Storage owning `buf` (no copy) whose bytes go back to BufferPool::global() when the last
// reference is gone. `data` receives the bytes' address (valid while the owner lives).
StorageOwner pooled_storage(std::vector<char>&& buf, const char** data = nullptr);

} // namespace conveyor
