// One executor per process for pipeline work (issue 11): the calls of every parallel `map` and
// the fills of every `prefetch`, of every job, run on one fixed set of threads sized from the
// machine, instead of a pool per map and a thread per prefetch (threads grew with jobs x maps).
//
// Each iterator submits to its own WorkQueue. The executor serves the queues that have work in
// turn, one item at a time (round-robin), so a job with a long backlog cannot hold the threads
// while another job's queue waits behind it.
//
// Waiting never deadlocks, and busy threads cannot starve an iterator: an iterator that needs
// a result runs its own queue's oldest pending item on the waiting thread (`run_one`,
// caller-runs) instead of waiting for a pool thread, and waits only for items already running.
// A running item waits the same way, only for what lies further up its own pipeline, so waits
// form chains that end, never cycles (with one pool thread or with all of them blocked in user
// functions, each iterator's own thread still makes progress).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor {

class WorkQueue;

class Executor {
public:
  // The process's executor: max(2, hardware threads) threads, started on first use and never
  // stopped (iterators may be destroyed during static destruction).
  static Executor& shared();

  explicit Executor(int threads);
  ~Executor(); // drops nothing: every queue must be gone (their destructors wait)
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  std::unique_ptr<WorkQueue> make_queue();
  int threads() const { return static_cast<int>(threads_.size()); }

private:
  friend class WorkQueue;
  void work();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<WorkQueue*> ready_; // queues with pending items, served in turn
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// One iterator's FIFO of work on an Executor. Not copyable; destroying it drops what has not
// started and waits for what is running.
class WorkQueue {
public:
  explicit WorkQueue(Executor& executor) : ex_(executor) {}
  ~WorkQueue() { cancel_and_wait(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void submit(std::function<void()> item);
  // Runs this queue's oldest pending item on the calling thread; false when none is pending
  // (all submitted items are running or done).
  bool run_one();
  // Drops the pending items and waits until the running ones returned.
  void cancel_and_wait();

private:
  friend class Executor;
  Executor& ex_;
  // Guarded by ex_.mu_.
  std::deque<std::function<void()>> pending_;
  bool in_ready_ = false;
  int running_ = 0;
  std::condition_variable idle_;
};

} // namespace conveyor
