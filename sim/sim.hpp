// The simulated cluster: a whole conveyor cluster — dispatcher, workers, consumers — in one
// process, on a deterministic scheduler with virtual time and a simulated network, running
// the same actor code as production. One seed decides everything; the same seed replays the
// same run (compare trace_hash). For this repository's tests (and tests built in this build
// tree, linking conveyor_sim) and `conveyor-sim`; not installed. The production actors run here
// in their simulator build (conveyor_hooked, node/hooks.hpp), so planted bugs can act.
// No CAF in this header.
//
//   conveyor::SimConfig cfg;
//   cfg.workers = 16;
//   cfg.options.policy = conveyor::ShardingPolicy::dynamic;
//   cfg.seed = 42;
//   cfg.faults.push_back(conveyor::Fault::crash("worker-3", std::chrono::milliseconds(20)));
//   auto result = conveyor::simulate(my_pipeline, cfg);
//   CHECK(result.ok());                      // every invariant held (see SimResult::failures)
//   CHECK(result.elements().size() <= 1000); // what the consumers received
//
// Node names: "dispatcher", "worker-0" .. "worker-<N-1>", "consumer-0" .. "consumer-<C-1>".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/options.hpp"
#include "conveyor/dataset.hpp"
#include "conveyor/element.hpp"
#include "conveyor/status.hpp"
#include "dispatcher/autoscale_policy.hpp"

namespace conveyor {

// One fault, at a virtual time or when the consumers together received a fraction of the
// elements they expect (progress triggers land inside the job whatever its length).
struct Fault {
  enum class Kind : unsigned char {
    crash,      // the node dies for good (its actors are killed; peers see down_msg)
    restart,    // the node dies and a fresh process starts after `duration` (a consumer:
                // a trainer resumed from its checkpoint, DistributeOptions::resume_from)
    partition,  // the link node <-> peer holds all messages for `duration`; past the
                // connection timeout the connection breaks (down_msg on both sides)
    disconnect, // the connection node <-> peer breaks now (both sides see down_msg)
    slow,       // the link node <-> peer gets 50x its latency for `duration`
    drain,      // a worker stops gracefully (SIGTERM: it drains, then its process ends) and a
                // fresh process starts `duration` later
  };
  Kind kind = Kind::crash;
  std::string node;
  std::string peer; // partition, disconnect, slow
  std::chrono::microseconds at{0};
  std::optional<double> at_progress; // 0..1, instead of `at`
  std::chrono::microseconds duration{0};

  static Fault crash(std::string node, std::chrono::microseconds at);
  static Fault restart(std::string node, std::chrono::microseconds at,
                       std::chrono::microseconds downtime);
  static Fault partition(std::string a, std::string b, std::chrono::microseconds at,
                         std::chrono::microseconds duration);
  static Fault disconnect(std::string a, std::string b, std::chrono::microseconds at);
  static Fault slow(std::string a, std::string b, std::chrono::microseconds at,
                    std::chrono::microseconds duration);
  static Fault drain(std::string worker, std::chrono::microseconds at,
                     std::chrono::microseconds downtime);
  Fault at_fraction(double progress) const; // the same fault, triggered by progress

  // "crash(worker-1)@200ms", "partition(worker-0,dispatcher)@30%+2s" — the syntax of
  // parse_faults, so a printed fault can be pasted into --faults.
  std::string to_string() const;
};

// The --faults syntax: comma-separated items, each either
//   KIND:N                        N faults of that kind; nodes, times and durations drawn
//                                 from the seed (KIND: crash, restart, partition, disconnect,
//                                 slow, drain, dispatcher — the dispatcher crashes and
//                                 restarts from its simulated disk —, trainer — a consumer is
//                                 killed and restarts from its last checkpoint, the read cursor
//                                 of the elements it finished its step on (DYNAMIC private
//                                 reads only) —, or "any" for a mix of all but drain and trainer)
//   KIND(NODE[,PEER])@WHEN[+DUR]  one explicit fault; WHEN is a duration ("200ms", "1.5s",
//                                 "300us") or a progress ("40%")
//   none                          no faults
// invalid_argument naming the bad item otherwise.
struct FaultSpec {
  std::vector<Fault> explicit_faults;
  struct Random {
    std::string
      kind; // crash, restart, partition, disconnect, slow, drain, dispatcher, trainer, any
    int count = 0;
  };
  std::vector<Random> random_faults;
  std::string text; // as given (for replay commands)
};
Expected<FaultSpec> parse_faults(const std::string& spec);

struct SimConfig {
  int workers = 2;
  int consumers = 1;
  // How consumers read. With several consumers they share one job, named "sim" unless
  // options.job_name says otherwise (OFF: every worker's stream is split among them;
  // DYNAMIC: together they read each element once).
  DistributeOptions options;
  uint64_t seed = 1;

  std::vector<Fault> faults; // explicit faults
  std::string random_faults; // a fault spec (above); its random items are drawn per seed

  // The network. Unset: drawn from the seed (latency 20 us .. 2 ms, jitter up to the latency).
  std::optional<std::chrono::microseconds> latency;
  std::optional<std::chrono::microseconds> jitter;
  double bytes_per_second = 1.25e9;
  // The trainer's time per batch before it takes the next one (returns credits). Unset:
  // drawn per batch in 0 .. 2 ms.
  std::optional<std::chrono::microseconds> consumer_step;
  // Credits (max_outstanding_requests) when options leave it unset: drawn from the seed.
  bool draw_credits = true;

  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds worker_timeout{5000};
  std::chrono::milliseconds job_gc_timeout{2000};
  std::chrono::milliseconds connection_timeout{5000};
  // Virtual time after which a run that has not ended fails (liveness).
  std::chrono::milliseconds time_limit{10 * 60 * 1000};

  bool keep_trace = false; // keep the readable event log in SimResult::trace
  // Test-only: switch on a planted protocol bug ("duplicate-split", "forget-lost-split",
  // "forget-held-split", "skip-round", "credit-off-by-one", "checkpoint-early") to check that
  // the invariants catch it.
  std::string plant_bug;
  // Coordinated reads (options.num_consumers = consumers, options.job_name set): consumer i
  // reads with consumer_index i and stops after `take` rounds; the dataset must be infinite.
  // The invariants then check that the rounds line up (round r of every consumer is one group
  // of num_consumers consecutive integers, as `flat_map(group_fn(n=N))` makes them).
  // Cross-trainer cache reads (options.cross_trainer_cache set, its trainer id ignored):
  // consumer i reads as trainer "trainer-<i>" and stops after `take` elements; the dataset
  // must be infinite. The workers' cache window is drawn from the seed (a few elements, so
  // slow trainers fall behind it, or large enough never to evict). The invariants check that
  // every trainer reads each task's output sequence in order, whole when nothing was evicted.
  // With cross_trainer_cache->finite_epoch (whole-epoch sharing) the dataset is finite instead,
  // `take` stays -1, every consumer starts at once (trainers join before the cache fills) and
  // the window is drawn from a few times the credits upwards: each trainer's stream is then
  // checked as if it were the job's only consumer (the whole epoch, as the mode promises).
  // Endless OFF reads (policy OFF, one consumer, a private job, the dataset range(N).repeat()):
  // the consumer stops after `take` elements; the invariants check that it got them whatever
  // workers came and went (no failure, no hang), and that each task's stream is 0, 1, 2, ...
  // (mod N) but for the tasks the consumer counted as lost (on_worker_loss "continue").
  int64_t take = -1;
  // Endless OFF reads: the N of range(N).repeat() (each task's stream is 0, 1, ..., N-1, 0, ...).
  int64_t endless_period = 0;
  // The last `late_workers` workers start once the consumers received a share of what they
  // expect, drawn from the seed (10 .. 60 %), so they join a running job; or earlier, when no
  // other worker is up (faults ended them all).
  int late_workers = 0;
  // Consumer i starts i x consumer_stagger after its drawn start (0 .. 20 ms): with several
  // consumers of one named job, later ones join it mid-read or after it ended; together they
  // must still read one iteration (DYNAMIC: each element once), never the data again.
  std::chrono::milliseconds consumer_stagger{0};
  // Admission (README "Security"): the shared token the dispatcher, its workers and the
  // consumers are all configured with (workers then check it in assign_task and get_elements).
  std::string auth_token;

  // Autoscaling (issue 38; test/sim/autoscale_sim_test.cpp).
  // Each worker's pipeline makes at most `worker_rate` elements per virtual second, as a
  // CPU-bound map would: every element costs 1/worker_rate of the worker's time, varied by up to
  // +-worker_rate_noise of it (sim/production_cost.hpp). Unset: production costs no virtual time.
  std::optional<double> worker_rate;
  double worker_rate_noise = 0.2;
  // Elements a task holds ready (its prefetch). Unset: drawn from the seed (4, 64 or 65536). A
  // deep prefetch hides a worker count that is too small until it ran dry.
  std::optional<int64_t> task_buffer_elements;
  // The trainer takes one element every 1/trainer_rate virtual seconds (returning its credit
  // then; instead of consumer_step), and every 1/trainer_slow_rate from trainer_slow_at on
  // (trainer_slow_rate 0: it never slows).
  std::optional<double> trainer_rate;
  double trainer_slow_rate = 0;
  std::chrono::milliseconds trainer_slow_at{0};
  // The dispatcher's autoscaler (its estimate every autoscale_interval, this policy) acting
  // through a simulated actuator instead of --scale-command (sim/scale_actuator.hpp): a higher
  // target starts worker nodes ("worker-<N>", N counting on from `workers`) that start their
  // worker after a delay drawn in [register_min, register_max]; a lower one drains the newest
  // (as SIGTERM: it delivers what it holds, then its process ends for good).
  std::optional<actors::AutoscaleConfig> autoscale;
  std::chrono::milliseconds autoscale_interval{1000};
  std::chrono::milliseconds register_min{300};
  std::chrono::milliseconds register_max{3000};
};

// A change of the autoscaler's target (SimConfig::autoscale), in virtual seconds from the start.
struct SimScaleTarget {
  double at_s = 0;
  int64_t target = 0;
};

struct SimConsumer {
  std::vector<Element> elements;
  std::vector<std::string> sources; // the worker address each element came from
  Status status;                    // how the stream ended (OK = end of sequence)
  bool ended = false;
  int64_t lost_tasks = 0;               // OFF tasks it read on without (on_worker_loss "continue")
  std::chrono::nanoseconds ended_at{0}; // virtual time from the start when its stream ended
};

struct SimResult {
  uint64_t seed = 0;
  std::string trace_hash; // 16 hex digits; equal for equal seeds and configs
  // Invariant failures, readable. Empty = the run passed.
  std::vector<std::string> failures;
  std::vector<SimConsumer> consumers;
  std::vector<std::string> faults_injected; // as Fault::to_string, with the time they fired
  std::string derived_config;               // what the seed chose (latency, credits...)
  std::chrono::nanoseconds virtual_time{0};
  uint64_t steps = 0;    // actor messages processed
  uint64_t messages = 0; // messages that crossed the simulated network
  double real_seconds = 0;
  std::vector<std::string> trace; // with keep_trace
  std::string replay_command;     // `conveyor-sim ...` that replays this run
  // Autoscaling runs: every target the dispatcher's autoscaler set, and what the actuator did.
  std::vector<SimScaleTarget> scale_targets;
  int64_t workers_started = 0; // by the actuator
  int64_t workers_drained = 0; // by the actuator, drained and gone

  bool ok() const { return failures.empty(); }
  // All consumers' elements, in consumer order.
  std::vector<Element> elements() const;
  // "seed 7: PASS (412 elements, 1.23 s virtual, 3 faults) trace 1f0c..."
  std::string summary() const;
};

// Runs `dataset` (finite; up to a million elements) on a simulated cluster.
// invalid_argument for a bad configuration (no workers, an unknown node in a fault, bad options).
Expected<SimResult> simulate(const Dataset& dataset, const SimConfig& config);

struct SweepResult {
  int runs = 0;
  int failed_runs = 0;
  int64_t faults_injected = 0;
  std::vector<uint64_t> failing_seeds;
  std::vector<SimResult> failures; // the failed runs (at most the first 10, with their traces
                                   // only when config.keep_trace)
  double real_seconds = 0;
  std::string summary() const;
};

// Runs seeds first_seed, first_seed + 1, ... (`runs` of them) of `config`. `stop_after_failures`
// > 0 stops early once that many runs failed. `on_run` (optional) sees every result.
Expected<SweepResult> sweep(const Dataset& dataset, SimConfig config, uint64_t first_seed, int runs,
                            int stop_after_failures = 0,
                            const std::function<void(const SimResult&)>& on_run = {});

// The `conveyor-sim` command line that replays `config` with its seed.
std::string replay_command(const Dataset& dataset, const SimConfig& config);

} // namespace conveyor
