// A job's memory budget on a worker (`conveyor worker --job-memory-limit`): the buffering ops
// (shuffle buffers, batches being filled, prefetch buffers, memory caches) and the task's own
// output buffer charge the bytes they hold; a charge that would pass the limit fails with
// resource_exhausted naming the op, the budget and what is in use, and the job fails with that
// error at its consumers. Thread-safe (prefetch threads charge too).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class MemoryBudget {
public:
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}

  // Adds `bytes`, or leaves the use unchanged and returns resource_exhausted.
  Status charge(int64_t bytes, const std::string& op);
  void release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

private:
  int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> peak_{0};
};

// What one buffering iterator holds against the budget; released when it is destroyed (a
// released job's pipeline returns all it held). Null budget = counts nothing.
class MemoryCharge {
public:
  MemoryCharge(MemoryBudget* budget, std::string op) : budget_(budget), op_(std::move(op)) {}
  ~MemoryCharge() { reset(); }
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;

  Status add(int64_t bytes) {
    if (budget_ == nullptr || bytes <= 0)
      return Status::OK();
    CONVEYOR_RETURN_IF_ERROR(budget_->charge(bytes, op_));
    held_ += bytes;
    return Status::OK();
  }
  void remove(int64_t bytes) {
    if (budget_ == nullptr)
      return;
    bytes = bytes > held_ ? held_ : bytes;
    budget_->release(bytes);
    held_ -= bytes;
  }
  void reset() { remove(held_); }
  // Takes over what `other` holds (same budget): the bytes stay charged, now to this holder.
  void absorb(MemoryCharge& other) {
    held_ += other.held_;
    other.held_ = 0;
  }
  int64_t held() const { return held_; }
  MemoryBudget* budget() const { return budget_; }

private:
  MemoryBudget* budget_;
  std::string op_;
  int64_t held_ = 0;
};

} // namespace conveyor
