// A job's memory budget on a worker (`conveyor worker --job-memory-limit`): the buffering ops
// (shuffle buffers, batches being filled, prefetch buffers, memory caches) and the task's own
// output buffer charge the bytes they hold; a charge that would pass the limit fails with
// resource_exhausted naming the op, the budget and what is in use, and the job fails with that
// error at its consumers. Thread-safe (prefetch threads charge too).
//
// Rules that keep the budget close to the process's RSS (within 2x for every element shape):
// - An element is charged at its footprint (memory_footprint): the Element and Tensor objects,
//   their heap blocks with malloc's overhead, and the storage — not just the payload bytes (an
//   int64 scalar holds ~200 bytes, not 8).
// - A container of elements charges its slots as it grows (reserve_one_more), before growing.
// - A large allocation whose size is known before it is made (a batch being stacked or padded,
//   `bytes(size=N)`) is checked first (check_allocation): it fails before it is built.
// - A job's budget may have a parent, the worker's budget for all jobs together
//   (`conveyor worker --memory-limit`): every charge counts against both.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

class MemoryBudget {
public:
  // `limit` 0 = unbounded (only the parent's limit, if any, holds). `flag` names the option that
  // set the limit and `whose` the holder, for the error messages.
  explicit MemoryBudget(int64_t limit, MemoryBudget* parent = nullptr,
                        std::string flag = "--job-memory-limit", std::string whose = "the job's")
    : limit_(limit), parent_(parent), flag_(std::move(flag)), whose_(std::move(whose)) {}

  // Adds `bytes` (here and in the parent), or leaves the use unchanged and returns
  // resource_exhausted.
  Status charge(int64_t bytes, const std::string& op);
  void release(int64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr)
      parent_->release(bytes);
  }
  // Whether `bytes` more would fit now (here and in the parent); charges nothing: for an
  // allocation about to be made whose result its holder charges afterwards.
  Status check(int64_t bytes, const std::string& op) const;
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }
  MemoryBudget* parent() const { return parent_; }

private:
  Status exhausted(int64_t bytes, int64_t before, const std::string& op) const;

  int64_t limit_;
  MemoryBudget* parent_; // outlives this budget
  std::string flag_;
  std::string whose_;
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
  const std::string& op() const { return op_; }

private:
  MemoryBudget* budget_;
  std::string op_;
  int64_t held_ = 0;
};

// Bytes of heap `e` holds beyond the Element object itself: its tensor array, each tensor's
// shape and storage, each block with malloc's header and rounding. Shared storage (a slice, a
// cached copy) is counted for every holder: an overestimate, never an underestimate.
int64_t element_heap_bytes(const Element& e);
// The Element object plus its heap: what holding one more element costs.
inline int64_t memory_footprint(const Element& e) {
  return static_cast<int64_t>(sizeof(Element)) + element_heap_bytes(e);
}
// What malloc takes for a block of `n` bytes (glibc: an 8-byte header, 16-byte rounding,
// 32 bytes at least); 0 for none.
int64_t malloc_block_bytes(std::size_t n);

// Makes room in `v` for one more element: when it is full, charges the new slots (the
// capacity doubles, as push_back would grow it) before growing it. Elements' own heap is
// charged by the caller (element_heap_bytes).
template <class T>
Status reserve_one_more(std::vector<T>& v, MemoryCharge& charge) {
  if (v.size() < v.capacity())
    return Status::OK();
  const std::size_t grown = v.capacity() < 16 ? 16 : v.capacity() * 2;
  CONVEYOR_RETURN_IF_ERROR(charge.add(static_cast<int64_t>((grown - v.capacity()) * sizeof(T))));
  v.reserve(grown);
  return Status::OK();
}

// The budget of the pipeline whose code runs on this thread, while a scope is alive: the map
// kernel sets it around each user-function call and batch/padded_batch around combining, so
// that code about to make a large allocation can ask check_allocation first.
class FunctionMemoryScope {
public:
  explicit FunctionMemoryScope(MemoryBudget* budget);
  ~FunctionMemoryScope();
  FunctionMemoryScope(const FunctionMemoryScope&) = delete;
  FunctionMemoryScope& operator=(const FunctionMemoryScope&) = delete;

private:
  MemoryBudget* previous_;
};

// OK, or resource_exhausted when `bytes` more would pass the budget of the pipeline running on
// this thread (none: OK). Call before allocating something large (`op` names who allocates);
// nothing is charged — whoever holds the result charges it.
Status check_allocation(int64_t bytes, const std::string& op);

} // namespace conveyor
