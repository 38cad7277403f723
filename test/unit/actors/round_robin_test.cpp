// Coordinated (round-robin) reads without actors (coordinated/round_robin.hpp): the schedule, the
// consumer's planner, the task's rounds and the job's fence, driven together in one process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <random>

#include "coordinated/round_robin.hpp"
#include "test/support/round_robin_cluster.hpp"

// Seeds of the mini-cluster sweeps: `full` by default, scaled as CONVEYOR_SIM_SEEDS is (default
// 500), so that the sanitizer build, which sets it low, runs a few of them.
static uint64_t mini_cluster_seeds(uint64_t full) {
  const char* env = std::getenv("CONVEYOR_SIM_SEEDS");
  const long seeds = env != nullptr && *env != '\0' ? std::atol(env) : 500;
  return std::max<uint64_t>(3, full * static_cast<uint64_t>(std::max(seeds, 0L)) / 500);
}

using conveyor::Element;
using conveyor::ErrorCode;
using conveyor::Tensor;
using conveyor::actors::RoundRobinJob;
using conveyor::actors::RoundRobinPlanner;
using conveyor::actors::RoundRobinTaskRounds;
using conveyor::actors::RoundSchedule;

using conveyor::test_support::el;
using conveyor::test_support::MiniCluster;
using conveyor::test_support::val;

TEST_CASE("round schedule: round r goes to the active tasks in turn - a task starts at its round") {
  RoundSchedule s;
  CHECK_FALSE(s.task_for(0));
  s.add(7, 0);
  s.add(3, 0);
  CHECK(*s.task_for(0) == 3); // (start 0, task 3) before (start 0, task 7)
  CHECK(*s.task_for(1) == 7);
  CHECK(*s.task_for(2) == 3);
  s.add(1, 10); // starts at round 10: rounds before keep their tasks
  CHECK(*s.task_for(9) == 7);
  CHECK(*s.task_for(10) == 7); // 10 % 3 = 1 -> second of (0,3),(0,7),(10,1)
  CHECK(*s.task_for(11) == 1);
  CHECK(*s.task_for(12) == 3);
}

TEST_CASE(
  "task rounds: a round completes only when every consumer asked - element i to consumer i") {
  RoundRobinTaskRounds t{3};
  REQUIRE(t.ask(0, 0, 2, 0).ok());
  REQUIRE(t.ask(2, 0, 1, 0).ok());
  CHECK(t.completable() == 0);
  CHECK_FALSE(t.stalled(5, 10)); // not yet past the timeout
  auto stalled = t.stalled(20, 10);
  REQUIRE(stalled);
  CHECK(stalled->find("consumer_index 1 of num_consumers 3") != std::string::npos);
  REQUIRE(t.ask(1, 0, 3, 21).ok());
  CHECK(t.completable() == 1); // consumer 2 asked for one round only
  t.complete({el(30), el(31), el(32)}, 22);
  auto late = t.stalled(1000, 10); // consumers 0 and 1 wait for round 1; consumer 2 never asked
  REQUIRE(late);
  CHECK(late->find("round 1 of this task") != std::string::npos);
  CHECK(late->find("consumer_index 2 of") != std::string::npos);
  auto got1 = t.take(1, 5, 1 << 20);
  REQUIRE(got1.size() == 1);
  CHECK(val(got1[0]) == 31);
  CHECK(t.take(1, 5, 1 << 20).empty());
  // Repeats and gaps are errors, not silent.
  CHECK(t.ask(1, 0, 1, 23).code() == ErrorCode::failed_precondition);
  CHECK(t.ask(0, 5, 1, 23).code() == ErrorCode::internal);
  CHECK(t.ask(3, 0, 1, 23).code() == ErrorCode::invalid_argument);
}

TEST_CASE(
  "task rounds: many rounds complete at once, element j to consumer j mod N, in round order") {
  RoundRobinTaskRounds t{2};
  REQUIRE(t.ask(0, 0, 5, 0).ok());
  REQUIRE(t.ask(1, 0, 3, 0).ok());
  REQUIRE(t.completable() == 3);
  // Three rounds in one call; the sizes given are what take()'s byte bound counts.
  t.complete_many({el(0), el(1), el(10), el(11), el(20), el(21)}, {8, 8, 8, 8, 8, 8}, 1);
  CHECK(t.completed() == 3);
  CHECK(t.completable() == 0);
  auto first = t.take(0, 10, 16); // 16 bytes: two 8-byte elements
  REQUIRE(first.size() == 2);
  CHECK(val(first[0]) == 0);
  CHECK(val(first[1]) == 10);
  auto rest = t.take(0, 10, 1 << 20);
  REQUIRE(rest.size() == 1);
  CHECK(val(rest[0]) == 20);
  auto other = t.take(1, 10, 1 << 20);
  REQUIRE(other.size() == 3);
  CHECK(val(other[0]) == 1);
  CHECK(val(other[2]) == 21);
  CHECK(t.next_for(0) == 3);
  CHECK(t.next_for(1) == 3);
  // Consumer 1 asked for 3 rounds only: consumer 0 waits on it for round 3.
  CHECK(t.stalled(1000, 10));
}

TEST_CASE("restart: a new consumer of an index asks every task where it stands, then starts at the "
          "first round all can serve; the tasks drop what they kept for the index before it") {
  // Two tasks at round 0: task 1 serves the even rounds, task 2 the odd ones. N = 2.
  std::map<uint64_t, RoundRobinTaskRounds> tasks;
  tasks.emplace(1, RoundRobinTaskRounds{2});
  tasks.emplace(2, RoundRobinTaskRounds{2});
  // Before the restart: consumer 0 asked 8 rounds of each task, the old consumer 1 asked (and
  // was sent) 5 rounds of task 1 and 4 of task 2, and asked task 2 for 2 more (kept for it).
  auto group = [](uint64_t task, int64_t local) {
    return static_cast<int64_t>(task) * 1000 + local;
  };
  for (auto& [id, t] : tasks) {
    REQUIRE(t.ask(0, 0, 8, 0).ok());
    REQUIRE(t.ask(1, 0, id == 1 ? 5 : 6, 0).ok());
    const auto rounds = t.completable();
    for (int64_t k = 0; k < rounds; ++k)
      t.complete({el(group(id, k) * 2), el(group(id, k) * 2 + 1)}, 0);
    CHECK(t.take(1, id == 1 ? 5 : 4, 1 << 20).size() == (id == 1 ? 5u : 4u));
  }
  CHECK(tasks.at(1).next_for(1) == 5);
  CHECK(tasks.at(2).next_for(1) == 4);

  RoundRobinPlanner p{1, 2, 100};
  REQUIRE(p.on_tasks({{1, 0}, {2, 0}}, -1).ok());
  p.start_resuming();
  auto ready = [](uint64_t) { return true; };
  auto probes = p.next_requests(ready, 100);
  REQUIRE(probes.size() == 2);
  for (const auto& r : probes) {
    CHECK(r.probe);
    CHECK(p.resuming());
    REQUIRE(p.on_probe(r, tasks.at(r.task).next_for(1)).ok());
  }
  CHECK_FALSE(p.resuming());
  // Task 1's local round 5 is round 10, task 2's local round 4 is round 9: it starts at 10.
  CHECK(p.next_round() == 10);
  auto reqs = p.next_requests(ready, 3);
  REQUIRE(reqs.size() == 2);
  for (const auto& r : reqs) {
    CAPTURE(r.task);
    CHECK(r.resume);
    CHECK(r.first == 5); // task 1: rounds 0, 2, .., 8 lie below 10; task 2: 1, 3, .., 9
    auto& t = tasks.at(r.task);
    REQUIRE(t.resume(1, r.first, 1).ok());
    REQUIRE(t.ask(1, r.first, r.count, 1).ok());
    const auto rounds = t.completable();
    for (int64_t k = 0; k < rounds; ++k) {
      const auto local = t.completed();
      t.complete({el(group(r.task, local) * 2), el(group(r.task, local) * 2 + 1)}, 1);
    }
    REQUIRE(p.on_reply(r, t.take(1, r.count, 1 << 20), t.committed()).ok());
  }
  // Nothing is handed out before every consumer has the rounds (consumer 0 asked past them;
  // consumer 1 says so with its confirms).
  CHECK(p.take_ready().empty());
  for (const auto& c : p.next_requests(ready, 3)) {
    auto& t = tasks.at(c.task);
    t.confirm(0, t.completed());
    if (c.confirm)
      t.confirm(1, c.first);
    else
      REQUIRE(t.ask(1, c.first, c.count, 2).ok()); // (its rounds do not complete yet)
    REQUIRE(p.on_reply(c, {}, t.committed()).ok());
  }
  // Rounds 10, 11, 12, ...: task 1's local 5, task 2's local 5, task 1's local 6 ...; task 2's
  // kept round 4 (round 9) was dropped, not handed out.
  auto got = p.take_ready();
  REQUIRE(got.size() >= 3);
  CHECK(val(got[0]) == group(1, 5) * 2 + 1);
  CHECK(val(got[1]) == group(2, 5) * 2 + 1);
  CHECK(val(got[2]) == group(1, 6) * 2 + 1);
  // A rejoin below what a task already sent is an error, never a repeat.
  CHECK(tasks.at(1).resume(1, 2, 2).code() == ErrorCode::failed_precondition);
}

TEST_CASE("restart: a consumer new to the job finds every task at round 0 and plans as before") {
  RoundRobinTaskRounds t{2};
  RoundRobinPlanner p{0, 2, 10};
  REQUIRE(p.on_tasks({{7, 0}}, -1).ok());
  p.start_resuming();
  auto ready = [](uint64_t) { return true; };
  CHECK(p.next_requests(ready, 100).size() == 1); // the probe
  auto probe = p.next_requests(ready, 100);
  CHECK(probe.empty()); // one at a time
  RoundRobinPlanner::Request r{7, 0, 0, true, false};
  REQUIRE(p.on_probe(r, t.next_for(0)).ok());
  CHECK(p.next_round() == 0);
  auto reqs = p.next_requests(ready, 100);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].first == 0);
  CHECK(reqs[0].count == 10);
  CHECK_FALSE(reqs[0].resume);
}

TEST_CASE("task rounds: the stall error names every missing consumer after the timeout") {
  RoundRobinTaskRounds t{4};
  REQUIRE(t.ask(1, 0, 1, 100).ok());
  CHECK_FALSE(t.stalled(150, 100));
  auto s = t.stalled(200, 100);
  REQUIRE(s);
  CHECK(s->find("consumer_index 0, 2, 3 of num_consumers 4") != std::string::npos);
  CHECK(s->find("waited 0 ms") != std::string::npos); // ns -> ms
}

TEST_CASE(
  "job: the first tasks start at round 0 - a later one waits behind a fence every consumer acks") {
  RoundRobinJob job{2, 100};
  REQUIRE(job.join(1, 0).ok());
  CHECK(job.join(2, 0).code() == ErrorCode::already_exists);
  CHECK(job.join(2, 2).code() == ErrorCode::invalid_argument);
  REQUIRE(job.join(2, 1).ok());
  job.add_task(10);
  job.add_task(11);
  CHECK(job.start_round(10) == 0);
  CHECK(job.start_round(11) == 0);
  job.published();
  job.on_poll(1, 40, -1);
  job.on_poll(2, 35, -1);
  job.add_task(12);
  CHECK(job.start_round(12) == -1);
  CHECK(job.fence() == 140);
  CHECK_FALSE(job.on_poll(1, 60, 140)); // consumer 2 has not seen the fence yet
  CHECK(job.start_round(12) == -1);
  CHECK(job.on_poll(2, 150, 140)); // consumer 2 was past it: the fence moves out
  CHECK(job.fence() == 250);
  CHECK_FALSE(job.on_poll(2, 150, 250));
  CHECK(job.on_poll(1, 70, 250)); // both acked the new fence: promoted
  CHECK(job.start_round(12) == 250);
  CHECK(job.fence() == -1);
  // The next pending task gets a fence above the old one, even when nobody moved.
  job.add_task(13);
  CHECK(job.fence() > 250);
  CHECK(job.task_lost(10)); // settled: it ends behind the next fence
  CHECK(job.lost().size() == 1);
  // A leaving consumer no longer holds promotion up.
  CHECK_FALSE(job.on_poll(1, 70, job.fence()));
  CHECK(job.leave(2));
  CHECK(job.start_round(13) >= 0);
}

TEST_CASE("job: tasks created before the first list all start at round 0, whatever order they are "
          "assigned in") {
  RoundRobinJob job{2, 100};
  REQUIRE(job.join(1, 0).ok());
  job.expect(10);
  job.expect(11);
  job.expect(12);
  job.add_task(11);
  CHECK(job.fence() == 0); // consumers plan nothing while 10 and 12 are not assigned
  job.published();
  job.add_task(12);
  job.published();
  CHECK(job.task_lost(10)); // never served a round: nothing to settle
  CHECK(job.lost().empty());
  CHECK(job.fence() == -1);
  CHECK(job.start_round(11) == 0);
  CHECK(job.start_round(12) == 0);
  job.published();
  job.expect(13); // after the first list: pending behind a fence
  job.add_task(13);
  CHECK(job.start_round(13) == -1);
  CHECK(job.fence() == 100);
}

TEST_CASE("planner: a list that would change planned rounds, or drops a task, is an error") {
  RoundRobinPlanner p{0, 2, 4};
  REQUIRE(p.on_tasks({{1, 0}}, -1).ok());
  auto reqs = p.next_requests([](uint64_t) { return true; }, 100);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].count == 4);
  CHECK(p.next_round() == 4);
  CHECK(p.on_tasks({{1, 0}, {2, 2}}, -1).code() == ErrorCode::internal);
  RoundRobinPlanner q{0, 2, 4};
  REQUIRE(q.on_tasks({{1, 0}, {2, -1}}, 3).ok());
  q.next_requests([](uint64_t) { return true; }, 100);
  CHECK(q.next_round() == 3); // stops at the fence
  CHECK(q.waiting_at_fence());
  REQUIRE(q.on_tasks({{1, 0}, {2, 3}}, -1).ok());
  CHECK(q.on_tasks({{2, 3}}, -1).code() == ErrorCode::unavailable);
}

TEST_CASE(
  "planner: replies out of order are handed out in round order - fewer than asked is asked again") {
  RoundRobinPlanner p{1, 2, 6};
  REQUIRE(p.on_tasks({{1, 0}, {2, 0}}, -1).ok());
  auto reqs = p.next_requests([](uint64_t) { return true; }, 100);
  REQUIRE(reqs.size() == 2); // task 1: rounds 0,2,4; task 2: rounds 1,3,5
  const auto& r1 = reqs[0].task == 1 ? reqs[0] : reqs[1];
  const auto& r2 = reqs[0].task == 1 ? reqs[1] : reqs[0];
  REQUIRE(p.on_reply(r2, {el(101), el(103)}, 2).ok());
  CHECK(p.take_ready().empty()); // round 0 missing
  REQUIRE(p.on_reply(r1, {el(100)}, 0).ok());
  CHECK(p.take_ready().empty()); // round 0 came, but not every consumer has it yet
  REQUIRE(p.on_reply(RoundRobinPlanner::Request{1, 1, 0, false, false, true, 0}, {}, 1).ok());
  auto got = p.take_ready();
  REQUIRE(got.size() == 2);
  CHECK(val(got[0]) == 100);
  CHECK(val(got[1]) == 101);
  auto again = p.next_requests([](uint64_t) { return true; }, 100);
  REQUIRE(again.size() == 2);
  for (auto& r : again)
    CHECK(r.first == (r.task == 1 ? 1 : 2));
}

TEST_CASE("mini cluster: rounds stay aligned across seeds while tasks join mid-read") {
  for (uint64_t seed = 1; seed <= mini_cluster_seeds(200); ++seed) {
    CAPTURE(seed);
    const int64_t n = 2 + static_cast<int64_t>(seed % 3);
    MiniCluster c{n, seed};
    c.add_task(1);
    c.add_task(2);
    for (int s = 0; s < 3000; ++s) {
      if (s == 500)
        c.add_task(3);
      if (s == 1500)
        c.add_task(4);
      c.step();
    }
    auto aligned = c.aligned_rounds();
    CHECK(aligned > 100);
    CHECK(c.job.pending() == 0);
    // Every task served rounds once its start round came.
    for (const auto& [id, t] : c.tasks)
      CHECK(t.completed() > 0);
  }
}

TEST_CASE("mini cluster: rounds stay aligned across seeds while workers drain and others join") {
  for (uint64_t seed = 1; seed <= mini_cluster_seeds(200); ++seed) {
    CAPTURE(seed);
    const int64_t n = 2 + static_cast<int64_t>(seed % 3);
    MiniCluster c{n, seed};
    c.add_task(1);
    c.add_task(2);
    for (int s = 0; s < 4000; ++s) {
      if (s == 500)
        c.retire_task(1); // one of two drains
      if (s == 900)
        c.add_task(3); // a new worker (or the drained one, restarted)
      if (s == 1600)
        c.retire_task(2);
      if (s == 2200)
        c.retire_task(3); // the last one drains: no task serves the next rounds...
      if (s == 2400)
        c.add_task(4); // ... until a worker comes: every consumer skips the same rounds
      c.step();
    }
    auto aligned = c.aligned_rounds();
    CHECK(aligned > 100);
    CHECK(c.job.pending() == 0);
    CHECK(c.job.retiring() == 0);
    CHECK(c.gone == std::set<uint64_t>{1, 2, 3}); // each retired task served its rounds and left
    for (const auto& [id, rounds] : c.ends)
      CHECK(c.tasks.at(id).completed() == rounds);
    CHECK(c.tasks.at(4).completed() > 0);
  }
}

TEST_CASE(
  "mini cluster: rounds stay aligned across seeds while workers are lost without draining") {
  for (uint64_t seed = 1; seed <= mini_cluster_seeds(200); ++seed) {
    CAPTURE(seed);
    const int64_t n = 2 + static_cast<int64_t>(seed % 3);
    MiniCluster c{n, seed};
    c.add_task(1);
    c.add_task(2);
    c.add_task(3);
    const int crash_at = 300 + static_cast<int>(seed * 7 % 400);
    std::vector<std::size_t> before;
    for (int s = 0; s < 4000; ++s) {
      if (s == crash_at) {
        c.crash_task(2); // SIGKILL: the rounds it owed some consumers are gone with it
        for (const auto& o : c.out)
          before.push_back(o.size());
      }
      if (s == crash_at + 300)
        c.crash_task(1); // another, while the first may still be settling
      if (s == crash_at + 900)
        c.add_task(4); // a new worker
      c.step();
    }
    // Aligned throughout (a lost task's rounds that not everyone received are skipped by all),
    // and the reading went on after the losses.
    auto aligned = c.aligned_rounds();
    CHECK(aligned > 0);
    for (std::size_t i = 0; i < c.out.size(); ++i)
      CHECK(c.out[i].size() > before[i] + 100);
    CHECK(c.job.lost().empty()); // both settled
    CHECK(c.job.retired().size() == 2);
    CHECK(c.tasks.at(4).completed() > 0);
  }
}

TEST_CASE("mini cluster: rounds stay aligned across seeds while the dispatcher restarts") {
  for (uint64_t seed = 1; seed <= mini_cluster_seeds(300); ++seed) {
    CAPTURE(seed);
    const int64_t n = 2 + static_cast<int64_t>(seed % 3);
    MiniCluster c{n, seed};
    c.add_task(1);
    c.add_task(2);
    const int restart_at = 300 + static_cast<int>(seed * 13 % 500);
    for (int s = 0; s < 4000; ++s) {
      if (s == 200 && seed % 2 == 0)
        c.add_task(3); // joined before the restart (started, or still pending at the restart)
      if (s == restart_at)
        c.restart_job();
      if (s == restart_at + 20 && seed % 3 == 0)
        c.crash_task(2); // lost while its worker had not registered again, or just after
      if (s == restart_at + 400)
        c.add_task(4); // a new worker after the restart
      if (s == restart_at + 600 && seed % 5 == 0) {
        c.restart_job(); // a second restart
      }
      c.step();
    }
    CHECK_FALSE(c.job.recovering());
    CHECK(c.job.pending() == 0);
    auto aligned = c.aligned_rounds();
    CHECK(aligned > 300);
    CHECK(c.tasks.at(4).completed() > 0); // the new worker serves rounds
    if (seed % 2 == 0)
      CHECK(c.tasks.at(3).completed() > 0);
  }
}

TEST_CASE(
  "job recovery: consumers that disagree on a task's start round are an error, not a guess") {
  RoundRobinJob job{2, 10};
  job.start_recovery();
  REQUIRE(job.join(1, 0).ok());
  REQUIRE(job.join(2, 1).ok());
  auto first = job.recover(1, {{7, 0, -1, -1}, {8, 40, -1, -1}}, {}, {});
  REQUIRE(first.ok());
  CHECK_FALSE(*first); // consumer 2 has not said what it knows yet
  CHECK(job.recovering());
  auto second = job.recover(2, {{7, 0, -1, -1}, {8, 48, -1, -1}}, {}, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == ErrorCode::data_loss);
  CHECK(second.status().message().find("start round of task 8 (40 and 48)") != std::string::npos);
}

TEST_CASE("job recovery: the union of what the consumers know - a task only one saw start keeps "
          "its round, one nobody saw start joins behind a fence") {
  RoundRobinJob job{2, 10};
  job.start_recovery();
  job.expect(7);
  job.add_task(7); // listed again before the consumers came back
  job.add_task(9); // pending at the restart: nobody saw it start
  REQUIRE(job.join(1, 0).ok());
  REQUIRE(job.join(2, 1).ok());
  REQUIRE_FALSE(*job.recover(1, {{7, 0, -1, -1}, {8, 40, -1, -1}}, {}, {}));
  job.on_poll(2, 45, -1);
  REQUIRE(*job.recover(2, {{7, 0, -1, -1}}, {{6, 0, 20, 5}}, {})); // it had not seen 8 start yet
  CHECK(job.start_round(7) == 0);
  CHECK(job.start_round(8) == 40);
  CHECK(job.start_round(9) == -1); // pending behind a fence past every consumer's round
  CHECK(job.fence() >= 45);
  REQUIRE(job.retired().size() == 1);
  CHECK(job.retired()[0].served_rounds == 5);
  CHECK(job.recovering()); // task 8 was serving rounds and is not listed again yet
  job.add_task(8);
  CHECK_FALSE(job.recovering());
}

// Two consumers (ids 1 and 2, indexes 0 and 1) and tasks 10 and 11 from round 0, listed and
// polled once (their next rounds `next1`, `next2`).
static RoundRobinJob job_of_two(int64_t lookahead, int64_t next1, int64_t next2) {
  RoundRobinJob job{2, lookahead};
  REQUIRE(job.join(1, 0).ok());
  REQUIRE(job.join(2, 1).ok());
  job.add_task(10);
  job.add_task(11);
  job.published();
  job.on_poll(1, next1, -1);
  job.on_poll(2, next2, -1);
  return job;
}

TEST_CASE("job: a lost task is settled at the rounds every consumer reported receiving") {
  auto job = job_of_two(10, 40, 30);
  CHECK(job.task_lost(10));
  REQUIRE(job.lost().size() == 1);
  CHECK(job.lost()[0].end_round == -1);     // behind a fence
  CHECK(job.lost()[0].served_rounds == -1); // nobody reported yet
  const auto fence = job.fence();
  CHECK(fence == 50);
  job.on_poll(1, 44, fence, {{10, 22}});
  CHECK(job.lost()[0].served_rounds == -1); // consumer 2 has not reported
  CHECK(job.on_poll(2, 41, fence, {{10, 19}}));
  // Both acked the fence and reported: it ends at the fence having served 19 local rounds.
  CHECK(job.lost().empty());
  REQUIRE(job.retired().size() == 1);
  CHECK(job.retired()[0].end_round == 50);
  CHECK(job.retired()[0].served_rounds == 19);
  CHECK(job.fence() == -1);
  // A consumer that leaves before it reports does not hold the settling up.
  CHECK(job.task_lost(11));
  job.on_poll(1, 50, job.fence(), {{11, 25}}); // acks the new fence too
  CHECK(job.lost().size() == 1);
  CHECK(job.leave(2)); // the last report it waited for: settled
  CHECK(job.lost().empty());
  REQUIRE(job.retired().size() == 2);
  CHECK(job.retired()[1].served_rounds == 25);
}

TEST_CASE("round schedule: end rounds - local round counts agree with walking the schedule") {
  RoundSchedule s;
  s.add(1, 0);
  s.add(2, 0);
  s.add(3, 7);
  s.end(1, 12);
  s.end(2, 20);
  s.end(3, 20);
  s.add(4, 25);
  std::map<uint64_t, int64_t> walked;
  for (int64_t r = 0; r < 40; ++r) {
    auto t = s.task_for(r);
    if (r >= 20 && r < 25) {
      CHECK_FALSE(t.has_value()); // nobody serves these rounds
      REQUIRE(s.next_served(r).has_value());
      CHECK(*s.next_served(r) == 25);
      continue;
    }
    REQUIRE(t.has_value());
    CHECK(s.local_rounds(*t, r) == walked[*t]); // local round of r on its task
    ++walked[*t];
  }
  for (uint64_t t : {1, 2, 3, 4})
    CHECK(s.local_rounds(t, 40) == walked[t]);
  CHECK(s.task_for(12) != std::optional<uint64_t>{1});
  CHECK(s.end_round(1) == 12);
  CHECK(s.end_round(4) == -1);
}

TEST_CASE(
  "job: a retired task's end round is told once - one whose worker the job cannot reach yet "
  "is handed out again (end_later)") {
  // The job actor tells a task its end round with end_rounds; after a dispatcher restart the
  // task's worker may not have registered again, and the job keeps the end for later
  // (job_actor_tasks.cpp send_round_ends) instead of dropping it (the task would never drain).
  auto job = job_of_two(100, 40, 40);
  CHECK(job.take_ended().empty());
  REQUIRE(job.retire(10));
  CHECK_FALSE(job.retire(10)); // already retiring
  const int64_t fence = job.fence();
  REQUIRE(fence > 40);
  job.on_poll(1, 50, fence);
  CHECK(job.end_round(10) == -1); // consumer 2 has not seen the fence
  job.on_poll(2, 50, fence);
  REQUIRE(job.end_round(10) >= fence);
  auto ended = job.take_ended();
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].first == 10);
  // Tasks 10 and 11 share the rounds from 0: 10 serves every other one below its end round.
  CHECK(ended[0].second == (job.end_round(10) + 1) / 2);
  CHECK(job.take_ended().empty()); // told once
  job.end_later(10, ended[0].second);
  auto again = job.take_ended();
  REQUIRE(again.size() == 1);
  CHECK(again[0] == ended[0]);
  CHECK(job.take_ended().empty());
}

TEST_CASE("planner: a retired task that leaves before this consumer got its rounds is an error") {
  RoundRobinPlanner p{0, 2, 8};
  REQUIRE(p.on_tasks({{1, 0}, {2, 0}}, -1).ok());
  auto reqs = p.next_requests([](uint64_t) { return true; }, 16);
  REQUIRE(reqs.size() == 2);
  // The job ends task 1 at round 8 (its local rounds 0..3), then lists it as gone.
  REQUIRE(p.on_tasks({{1, 0, 8, false}, {2, 0}}, -1).ok());
  auto lost = p.on_tasks({{2, 0}, {1, 0, 8, true}}, -1);
  CHECK(lost.code() == ErrorCode::unavailable);
  CHECK(lost.message().find("received its 4 rounds (got 0)") != std::string::npos);
}
