// The GIL as a thread lease (pipeline/runtime/thread_lease.hpp) for the trainer-side pipeline
// (trainer_pipeline.cpp): a thread that runs Python callables keeps the GIL from one call to the
// next instead of handing it to another thread after each call (a context switch each way),
// and gives it up when the pipeline waits for another thread's work or the network, when a
// prefetch fill returns its thread to the executor, and after a call once it has held it for
// kMaxHold (so that other Python threads still get their turns).
//  - ConsumerGil: the thread in next(), which holds the GIL when next() starts: ops that run on
//    it (a sequential map without a prefetch after it, taking prefetched elements) need no
//    hand-off at all. Its waits check for signals every 100 ms (Ctrl-C).
//  - an executor thread's lease, adopted by the first call of a prefetch fill (CallRun::adopt),
//    so a fill's calls take the GIL once.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <functional>
#include <optional>

#include "pipeline/runtime/thread_lease.hpp"

namespace conveyor_python {

class GilLease : public conveyor::ThreadLease {
public:
  static constexpr std::chrono::microseconds kMaxHold{1000};
  // After a Python call: gives the GIL back once held for kMaxHold.
  void after_call();

protected:
  std::chrono::steady_clock::time_point taken_at_;
};

class ConsumerGil final : public GilLease {
public:
  // `on_signal`: the Status a pending signal's exception (set in Python, e.g. KeyboardInterrupt)
  // becomes; called with the GIL.
  explicit ConsumerGil(std::function<conveyor::Status()> on_signal);
  ~ConsumerGil() override; // takes the GIL back: the caller continues in Python
  void take() override;
  void give_back() override;
  conveyor::Status check() override;
  std::chrono::milliseconds check_interval() const override {
    return std::chrono::milliseconds{100};
  }
  // The error a check() returned (OK: none): the signal's exception, held by on_signal.
  const conveyor::Status& interruption() const { return interruption_; }

private:
  std::function<conveyor::Status()> on_signal_;
  PyThreadState* saved_ = nullptr; // while given back
  conveyor::Status interruption_;
};

// The GIL for one Python call on this thread: through its lease (kept after the call), an
// executor thread's lease adopted for the open CallRun, or else taken for this call only.
class GilForCall {
public:
  GilForCall();
  ~GilForCall();
  GilForCall(const GilForCall&) = delete;
  GilForCall& operator=(const GilForCall&) = delete;

private:
  GilLease* lease_ = nullptr;
  std::optional<pybind11::gil_scoped_acquire> acquire_;
};

} // namespace conveyor_python
