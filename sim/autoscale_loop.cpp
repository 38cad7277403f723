#include "sim/autoscale_loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

#include "dispatcher/worker_estimate.hpp"
#include "sim/rng.hpp"

namespace conveyor::sim {

namespace {

struct Worker {
  double registers_at = 0;
  bool draining = false;
  bool gone = false;
  double produce = 0;                    // elements it may produce now (its map's progress)
  int64_t split_next = 0, split_end = 0; // the rest of its current split
  std::deque<int64_t> ready;             // produced, not yet taken by the trainer

  bool registered(double t) const { return !gone && t >= registers_at; }
  bool idle() const { return split_next == split_end && ready.empty(); }
};

// The fewest workers that keep the trainer's wait on them within the policy's tolerance: n
// workers make n x worker_rate, so the trainer waits a share 1 - n x worker_rate / trainer_rate.
int64_t oracle(double trainer_rate, double worker_rate, const actors::AutoscaleConfig& c) {
  const auto n =
    static_cast<int64_t>(std::ceil(trainer_rate * (1 - c.low_wait) / worker_rate - 1e-9));
  return std::clamp(n, c.min_workers, c.max_workers);
}

class Loop {
public:
  explicit Loop(const AutoscaleLoopConfig& c) : c_(c), rng_(c.seed), policy_(c.policy) {}

  AutoscaleLoopResult run() {
    r_.oracle_fast = oracle(c_.trainer_rate, c_.worker_rate, c_.policy);
    r_.oracle_slow = oracle(c_.slow_rate, c_.worker_rate, c_.policy);
    for (int64_t i = 0; i < c_.start_workers; ++i)
      workers_.push_back(Worker{}); // registered from the start
    const auto ticks_per_interval = static_cast<int64_t>(std::lround(c_.interval_s / c_.tick_s));
    // After the end the trainer takes what is still in flight; bounded, as every loop here.
    const auto last_tick = static_cast<int64_t>((c_.end_s + 600) / c_.tick_s);
    for (int64_t tick = 1; tick <= last_tick; ++tick) {
      const double t = static_cast<double>(tick) * c_.tick_s;
      const bool open = t < c_.end_s;
      produce(t, open);
      consume(t);
      if (open && tick % ticks_per_interval == 0)
        decide(t);
      if (!open && std::all_of(workers_.begin(), workers_.end(),
                               [](const Worker& w) { return w.gone || w.idle(); })) {
        r_.end_s = t;
        break;
      }
    }
    for (int64_t i = 0; i < r_.handed_out; ++i)
      r_.missing += seen_[static_cast<std::size_t>(i)] == 0 ? 1 : 0;
    return std::move(r_);
  }

private:
  void produce(double t, bool open) {
    for (auto& w : workers_) {
      if (!w.registered(t))
        continue;
      const double noise = c_.rate_noise * (2 * rng_.unit() - 1);
      w.produce += c_.worker_rate * (1 + noise) * c_.tick_s;
      while (w.produce >= 1 && static_cast<int64_t>(w.ready.size()) < c_.buffer) {
        if (w.split_next == w.split_end) {
          if (w.draining || !open)
            break;
          // The dispatcher hands the next DYNAMIC split to this worker alone.
          w.split_next = r_.handed_out;
          w.split_end = r_.handed_out += c_.split_size;
          seen_.resize(static_cast<std::size_t>(r_.handed_out), 0);
        }
        w.ready.push_back(w.split_next++);
        w.produce -= 1;
      }
      w.produce = std::min(w.produce, 1.0); // a worker with a full buffer does not run ahead
      if (w.draining && w.idle()) {
        w.gone = true; // delivered everything it started: its process exits
        ++r_.drains;
      }
    }
  }

  void consume(double t) {
    const double rate = t < c_.slow_at_s ? c_.trainer_rate : c_.slow_rate;
    need_ += rate * c_.tick_s;
    while (need_ >= 1) {
      Worker* from = nullptr;
      for (std::size_t i = 0; i < workers_.size() && from == nullptr; ++i) {
        auto& w = workers_[(next_ + i) % workers_.size()];
        if (!w.gone && !w.ready.empty()) {
          from = &w;
          next_ = (next_ + i + 1) % workers_.size();
        }
      }
      if (from == nullptr)
        break;
      const int64_t e = from->ready.front();
      from->ready.pop_front();
      auto& mark = seen_[static_cast<std::size_t>(e)];
      r_.duplicates += mark != 0 ? 1 : 0;
      mark = 1;
      ++r_.received;
      need_ -= 1;
    }
    // The trainer is ready for its next element once `need_` reaches 1; what is left above 1 is
    // the time of this tick it was ready and had nothing (it does not catch up later: its steps
    // take their time).
    if (need_ > 1)
      wait_ns_ += static_cast<int64_t>(1e9 * std::min(c_.tick_s, (need_ - 1) / rate));
    need_ = std::min(need_, 1.0);
    elapsed_ns_ += static_cast<int64_t>(1e9 * c_.tick_s);
  }

  void decide(double t) {
    int64_t registered = 0;
    for (const auto& w : workers_)
      registered += w.registered(t) ? 1 : 0; // a draining worker stays registered until it exits
    actors::JobCounters counters;
    counters.job = 1;
    counters.consumers = 1;
    counters.tasks = registered;
    counters.elements = r_.received;
    counters.wait_worker_ns = wait_ns_;
    counters.elapsed_ns = elapsed_ns_;
    estimator_.observe(t, {counters});
    actors::AutoscaleObservation o;
    o.now_s = t;
    o.workers = registered;
    o.wait_share = estimator_.max_wait_share();
    o.estimate = estimator_.total();
    o.demand = estimator_.demand();
    o.has_readers = estimator_.has_readers();
    const auto d = policy_.decide(o);
    if (!d.changed)
      return;
    r_.changes.push_back({t, d.target, d.reason});
    actuate(t, d.target);
  }

  // As `conveyor run --autoscale` does: start workers up to the target, drain the newest down to it.
  void actuate(double t, int64_t target) {
    int64_t have = 0;
    for (const auto& w : workers_)
      have += !w.gone && !w.draining ? 1 : 0;
    for (; have < target; ++have) {
      Worker w;
      w.registers_at =
        t + c_.register_min_s + (c_.register_max_s - c_.register_min_s) * rng_.unit();
      workers_.push_back(w);
    }
    for (auto it = workers_.rbegin(); have > target && it != workers_.rend(); ++it)
      if (!it->gone && !it->draining) {
        it->draining = true;
        --have;
      }
  }

  const AutoscaleLoopConfig c_;
  Rng rng_;
  actors::WorkerEstimator estimator_{0.05};
  actors::AutoscalePolicy policy_;
  std::vector<Worker> workers_;
  std::vector<char> seen_;
  std::size_t next_ = 0;
  double need_ = 0;
  int64_t wait_ns_ = 0, elapsed_ns_ = 0;
  AutoscaleLoopResult r_;
};

} // namespace

int64_t AutoscaleLoopResult::target_at(double t, int64_t start) const {
  int64_t n = start;
  for (const auto& c : changes)
    if (c.at_s <= t)
      n = c.target;
  return n;
}

int AutoscaleLoopResult::count_changes(double from, double to) const {
  return static_cast<int>(std::count_if(changes.begin(), changes.end(), [&](const Change& c) {
    return c.at_s >= from && c.at_s < to;
  }));
}

std::string AutoscaleLoopResult::describe() const {
  std::string out = "oracle " + std::to_string(oracle_fast) + " then " +
                    std::to_string(oracle_slow) + "; " + std::to_string(changes.size()) +
                    " change(s):\n";
  for (const auto& c : changes) {
    char at[32];
    std::snprintf(at, sizeof at, "%.1f", c.at_s);
    out += "  " + std::string(at) + " s -> " + std::to_string(c.target) + ": " + c.reason + "\n";
  }
  return out;
}

AutoscaleLoopResult run_autoscale_loop(const AutoscaleLoopConfig& config) {
  return Loop(config).run();
}

} // namespace conveyor::sim
