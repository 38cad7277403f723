#include "gil_lease.hpp"

namespace conveyor_python {

namespace {

using Clock = std::chrono::steady_clock;

// An executor thread's lease: PyGILState_Ensure at the first call, Release at the run's end.
class ExecutorGil final : public GilLease {
public:
  void take() override {
    if (held_)
      return;
    state_ = PyGILState_Ensure();
    held_ = true;
    taken_at_ = Clock::now();
  }
  void give_back() override {
    if (!held_)
      return;
    held_ = false;
    PyGILState_Release(state_);
  }

private:
  bool held_ = false;
  PyGILState_STATE state_{};
};

ExecutorGil& executor_gil() {
  thread_local ExecutorGil lease;
  return lease;
}

} // namespace

void GilLease::after_call() {
  if (Clock::now() - taken_at_ >= kMaxHold)
    give_back();
}

ConsumerGil::ConsumerGil(std::function<conveyor::Status()> on_signal)
  : on_signal_(std::move(on_signal)) {
  taken_at_ = Clock::now();
}

ConsumerGil::~ConsumerGil() { take(); }

void ConsumerGil::take() {
  if (saved_ == nullptr)
    return;
  PyEval_RestoreThread(saved_);
  saved_ = nullptr;
  taken_at_ = Clock::now();
}

void ConsumerGil::give_back() {
  if (saved_ == nullptr)
    saved_ = PyEval_SaveThread();
}

conveyor::Status ConsumerGil::check() {
  take();
  if (PyErr_CheckSignals() == 0)
    return conveyor::Status::OK();
  interruption_ = on_signal_();
  return interruption_;
}

GilForCall::GilForCall() {
  conveyor::ThreadLease* lease = conveyor::thread_lease();
  if (lease == nullptr && conveyor::CallRun::adopt(&executor_gil()))
    lease = &executor_gil();
  // Only this module installs leases in a Python process; anything else takes the GIL per call.
  lease_ = dynamic_cast<GilLease*>(lease);
  if (lease_ != nullptr)
    lease_->take();
  else
    acquire_.emplace();
}

GilForCall::~GilForCall() {
  if (lease_ != nullptr)
    lease_->after_call();
}

} // namespace conveyor_python
