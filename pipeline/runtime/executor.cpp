#include "pipeline/runtime/executor.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "pipeline/runtime/per_process.hpp"
#include "pipeline/runtime/thread_name.hpp"
#include "pipeline/runtime/thread_use.hpp"

namespace conveyor {

namespace {

// Since the process's first call: ThreadTime::at multiplies it by the running items.
int64_t now_ns() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              origin)
    .count();
}

constexpr int64_t kLeadNs = std::chrono::nanoseconds(Executor::kLead).count();
constexpr int64_t kIdleExitNs = std::chrono::nanoseconds(Executor::kIdleExit).count();

} // namespace

struct Executor::Thread {
  std::thread thread;
  std::atomic<int> tid{0}; // set by the thread itself as it starts
};

Executor& Executor::shared() {
  // Per process: a forked child (a PyTorch DataLoader worker) has none of the pool's threads.
  static PerProcess<Executor> executor;
  return executor.get([] {
    return new Executor(std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  });
}

Executor::Executor(int threads, int max_threads)
  : base_(std::max(1, threads)), max_(max_threads > 0 ? std::max(max_threads, std::max(1, threads))
                                                      : std::max(64, 8 * std::max(1, threads))),
    shares_(kLeadNs) {
  posted_ = make_group();
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < base_; ++i) {
    ++live_;
    auto t = std::make_unique<Thread>();
    t->thread = std::thread([this, self = t.get()] {
      self->tid = this_thread_tid();
      work(false);
    });
    threads_.push_back(std::move(t));
  }
  supervisor_ = std::thread([this] { supervise(); });
}

Executor::~Executor() {
  std::vector<std::deque<std::function<void()>>> dropped; // posted items not started
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& g : ready_) {
      dropped.push_back(std::move(g->posted));
      g->posted.clear();
    }
  }
  wake_.notify_all();
  stalled_.notify_all();
  window_.notify_all();
  supervisor_.join();
  for (auto& t : threads_)
    t->thread.join();
  for (auto& t : extras_) // (those that left too: joinable until joined)
    t->thread.join();
}

std::shared_ptr<ExecutorGroup> Executor::make_group(const std::string& tenant, int64_t weight) {
  if (weight < 1)
    throw std::invalid_argument("tenant \"" + tenant + "\": the weight must be at least 1, got " +
                                std::to_string(weight));
  auto group = std::make_shared<ExecutorGroup>();
  std::lock_guard<std::mutex> lock(mu_);
  auto& t = tenants_[tenant];
  if (!t)
    t = std::make_shared<ShareTenant>(tenant, weight);
  t->weight = weight;
  group->tenant = t;
  return group;
}

std::vector<TenantUsage> Executor::tenant_usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = now_ns();
  std::vector<TenantUsage> out;
  for (const auto& [name, t] : tenants_)
    out.push_back(TenantUsage{name, t->weight, static_cast<double>(t->time.at(now)) / 1e9});
  return out;
}

std::unique_ptr<WorkQueue> Executor::make_queue(std::shared_ptr<ExecutorGroup> group) {
  return std::make_unique<WorkQueue>(*this, group ? std::move(group) : make_group());
}

void Executor::make_ready_locked(const std::shared_ptr<ExecutorGroup>& group) {
  if (group->in_ready)
    return;
  group->in_ready = true;
  // Back after a time without work: at most kLead behind the others (no saved-up credit).
  shares_.on_ready(group->time, *group->tenant, now_ns());
  ready_.push_back(group);
}

std::shared_ptr<ExecutorGroup> Executor::take_next_group_locked(int64_t now) {
  const auto i = shares_.pick(
    ready_, now,
    [](const std::shared_ptr<ExecutorGroup>& g) -> const ThreadTime& { return g->time; },
    [](const std::shared_ptr<ExecutorGroup>& g) -> ShareTenant& { return *g->tenant; });
  auto next = ready_.begin() + static_cast<std::ptrdiff_t>(i);
  std::shared_ptr<ExecutorGroup> g = std::move(*next);
  ready_.erase(next);
  return g;
}

void Executor::wake_for_work_locked() {
  if (idle_ == 0) // every thread busy: the supervisor watches for a stall
    stalled_.notify_one();
  else
    wake_.notify_one();
}

void Executor::leave_ready_locked(ExecutorGroup* group) {
  group->in_ready = false;
  shares_.on_unready(*group->tenant);
}

void Executor::unready_if_idle_locked(ExecutorGroup* group) {
  if (!group->in_ready || !group->ready.empty() || !group->posted.empty())
    return;
  leave_ready_locked(group);
  ready_.erase(
    std::find_if(ready_.begin(), ready_.end(),
                 [group](const std::shared_ptr<ExecutorGroup>& g) { return g.get() == group; }));
}

void Executor::post(std::function<void()> item, const std::shared_ptr<ExecutorGroup>& group) {
  const auto& g = group ? group : posted_;
  std::lock_guard<std::mutex> lock(mu_);
  g->posted.push_back(std::move(item));
  if (g->in_ready)
    return; // (a thread comes to it in its turn)
  make_ready_locked(g);
  wake_for_work_locked();
}

int Executor::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

void Executor::add_thread_locked() {
  ++live_;
  changed_at_ = now_ns();
  auto t = std::make_unique<Thread>();
  t->thread = std::thread([this, self = t.get()] {
    self->tid = this_thread_tid();
    work(true);
  });
  extras_.push_back(std::move(t));
}

std::vector<ThreadUse> Executor::thread_uses() {
  std::vector<ThreadUse> out;
  for (auto* list : {&threads_, &extras_})
    for (auto& t : *list) {
      const int tid = t->tid;
      out.push_back(thread_use(t->thread.native_handle(), tid));
      // Not started yet: it waits for a core to begin (a crowded machine), it is not blocked.
      if (tid == 0)
        out.back().runnable = true;
    }
  return out;
}

// Adds a thread while items wait, no thread is idle and none started an item for kStall, as
// StallRule decides: when one of them is blocked (it slept: a lock, slow I/O, a sleep in user
// code), or when they all computed for kLongItems of CPU time (a slow user function: without a
// thread more it would hold the other jobs' work for as long as it runs; the cores are then
// shared, as a thread per task shared them). A thread that only waited for a core (a loaded
// machine) is neither. Joins the extras that left.
void Executor::supervise() {
  name_this_thread("conveyor-watch");
  StallRule rule(std::chrono::nanoseconds(kLongItems).count());
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    stalled_.wait(
      lock, [this] { return stopping_ || (!ready_.empty() && idle_ == 0) || !lazy_.empty(); });
    if (stopping_)
      break;
    if (ready_.empty() || idle_ != 0) { // lazy items only: looked at every kStall
      window_.wait_for(lock, kStall, [this] { return stopping_; });
      publish_stuck_lazy_locked();
      continue;
    }
    // Joined before looking: a thread that left would look blocked (it uses nothing).
    for (auto id : exited_) {
      auto it = std::find_if(extras_.begin(), extras_.end(),
                             [id](const auto& t) { return t->thread.get_id() == id; });
      if (it != extras_.end()) {
        (*it)->thread.join(); // it has left work(): only its return remains
        extras_.erase(it);
      }
    }
    exited_.clear();
    const uint64_t seen = started_;
    lock.unlock(); // (the system calls need no lock: only this thread changes the thread lists)
    const auto before = thread_uses();
    const int64_t from = now_ns();
    lock.lock();
    window_.wait_for(lock, kStall, [this] { return stopping_; });
    if (stopping_)
      break;
    publish_stuck_lazy_locked();
    // (A thread that left meanwhile is joined in the next round; nothing is decided on it.)
    if (ready_.empty() || idle_ != 0 || started_ != seen || live_ >= max_ || !exited_.empty()) {
      rule.reset();
      continue;
    }
    const int64_t elapsed = now_ns() - from;
    lock.unlock();
    const auto after = thread_uses();
    lock.lock();
    if (ready_.empty() || idle_ != 0 || started_ != seen || !exited_.empty()) { // (it moved)
      rule.reset();
      continue;
    }
    if (rule.on_stalled(before, after, elapsed) != StallVerdict::none)
      add_thread_locked();
  }
}

void Executor::work(bool extra) {
  name_this_thread("conveyor-exec");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    bool timed_out = false;
    if (extra)
      timed_out = !wake_.wait_for(lock, kIdleExit, [this] { return stopping_ || !ready_.empty(); });
    else
      wake_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
    --idle_;
    if (stopping_ || (timed_out && live_ > base_)) {
      --live_;
      if (extra && !stopping_)
        exited_.push_back(std::this_thread::get_id());
      return;
    }
    if (ready_.empty())
      continue;
    // The next group's turn: a posted item or its next queue's item, alternately.
    const int64_t start = now_ns();
    std::shared_ptr<ExecutorGroup> g = take_next_group_locked(start);
    std::shared_ptr<ExecutorGroup> charged = g; // holds a thread from now until the item returns
    charged->time.start(start);
    charged->tenant->start(start);
    std::function<void()> item;
    WorkQueue* q = nullptr;
    const bool posted = !g->posted.empty() && (g->posted_turn || g->ready.empty());
    if (posted) {
      item = std::move(g->posted.front());
      g->posted.pop_front();
    } else {
      q = g->ready.front();
      g->ready.pop_front();
      item = std::move(q->pending_.front());
      q->pending_.pop_front();
      ++q->runs_;
      if (--q->runnable_ > 0)  // (0: it leaves the turns; the items left, if any, are lazy)
        g->ready.push_back(q); // its next item waits for the group's other queues
      ++q->running_;
    }
    g->posted_turn = !posted;
    if (!g->posted.empty() || !g->ready.empty())
      ready_.push_back(std::move(g)); // its next turn waits for the other groups'
    else
      leave_ready_locked(g.get());
    ++started_;
    // submit() wakes a thread only when a queue becomes ready; more work behind this item
    // wakes the next thread here, so idle threads never sleep while work waits.
    const bool more = !ready_.empty();
    const bool none_idle = idle_ == 0;
    lock.unlock();
    if (more)
      (none_idle ? stalled_ : wake_).notify_one();
    item();
    item = nullptr; // what it captured goes before the queue may go
    const int64_t end = now_ns();
    lock.lock();
    charged->time.finish(start, end);
    charged->tenant->finish(start, end);
    charged.reset(); // (may be the group's last reference: then it has no work left)
    if (q && --q->running_ == 0)
      q->idle_.notify_all(); // under the lock: `q` is alive until this returns
    // An extra whose stall has passed leaves even while work never runs out: kept, it would
    // hold a share of the cores that the weights no longer decide (the OS scheduler would).
    // One at a time: if a blocked item still needs it, the supervisor adds one again.
    if (extra && live_ > base_ && end - changed_at_ >= kIdleExitNs) {
      --live_;
      changed_at_ = end;
      exited_.push_back(std::this_thread::get_id());
      return;
    }
  }
}

void WorkQueue::submit(std::function<void()> item) {
  std::lock_guard<std::mutex> lock(ex_.mu_);
  const bool listed = lazy();
  pending_.push_back(std::move(item));
  make_ready_locked(listed);
}

void WorkQueue::submit_lazy(std::function<void()> item) {
  std::lock_guard<std::mutex> lock(ex_.mu_);
  const bool listed = lazy();
  pending_.push_back(std::move(item)); // (behind the runnable ones, if any: not one of them)
  if (listed)
    return;
  lazy_seen_ = runs_;
  ex_.lazy_.push_back(this);
  if (ex_.lazy_.size() == 1)
    ex_.stalled_.notify_one(); // the supervisor looks at it every kStall
}

// Under ex_.mu_: a queue with pending items takes its turn with the threads, one of which is
// woken (notified under the lock: a queue the supervisor publishes may go once it is released).
void WorkQueue::make_ready_locked(bool listed) {
  const bool was_ready = in_ready();
  runnable_ = pending_.size(); // (a FIFO: the items before a runnable one are runnable too)
  if (listed)
    unlist_lazy_locked();
  if (was_ready)
    return;
  group_->ready.push_back(this);
  if (group_->in_ready)
    return; // (a thread comes to it in its group's turn)
  ex_.make_ready_locked(group_);
  ex_.wake_for_work_locked();
}

void WorkQueue::unlist_lazy_locked() {
  ex_.lazy_.erase(std::find(ex_.lazy_.begin(), ex_.lazy_.end(), this));
}

void Executor::publish_lazy() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!lazy_.empty())
    lazy_.front()->make_ready_locked(true); // (takes it off lazy_)
}

// Under mu_: the lazy queues none of whose items ran since the last look go to the threads (a
// thread that waits for one without calling publish_lazy waits at most two kStall windows).
void Executor::publish_stuck_lazy_locked() {
  std::vector<WorkQueue*> stuck;
  for (WorkQueue* q : lazy_) {
    if (q->runs_ == q->lazy_seen_)
      stuck.push_back(q);
    q->lazy_seen_ = q->runs_;
  }
  for (WorkQueue* q : stuck)
    q->make_ready_locked(true);
}

bool WorkQueue::run_one() {
  std::function<void()> item;
  {
    std::lock_guard<std::mutex> lock(ex_.mu_);
    if (pending_.empty())
      return false;
    const bool was_ready = in_ready();
    const bool was_lazy = lazy();
    item = std::move(pending_.front());
    pending_.pop_front();
    ++runs_;
    if (was_ready)
      --runnable_;
    if (was_lazy && !lazy()) // (its last lazy item)
      unlist_lazy_locked();
    if (was_ready && !in_ready()) {
      group_->ready.erase(std::find(group_->ready.begin(), group_->ready.end(), this));
      ex_.unready_if_idle_locked(group_.get());
    }
    ++running_;
    ++ex_.started_; // progress too (the supervisor's sign)
  }
  item();
  item = nullptr;
  std::lock_guard<std::mutex> lock(ex_.mu_);
  if (--running_ == 0)
    idle_.notify_all();
  return true;
}

void WorkQueue::cancel_and_wait() {
  std::deque<std::function<void()>> dropped; // destroyed after the lock is released
  std::unique_lock<std::mutex> lock(ex_.mu_);
  if (lazy())
    unlist_lazy_locked();
  dropped.swap(pending_);
  if (in_ready()) {
    runnable_ = 0;
    group_->ready.erase(std::find(group_->ready.begin(), group_->ready.end(), this));
    ex_.unready_if_idle_locked(group_.get());
  }
  lock.unlock();
  // Before waiting for the running ones, and front to back (a deque's own destructor does not
  // promise it): a dropped Python pool call whose request another call's thread sent reads its
  // reply in its destructor, in turn, after the ones queued before it; the running calls queued
  // after it wait for that reply to be read before theirs.
  while (!dropped.empty())
    dropped.pop_front();
  lock.lock();
  idle_.wait(lock, [this] { return running_ == 0; });
}

} // namespace conveyor
