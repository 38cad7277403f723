// One executor per process for pipeline work (issue 11): the calls of every parallel `map` and
// the fills of every `prefetch`, of every job, run on one fixed set of threads sized from the
// machine, instead of a pool per map and a thread per prefetch (threads grew with jobs x maps).
//
// Each iterator submits to its own WorkQueue. The executor serves the queues that have work in
// turn, one item at a time (round-robin), so a job with a long backlog cannot hold the threads
// while another job's queue waits behind it.
//
// Task actors run here too (worker/executor_scheduled.hpp: every message a task handles, its
// pipeline steps included, is an item posted with `post`), so a node's pipeline work runs on
// these threads whatever the number of jobs, tasks and maps.
//
// A blocked or slow user function cannot starve the others: while items wait and no thread
// started one for `kStall` (each is inside a long item), a supervisor adds a thread if one of them
// is blocked (it slept through the window: a sleep, a slow file system, a deadlock in user code)
// and none waited long for a core, or, when all compute, once each did for `kLongItems` of CPU
// time (slow functions then share the cores with the rest, as a thread per task did); up to
// max_threads (pipeline/runtime/stall_rule.hpp). A thread that only waits for a core, on a loaded
// machine, is neither: taken for a blocked one, it grew the pool until the OS scheduler, not the
// tenants' weights, decided who ran (issue 38). A thread beyond the base count leaves after
// `kIdleExit` without work, or after an item once kIdleExit passed since an extra last came or
// left (one at a time: a saturated executor keeps no extras its stall no longer needs). Short
// items keep the base count (a thread frees up within kStall), and so do CPU-bound ones shorter
// than kLongItems.
//
// Across tenants (issue 38) the threads go by weight: every group belongs to a tenant (a job's
// DistributeOptions::tenant and tenant_weight; "default", 1 otherwise) and the choice below is
// made first between tenants by thread time per unit of weight, then between the tenant's groups
// (pipeline/runtime/fair_share.hpp). With one tenant it is the per-job rule that follows.
//
// Fairness is per job, in thread time: every queue and posted item belongs to a group
// (ExecutorGroup: a task makes one for its job, and its pipeline's maps and prefetches and its own
// actor use it). Each group counts the time its items have held a thread, running ones included.
// The threads serve the groups with work in turn, skipping a group that is more than `kLead`
// ahead of the least served one until the others catch up: a job whose elements take ten times
// longer gets the same share of the threads, not ten times as much (in plain turns it did), and
// one whose items block keeps being charged while they block. A group that had no work comes back
// at most `kLead` behind the others (no credit saved up while idle). Within a group its queues and
// posted items take turns, so a job's share does not grow with its number of maps or parallel
// calls. A queue made without a group is a group of its own.
//
// Waiting never deadlocks, and busy threads cannot starve an iterator: an iterator that needs
// a result runs its own queue's oldest pending item on the waiting thread (`run_one`,
// caller-runs) instead of waiting for a pool thread, and waits only for items already running.
// A running item waits the same way, only for what lies further up its own pipeline, so waits
// form chains that end, never cycles (with one pool thread or with all of them blocked in user
// functions, each iterator's own thread still makes progress).
//
// Lazy items (WorkQueue::submit_lazy) are for work the iterator's own thread will run anyway: a
// Python pool call, whose result the iterator needs in order and whose request goes out with its
// process's other calls. No thread is woken for them (a thread woken to wait for the reply would
// then wake the iterator: a hand-over per element). They still never deadlock: a thread about to
// wait for other threads' work hands every lazy item to the threads first (publish_lazy: what it
// waits for may be behind one, e.g. a pool call of another map read on the same thread), and the
// supervisor hands over a lazy queue none of whose items ran for kStall.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "pipeline/runtime/fair_share.hpp"
#include "pipeline/runtime/stall_rule.hpp"

namespace conveyor {

class WorkQueue;

// A job's share of an Executor (see above). Opaque; shared by the job's queues and its actor.
class ExecutorGroup {
private:
  friend class Executor;
  friend class WorkQueue;
  // Guarded by the executor's mutex.
  std::deque<WorkQueue*> ready;             // its queues with pending items, in turn
  std::deque<std::function<void()>> posted; // items posted to it, in order
  bool in_ready = false;                    // listed in Executor::ready_
  bool posted_turn = false;                 // its next turn goes to a posted item
  ThreadTime time;                          // ns of the executor's clock
  std::shared_ptr<ShareTenant> tenant;      // never null; its time includes this group's
};

// What a tenant's groups have held of an executor's threads so far (running items included).
struct TenantUsage {
  std::string tenant;
  int64_t weight = 1;
  double thread_seconds = 0;
};

class Executor {
public:
  static constexpr std::chrono::milliseconds kStall{20};
  static constexpr std::chrono::milliseconds kLongItems{200};
  static constexpr std::chrono::milliseconds kIdleExit{2000};
  // How far a group's thread time may run ahead of the least served group's (see above). Within
  // it groups take plain turns, so items of a few microseconds alternate as before.
  static constexpr std::chrono::milliseconds kLead{5};

  // The process's executor: max(2, hardware threads) threads (up to 8 times as many while
  // items block), started on first use and never stopped (iterators may be destroyed during
  // static destruction).
  static Executor& shared();

  // max_threads 0: max(64, 8 * threads).
  explicit Executor(int threads, int max_threads = 0);
  ~Executor(); // drops nothing: every queue must be gone (their destructors wait)
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // A group of `tenant` (made on first use; a later weight replaces the earlier one). `weight`
  // must be >= 1 (std::invalid_argument otherwise).
  std::shared_ptr<ExecutorGroup> make_group(const std::string& tenant = "default",
                                            int64_t weight = 1);
  // A queue in `group` (null: a group of its own).
  std::unique_ptr<WorkQueue> make_queue(std::shared_ptr<ExecutorGroup> group = nullptr);
  // Runs `item` on a pool thread, in `group`'s turn (null: a group shared by such posts). It
  // must not wait for items posted after it.
  void post(std::function<void()> item, const std::shared_ptr<ExecutorGroup>& group = nullptr);
  int threads() const; // running now: the base count plus those added while items blocked
  int base_threads() const { return base_; }
  // Every tenant that had a group here, by name.
  std::vector<TenantUsage> tenant_usage() const;
  // Hands every queue's lazy items (WorkQueue::submit_lazy) to the threads. Called by a thread
  // about to wait for work on other threads, which may lie behind them.
  void publish_lazy();

private:
  friend class WorkQueue;
  struct Thread; // a pool thread and its TID (for the supervisor's look at its scheduling)
  void work(bool extra);
  void supervise();
  void add_thread_locked();
  void make_ready_locked(const std::shared_ptr<ExecutorGroup>& group);
  // Takes the next group to serve off ready_: the first in turn within kLead of the least served.
  std::shared_ptr<ExecutorGroup> take_next_group_locked(int64_t now);
  void unready_if_idle_locked(ExecutorGroup* group); // takes it off ready_ when it has no work
  void leave_ready_locked(ExecutorGroup* group);     // it left ready_ (no work): its tenant knows
  // Work became ready: wakes an idle thread, or the supervisor when none is idle (it watches
  // for a stall).
  void wake_for_work_locked();
  void publish_stuck_lazy_locked();
  // Of every thread, base then extras. Only the supervisor calls it (and it alone changes the
  // thread lists while the executor runs), without the lock.
  std::vector<ThreadUse> thread_uses();

  const int base_;
  const int max_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable stalled_; // wakes the supervisor: items wait and no thread is idle
  // The supervisor's kStall window sleeps here, woken only to stop: the stalled_ notices of every
  // item started while others wait (each Python pool call, issue 34) woke it once per item.
  std::condition_variable window_;
  std::deque<std::shared_ptr<ExecutorGroup>> ready_; // groups with work, served in turn
  bool stopping_ = false;
  int live_ = 0;           // threads running work()
  int idle_ = 0;           // of which waiting for an item
  uint64_t started_ = 0;   // items started so far (the supervisor's sign of progress)
  int64_t changed_at_ = 0; // now_ns() when an extra last came or left
  FairShare shares_;
  std::map<std::string, std::shared_ptr<ShareTenant>> tenants_;
  std::vector<std::unique_ptr<Thread>> threads_; // the base threads
  std::vector<std::unique_ptr<Thread>> extras_;  // added while items blocked
  std::vector<std::thread::id> exited_;          // extras that left, to join
  std::thread supervisor_;
  std::shared_ptr<ExecutorGroup> posted_; // post() without a group
  std::vector<WorkQueue*> lazy_;          // queues with lazy pending items (not handed over)
};

// One iterator's FIFO of work on an Executor. Not copyable; destroying it drops what has not
// started and waits for what is running.
class WorkQueue {
public:
  WorkQueue(Executor& executor, std::shared_ptr<ExecutorGroup> group)
    : ex_(executor), group_(std::move(group)) {}
  ~WorkQueue() { cancel_and_wait(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void submit(std::function<void()> item);
  // The same, but no thread is woken for it: the iterator that needs it next runs it with
  // run_one (a Python pool call: a thread woken to wait for its reply would then wake the
  // iterator, a hand-over per element). Lazy items go to the threads, as submit's, when a
  // thread is about to wait for other threads' work (Executor::publish_lazy: they may be what
  // it waits for), when this queue is submitted to, or when none of its items ran for kStall
  // (the supervisor); each hands over the items pending then, not those submitted after.
  void submit_lazy(std::function<void()> item);
  // Runs this queue's oldest pending item on the calling thread; false when none is pending
  // (all submitted items are running or done). Not charged to the group's thread time: the
  // caller is inside an item of its own (a task's step waiting for its map) that already is.
  bool run_one();
  // Drops the pending items (destroyed first, oldest first: a dropped item may finish in its
  // destructor what a running one waits for) and waits until the running ones returned.
  void cancel_and_wait();

private:
  friend class Executor;
  // Under ex_.mu_: see the .cpp.
  // `listed`: it is in ex_.lazy_ (lazy() before the item that made it ready was added).
  void make_ready_locked(bool listed);
  void unlist_lazy_locked();                      // takes it off ex_.lazy_
  bool in_ready() const { return runnable_ > 0; } // in its group's ready list (has a turn)
  bool lazy() const { return runnable_ < pending_.size(); } // in ex_.lazy_: lazy items pending
  Executor& ex_;
  const std::shared_ptr<ExecutorGroup> group_;
  // Guarded by ex_.mu_.
  std::deque<std::function<void()>> pending_;
  // The first runnable_ pending items are the threads' (queued by submit, or lazy ones handed
  // over); the rest are lazy (submit_lazy), run only by run_one until handed over: a hand-over
  // (publish_lazy, the supervisor) is of the items pending then, not of those submitted after.
  std::size_t runnable_ = 0;
  uint64_t runs_ = 0;      // items started (the supervisor's sign that a lazy queue moves)
  uint64_t lazy_seen_ = 0; // runs_ when the supervisor last looked
  int running_ = 0;
  std::condition_variable idle_;
};

} // namespace conveyor
