// Coordinated (round-robin) reads in the simulator: N consumers with num_consumers N, one worker
// joining the running job at a time the seed draws, slow links and worker crashes drawn per
// seed; the invariants check that round r of every consumer is one group of N consecutive
// integers (check_coordinated in sim/invariants.cpp), that nothing ends short without
// an error, and that no job, task or consumer actor is left behind.
// CONVEYOR_SIM_SEEDS sets the number of seeds per configuration (default 500).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "sim/sim.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::SimConfig;
using conveyor::sim_test::env_int;
using conveyor::sim_test::failures_of;

namespace {

SimConfig coordinated_config(int n) {
  SimConfig cfg;
  cfg.workers = 3;
  cfg.late_workers = 1;
  cfg.consumers = n;
  cfg.options.job_name = "rr";
  cfg.options.num_consumers = n;
  cfg.options.consumer_index = 0; // each consumer reads its own index
  cfg.take = 300;
  // A small credit, so the consumers plan few rounds ahead and a late worker joins (16 rounds
  // beyond them: the simulator's round lookahead) well within the 300 rounds.
  cfg.options.max_outstanding_requests = 16;
  return cfg;
}

conveyor::Dataset groups(int n) {
  auto d =
    conveyor::parse_dataset("range(1000).flat_map(group_fn(n=" + std::to_string(n) + ")).repeat()");
  REQUIRE(d.ok());
  return *d;
}

bool every_consumer_took(const conveyor::SimResult& r, int64_t take) {
  for (const auto& c : r.consumers)
    if (static_cast<int64_t>(c.elements.size()) != take)
      return false;
  return true;
}

// OFF: each task produces the groups from the start, so consumer 0 reads "0" once per task that
// served rounds.
int tasks_that_served(const conveyor::SimResult& r) {
  int zeros = 0;
  if (!r.consumers.empty())
    for (const auto& e : r.consumers[0].elements)
      zeros += e.components.at(0).as_int64() == 0 ? 1 : 0;
  return zeros;
}

} // namespace

// One test case per N (each its own ctest entry and time limit): 500 seeds in all.
static void sweep_join_and_slow_links(int n) {
  CAPTURE(n);
  auto cfg = coordinated_config(n);
  cfg.random_faults = "slow:2";
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 2;
  int complete = 0, joined = 0;
  auto s = conveyor::sweep(groups(n), cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    // Slow links lose nothing: every consumer read all its rounds.
    complete += every_consumer_took(r, cfg.take) ? 1 : 0;
    joined += tasks_that_served(r) == 3 ? 1 : 0; // the late worker joined in time
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("coordinated N=" << n << ": " << s->summary() << "; the late worker served rounds in "
                           << joined << " run(s)");
  CHECK(s->runs == runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(complete == runs);
  CHECK(joined > runs / 2);
}

TEST_CASE(
  "CI sweep: coordinated reads stay aligned while a worker joins and links slow down - N = 2") {
  sweep_join_and_slow_links(2);
}

TEST_CASE(
  "CI sweep: coordinated reads stay aligned while a worker joins and links slow down - N = 3") {
  sweep_join_and_slow_links(3);
}

// Issue 32: "groups aligned while 1, 3 or 10 workers join". `late` workers start together at a
// share of the read the seed draws (the test above: one): the rounds stay aligned (the
// invariants), every consumer reads its whole take, and the joiners serve rounds (consumer 0
// reads "0" once per task that served: more than the 2 first workers' in most runs).
static void sweep_many_join(int late) {
  CAPTURE(late);
  auto cfg = coordinated_config(2);
  cfg.workers = 2 + late;
  cfg.late_workers = late;
  const int runs = std::max(3, env_int("CONVEYOR_SIM_SEEDS", 500) / 20);
  int complete = 0, joined = 0;
  auto s = conveyor::sweep(groups(2), cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    complete += every_consumer_took(r, cfg.take) ? 1 : 0;
    joined += tasks_that_served(r) > 2 ? 1 : 0;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("coordinated N=2, " << late << " workers join: " << s->summary()
                              << "; joiners served rounds in " << joined << " run(s)");
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(complete == runs);
  CHECK(joined > runs / 2);
}

TEST_CASE("CI sweep: coordinated reads stay aligned while 3 workers join at once") {
  sweep_many_join(3);
}

TEST_CASE("CI sweep: coordinated reads stay aligned while 10 workers join at once") {
  sweep_many_join(10);
}

// The consumers' full take and, when not, why (one line per consumer and fault).
static bool all_rounds_read(const conveyor::SimResult& r, int64_t take, std::string& why) {
  const bool all = every_consumer_took(r, take);
  if (!all) {
    why = r.summary() + "\n  replay: " + r.replay_command;
    for (const auto& c : r.consumers)
      why +=
        "\n  consumer: " + std::to_string(c.elements.size()) + " rounds, " + c.status.to_string();
    for (const auto& f : r.faults_injected)
      why += "\n  " + f;
  }
  return all;
}

// A sweep of `faults` (one per seed) over 2 consumers: every consumer reads all its rounds,
// aligned (check_coordinated); `fired` counts the runs whose fault log has `fired_text`.
static void sweep_every_round_read(const std::string& faults, int late_workers,
                                   const std::string& label, const std::string& fired_text,
                                   int min_fired) {
  auto cfg = coordinated_config(2);
  cfg.late_workers = late_workers;
  cfg.random_faults = faults;
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 5 + 1;
  int complete = 0, fired = 0;
  auto s = conveyor::sweep(groups(2), cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    std::string why;
    if (all_rounds_read(r, cfg.take, why))
      ++complete;
    else
      FAIL_CHECK(why);
    for (const auto& f : r.faults_injected)
      fired += f.find(fired_text) != std::string::npos ? 1 : 0;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("coordinated with " << label << ": " << s->summary() << "; \"" << fired_text << "\" in "
                              << fired << " run(s)");
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(complete == runs);
  CHECK(fired >= min_fired * runs / 100);
}

TEST_CASE("CI sweep: coordinated reads stay aligned and go on while a worker crashes") {
  // A worker lost without draining (a crash: its process ends at once, what it held with it):
  // the job settles its task at the rounds every consumer received (consumers hand out only
  // rounds all of them have), every consumer skips its later rounds alike, and the reads go on
  // on the other workers.
  sweep_every_round_read("crash:1", 0, "crashes", "crash(", 50);
}

TEST_CASE("CI sweep: coordinated reads stay aligned while a worker drains and starts again") {
  // A graceful stop (drain) loses nothing: the job ends the worker's task at a round every
  // consumer agrees on, the task serves its rounds up to there, then the worker's process ends;
  // a fresh one starts 50 ms..3 s later and joins. Most drains finish within the 300 rounds.
  sweep_every_round_read("drain:1", 0, "drains", "drained and stopped", 50);
}

TEST_CASE("CI sweep: coordinated reads stay aligned while the dispatcher restarts") {
  // The dispatcher crashes and comes back from its journal 50 ms..3 s later (a worker may also
  // join meanwhile): the consumers read on from the tasks they know, join the restored job
  // again with what their planners know, and the job rebuilds the rounds from that
  // (RoundRobinJob::start_recovery).
  sweep_every_round_read("dispatcher:1", 1, "dispatcher restarts", "restart(dispatcher", 50);
}

TEST_CASE(
  "CI sweep: coordinated reads stay aligned while a worker drains and the dispatcher restarts") {
  // Both at once: the restored job may give a draining task its end round before the task's
  // worker registered again; it keeps the end_rounds for when the worker is back
  // (job_actor_tasks.cpp send_round_ends, RoundRobinJob::end_later) instead of dropping it.
  sweep_every_round_read("drain:1,dispatcher:1", 0, "drains and dispatcher restarts",
                         "drained and stopped", 25);
}

TEST_CASE("planted bug: a consumer that skips a round is found by the coordinated sweep") {
  auto cfg = coordinated_config(2);
  cfg.plant_bug = "skip-round";
  auto s = conveyor::sweep(groups(2), cfg, 1, 20, /*stop_after_failures=*/1);
  REQUIRE(s.ok());
  REQUIRE(s->failed_runs >= 1);
  const auto& f = s->failures.front();
  bool named = false;
  for (const auto& line : f.failures)
    named = named || line.find("coordinated rounds out of step: round 97") != std::string::npos;
  CHECK_MESSAGE(named, f.summary());
}
