// A pipeline's stop flag (IteratorContext::stop): set from another thread when the task that runs
// the pipeline stops (its job ended, the worker shuts down). A kernel that can loop for long
// without returning an element (filling a batch or a shuffle buffer, a filter scanning, skip, a
// source generating, flat_map/interleave opening datasets, between user-function calls) checks it
// at every turn and returns `cancelled`; otherwise a released job such as
// range(2**63-1).batch(2**63-1) keeps the worker's thread busy until the OOM killer ends it.
// Checking costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class StopCheck {
public:
  StopCheck() = default;
  explicit StopCheck(const std::atomic<bool>* flag) : flag_(flag) {}

  bool stopped() const { return flag_ != nullptr && flag_->load(std::memory_order_relaxed); }
  // OK, or `cancelled` naming `op` (the final error of a stopped pipeline).
  Status check(const char* op) const { return stopped() ? stopped_status(op) : Status::OK(); }
  const std::atomic<bool>* flag() const { return flag_; }

  static Status stopped_status(const std::string& op) {
    return Status{ErrorCode::cancelled,
                  "`" + op +
                    "` stopped: its pipeline was cancelled (the task stopped, e.g. its job ended)"};
  }

private:
  const std::atomic<bool>* flag_ = nullptr; // null: never stopped
};

} // namespace conveyor
