#include "dispatcher/worker_estimate.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::actors {

namespace {
// A share this close to 1 means the workers produce next to nothing: the estimate is capped at
// 20 times the serving workers per observation rather than dividing by ~0.
constexpr double kMaxShare = 0.95;
} // namespace

int64_t workers_needed(int64_t serving, int64_t consumers, double wait, double tolerated) {
  if (consumers <= 0)
    return 0;
  if (serving <= 0)
    return 1; // readers and no worker: at least one is needed before anything can be measured
  if (!(wait > tolerated))
    return serving;
  const double w = std::min(wait, kMaxShare);
  const double exact = static_cast<double>(serving) * (1.0 - tolerated) / (1.0 - w);
  // The epsilon keeps an exact integer (e.g. 2 workers at 50% -> 4) from rounding up past it.
  return std::max<int64_t>(serving, static_cast<int64_t>(std::ceil(exact - 1e-9)));
}

void WorkerEstimator::observe(double now_s, const std::vector<JobCounters>& jobs) {
  std::map<uint64_t, Last> next;
  estimates_.clear();
  total_ = 0;
  max_wait_ = 0;
  demand_ = 0;
  for (const auto& c : jobs) {
    next[c.job] = Last{now_s, c};
    if (c.finished || c.consumers <= 0)
      continue;
    JobCounters base; // zeros: the job's whole life
    double secs = 0;
    if (auto it = last_.find(c.job);
        it != last_.end() && it->second.counters.elapsed_ns <= c.elapsed_ns) {
      base = it->second.counters;
      secs = now_s - it->second.at;
    } else {
      // Without a previous observation: the consumers' average reading time.
      secs = static_cast<double>(c.elapsed_ns) / 1e9 / static_cast<double>(c.consumers);
    }
    JobEstimate e;
    e.job = c.job;
    const double elapsed = static_cast<double>(c.elapsed_ns - base.elapsed_ns);
    const double waited = static_cast<double>((c.wait_worker_ns + c.wait_network_ns) -
                                              (base.wait_worker_ns + base.wait_network_ns));
    e.wait_share = elapsed > 0 ? std::clamp(waited / elapsed, 0.0, 1.0) : 0.0;
    e.elements_per_s = secs > 0 ? static_cast<double>(c.elements - base.elements) / secs : 0.0;
    e.desired = workers_needed(c.tasks, c.consumers, e.wait_share, tolerated_);
    if (c.max_workers > 0)
      e.desired = std::min(e.desired, std::max(c.max_workers, c.tasks));
    total_ = std::max(total_, e.desired);
    estimates_.push_back(e);
    if (c.max_workers > 0 && c.tasks >= c.max_workers)
      continue; // at its cap: more workers would not serve it
    max_wait_ = std::max(max_wait_, e.wait_share);
    demand_ += e.elements_per_s / (1.0 - std::min(e.wait_share, kMaxShare));
  }
  last_ = std::move(next);
}

const JobEstimate* WorkerEstimator::job(uint64_t id) const {
  for (const auto& e : estimates_)
    if (e.job == id)
      return &e;
  return nullptr;
}

} // namespace conveyor::actors
