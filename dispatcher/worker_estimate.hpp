// How many workers the trainers need so that they do not wait on workers: tf.data service's
// worker estimate (the consumers' consumption rate over the per-worker production rate), made
// from what conveyor measures. CAF-free; the dispatcher actor feeds it the jobs' cumulative
// counters every autoscale interval (dispatcher_actor_autoscale.cpp).
//
// Over the window since the previous observation, for each job its consumers delivered r
// elements/s and spent a share w of their time waiting on workers (consumer/wait_stats.hpp's
// worker and network causes: a task that holds a request until its next element is ready and
// then replies looks like transfer time to the consumer, which classifies by the last reply, so
// both count). Its n tasks (one per worker serving it) then made
// at least r/n elements/s each, and a trainer that never waited on workers would consume
// r/(1-w). Workers needed: n(1-t)/(1-w), rounded up, where t is the wait share still
// tolerated. When w <= t the workers keep up and the estimate stays n: the consumers' view
// cannot tell how much of the workers is idle, so finding a smaller count is the autoscaler's
// job (it probes one worker less, autoscale_policy.hpp). Credit and split waits are not counted:
// more workers do not shorten them (`conveyor status` shows them next to the estimate).
//
// The total is the largest job's need, not the sum: every worker runs a task of every job, so a
// worker added serves all jobs at once. Except a job of a tenant with a worker cap
// (--tenant-max-workers): it needs at most its cap, and once it runs on that many workers its
// wait does not count towards the autoscaler's signal (another worker would not serve it).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace conveyor::actors {

// A job's cumulative counters as its status reports them (msg::job_status).
struct JobCounters {
  uint64_t job = 0;
  bool finished = false;      // production ended: it needs no worker any more
  int64_t consumers = 0;      // reading now
  int64_t tasks = 0;          // workers serving it
  int64_t elements = 0;       // delivered, summed over consumers
  int64_t wait_worker_ns = 0; // consumer/wait_stats.hpp's causes, summed over consumers
  int64_t wait_network_ns = 0;
  int64_t elapsed_ns = 0; // consumers' reading time, summed over consumers
  // Its tenant's worker cap (--tenant-max-workers; 0 = none).
  int64_t max_workers = 0;
};

struct JobEstimate {
  uint64_t job = 0;
  double elements_per_s = 0; // over the window
  double wait_share = 0;     // of the consumers' time, waiting on workers, over the window
  int64_t desired = 0;       // workers needed
};

// The formula for one job: `serving` workers, wait share `wait` on them, `tolerated` wait share.
int64_t workers_needed(int64_t serving, int64_t consumers, double wait, double tolerated);

class WorkerEstimator {
public:
  // The wait share on workers still tolerated (0 = none; the autoscaler's low threshold).
  explicit WorkerEstimator(double tolerated_wait = 0.05) : tolerated_(tolerated_wait) {}

  // The jobs' cumulative counters at `now_s` (seconds of any steady clock). Jobs not listed are
  // forgotten. A job seen for the first time is estimated over its whole life so far.
  void observe(double now_s, const std::vector<JobCounters>& jobs);

  // The estimates of the jobs with consumers, from the last observe().
  const std::vector<JobEstimate>& jobs() const { return estimates_; }
  const JobEstimate* job(uint64_t id) const;
  // The workers all jobs need (the largest job's need); 0 when no job has consumers; -1 before
  // the first observe().
  int64_t total() const { return total_; }
  // The largest wait share on workers among the jobs with consumers (0 when none): the signal
  // the autoscaler climbs on.
  double max_wait_share() const { return max_wait_; }
  // Elements/s the readers of all jobs would take if they never waited on workers (the sum of
  // rate/(1-wait share)); the autoscaler lifts a floor when it falls.
  double demand() const { return demand_; }
  // Whether any unfinished job has consumers (without one there is nothing to scale for).
  bool has_readers() const { return !estimates_.empty(); }

private:
  struct Last {
    double at = 0;
    JobCounters counters;
  };
  double tolerated_;
  std::map<uint64_t, Last> last_;
  std::vector<JobEstimate> estimates_;
  int64_t total_ = -1;
  double max_wait_ = 0;
  double demand_ = 0;
};

} // namespace conveyor::actors
