#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor {

namespace {
std::string mib(int64_t bytes) {
  return std::to_string(bytes / (1 << 20)) + "." + std::to_string((bytes % (1 << 20)) * 10 / (1 << 20)) +
         " MiB";
}
} // namespace

Status MemoryBudget::charge(int64_t bytes, const std::string& op) {
  int64_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
  int64_t now = before + bytes;
  if (limit_ > 0 && now > limit_) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return resource_exhausted("`" + op + "` needs " + std::to_string(bytes) +
                              " more bytes, beyond the job's memory budget of " + mib(limit_) +
                              " (" + mib(before) + " in use; worker flag --job-memory-limit)");
  }
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return Status::OK();
}

} // namespace conveyor
