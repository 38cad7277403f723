#include "pipeline/runtime/thread_lease.hpp"

namespace conveyor {

namespace {

thread_local ThreadLease* t_lease = nullptr;
thread_local int t_runs = 0;                   // CallRuns open on this thread
thread_local ThreadLease* t_adopted = nullptr; // adopted in the open runs

} // namespace

ThreadLease* thread_lease() { return t_lease; }

LeaseScope::LeaseScope(ThreadLease* lease) : previous_(t_lease) { t_lease = lease; }

LeaseScope::~LeaseScope() { t_lease = previous_; }

CallRun::CallRun() { ++t_runs; }

CallRun::~CallRun() {
  if (--t_runs > 0 || t_adopted == nullptr)
    return;
  t_adopted->give_back();
  if (t_lease == t_adopted)
    t_lease = nullptr;
  t_adopted = nullptr;
}

bool CallRun::adopt(ThreadLease* lease) {
  if (t_runs == 0 || t_lease != nullptr)
    return false;
  t_lease = t_adopted = lease;
  return true;
}

void give_back_lease() {
  if (t_lease != nullptr)
    t_lease->give_back();
}

} // namespace conveyor
