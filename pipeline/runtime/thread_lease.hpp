// A resource a thread keeps across consecutive calls into user code instead of taking it per
// call: the Python GIL (python/src/trainer_pipeline.cpp), whose hand-off between two threads
// costs a context switch per call. The kernels that wait for other threads' work (a prefetch's
// consumer for its fill, a parallel map for its calls, their destructors) give the lease back
// first, since that work may need it; a prefetch fill is a CallRun, so a lease its calls adopt
// is given back when the fill returns its thread to the executor. Without a lease (workers)
// each of these is one thread-local load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class ThreadLease {
public:
  virtual ~ThreadLease() = default;
  virtual void take() = 0;      // before a call that needs the resource; idempotent
  virtual void give_back() = 0; // before a wait; idempotent
  // Between the slices of a wait, with no kernel lock held: an error ends the wait, and the
  // waiting get_next returns it (Ctrl-C on Python's main thread).
  virtual Status check() { return Status::OK(); }
  // How long a wait sleeps between check()s; zero: no checks.
  virtual std::chrono::milliseconds check_interval() const { return std::chrono::milliseconds{0}; }
};

// This thread's lease; null when none.
ThreadLease* thread_lease();

// Makes `lease` this thread's lease while the scope lives (the previous one after).
class LeaseScope {
public:
  explicit LeaseScope(ThreadLease* lease);
  ~LeaseScope();
  LeaseScope(const LeaseScope&) = delete;
  LeaseScope& operator=(const LeaseScope&) = delete;

private:
  ThreadLease* previous_;
};

// A run of calls an op makes on a borrowed executor thread (a prefetch fill). Runs nest; the
// outermost one's end gives back and removes a lease adopted during it.
class CallRun {
public:
  CallRun();
  ~CallRun();
  CallRun(const CallRun&) = delete;
  CallRun& operator=(const CallRun&) = delete;

  // Makes `lease` this thread's lease until the outermost open run ends; false (nothing done)
  // when no run is open or the thread has a lease already.
  static bool adopt(ThreadLease* lease);
};

// Before a wait for other threads' work: gives back this thread's lease, if any.
void give_back_lease();

// cv.wait(lock, ready) after giving back this thread's lease; when the lease checks, wakes every
// check_interval() to call check() with `lock` released, and returns its error.
template <class Ready>
Status wait_giving_back(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                        Ready ready) {
  ThreadLease* lease = thread_lease();
  if (lease == nullptr) {
    cv.wait(lock, ready);
    return Status::OK();
  }
  for (;;) {
    lease->give_back();
    const auto interval = lease->check_interval();
    if (interval.count() <= 0) {
      cv.wait(lock, ready);
      return Status::OK();
    }
    if (cv.wait_for(lock, interval, ready))
      return Status::OK();
    lock.unlock();
    Status st = lease->check();
    lock.lock();
    if (!st.ok()) // returned even when ready() now: the check's error is not dropped
      return st;
  }
}

} // namespace conveyor
