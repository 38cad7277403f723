#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor {

namespace {
std::string mib(int64_t bytes) {
  return std::to_string(bytes / (1 << 20)) + "." +
         std::to_string((bytes % (1 << 20)) * 10 / (1 << 20)) + " MiB";
}

// The budget FunctionMemoryScope set on this thread (null: none).
thread_local MemoryBudget* current_budget = nullptr;

// A std::shared_ptr<T> made by make_shared: control block and T in one block.
constexpr std::size_t kSharedBlockOverhead = 16;
} // namespace

Status MemoryBudget::exhausted(int64_t bytes, int64_t before, const std::string& op) const {
  return resource_exhausted("`" + op + "` needs " + std::to_string(bytes) + " more bytes, beyond " +
                            whose_ + " memory budget of " + mib(limit_) + " (" + mib(before) +
                            " in use; worker flag " + flag_ + ")");
}

Status MemoryBudget::charge(int64_t bytes, const std::string& op) {
  int64_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
  int64_t now = before + bytes;
  if (limit_ > 0 && now > limit_) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return exhausted(bytes, before, op);
  }
  if (parent_ != nullptr) {
    if (Status st = parent_->charge(bytes, op); !st.ok()) {
      used_.fetch_sub(bytes, std::memory_order_relaxed);
      return st;
    }
  }
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return Status::OK();
}

Status MemoryBudget::check(int64_t bytes, const std::string& op) const {
  const int64_t before = used();
  if (limit_ > 0 && bytes > limit_ - before)
    return exhausted(bytes, before, op);
  return parent_ != nullptr ? parent_->check(bytes, op) : Status::OK();
}

int64_t malloc_block_bytes(std::size_t n) {
  if (n == 0)
    return 0;
  const std::size_t block = (n + 8 + 15) / 16 * 16;
  return static_cast<int64_t>(block < 32 ? 32 : block);
}

int64_t element_heap_bytes(const Element& e) {
  int64_t n = malloc_block_bytes(e.components.capacity() * sizeof(Tensor));
  for (const Tensor& t : e.components) {
    n += malloc_block_bytes(t.shape().size() * sizeof(int64_t));
    if (t.dtype() == DType::string) {
      // A shared vector of std::string; each string longer than the small-string buffer (15
      // bytes) has a heap block of its own. A viewed string tensor holds views instead: about
      // as much.
      const auto count = static_cast<std::size_t>(t.num_elements());
      n += malloc_block_bytes(kSharedBlockOverhead + sizeof(std::vector<std::string>)) +
           malloc_block_bytes(count * sizeof(std::string));
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t len = t.string_at(static_cast<int64_t>(i)).size();
        if (len > 15)
          n += malloc_block_bytes(len + 1);
      }
    } else if (t.storage_owner() != nullptr) { // not inline: a shared byte vector (or a view)
      n += malloc_block_bytes(kSharedBlockOverhead + sizeof(std::vector<unsigned char>)) +
           malloc_block_bytes(t.byte_size());
    }
  }
  return n;
}

FunctionMemoryScope::FunctionMemoryScope(MemoryBudget* budget) : previous_(current_budget) {
  current_budget = budget;
}

FunctionMemoryScope::~FunctionMemoryScope() { current_budget = previous_; }

Status check_allocation(int64_t bytes, const std::string& op) {
  return current_budget != nullptr ? current_budget->check(bytes, op) : Status::OK();
}

} // namespace conveyor
