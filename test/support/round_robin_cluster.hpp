// A miniature coordinated-read cluster without actors (coordinated/round_robin.hpp), shared by
// test/unit/actors/round_robin_test.cpp (production objects) and test/sim/planted_bug_test.cpp
// (the simulator's hooked build, where the planted bug skip-round can act on it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "coordinated/round_robin.hpp"

namespace conveyor::test_support {

using actors::RoundRobinJob;
using actors::RoundRobinPlanner;
using actors::RoundRobinTaskRounds;
using actors::RoundSchedule;

inline Element el(int64_t v) { return Element{Tensor::scalar(v)}; }
inline int64_t val(const Element& e) { return e.components.at(0).as_int64(); }

// A miniature cluster: one RoundRobinJob, tasks with RoundRobinTaskRounds whose "pipeline" is the
// group dataset (task t's k-th group is [x*N .. x*N+N-1] for x = t * 1'000'000 + k), and N
// planners. Messages are delivered in a seeded random order; polls go through the job.
struct MiniCluster {
  int64_t n;
  RoundRobinJob job;
  std::map<uint64_t, RoundRobinTaskRounds> tasks;
  std::map<uint64_t, int64_t> next_group;
  std::vector<RoundRobinPlanner> planners;
  std::vector<std::vector<int64_t>> out;
  std::mt19937_64 rng;
  int64_t now = 0;

  int64_t lookahead;
  std::vector<uint64_t> ids; // each consumer's id at the job

  MiniCluster(int64_t consumers, uint64_t seed, int64_t lookahead_rounds = 16)
    : n(consumers), job(consumers, lookahead_rounds), rng(seed), lookahead(lookahead_rounds) {
    for (int64_t i = 0; i < n; ++i) {
      ids.push_back(static_cast<uint64_t>(i + 1));
      REQUIRE(job.join(ids.back(), i).ok());
      planners.emplace_back(i, n, 8);
      out.emplace_back();
    }
  }

  void add_task(uint64_t id) {
    tasks.emplace(id, RoundRobinTaskRounds{n});
    next_group[id] = 0;
    job.add_task(id);
  }

  // A task's worker drains: the job retires it; once it has its last round and every consumer
  // took its rounds, it leaves (its worker is gone).
  std::map<uint64_t, int64_t> ends; // task -> local rounds it serves in all
  std::set<uint64_t> gone;          // its worker left: drained, or crashed (crash_task)
  void retire_task(uint64_t id) { job.retire(id); }
  void settle_retired() {
    for (const auto& [task, rounds] : job.take_ended())
      ends[task] = rounds;
    for (const auto& [task, rounds] : ends)
      if (!gone.count(task) && tasks.at(task).all_confirmed(rounds)) {
        job.task_lost(task);
        gone.insert(task);
      }
  }
  // A task's worker dies at once (SIGKILL): what it held for consumers is gone with it.
  void crash_task(uint64_t id) {
    gone.insert(id);
    job.task_lost(id);
  }

  // One consumer polls the job: gets the list as the job has it now, then reports.
  void poll(int64_t i) {
    settle_retired();
    std::vector<RoundRobinPlanner::TaskEntry> list;
    std::set<uint64_t> off; // lost or retired as the job says
    for (const auto& s : job.retired()) {
      off.insert(s.task);
      list.push_back({s.task, s.start_round, s.end_round, true, false, s.served_rounds});
    }
    for (const auto& s : job.lost()) {
      off.insert(s.task);
      list.push_back({s.task, s.start_round, s.end_round, false, true, s.served_rounds});
    }
    for (const auto& [id, t] : tasks)
      if (!gone.count(id) && !off.count(id))
        list.push_back({id, job.start_round(id), job.end_round(id), false, false, -1});
    job.published();
    if (!job.recovering()) { // (a recovering job's list says nothing of the rounds)
      auto st = planners[i].on_tasks(list, job.fence());
      REQUIRE_MESSAGE(st.ok(), st.to_string());
    }
    job.on_poll(ids[static_cast<std::size_t>(i)], planners[i].next_round(), planners[i].fence(),
                planners[i].lost_reports());
    settle_retired();
  }

  // The dispatcher restarts: the job starts over in recovery. The consumers join it again in a
  // random order, each with what its planner knows, while the live tasks are listed again at
  // random points (their workers register again); the tasks and planners go on meanwhile.
  std::vector<uint64_t> relist; // live tasks the new job has not listed yet
  uint64_t next_id = 100;
  void restart_job() {
    job = RoundRobinJob{n, lookahead};
    job.start_recovery();
    relist.clear();
    for (const auto& [id, t] : tasks)
      if (!gone.count(id))
        relist.push_back(id);
    std::shuffle(relist.begin(), relist.end(), rng);
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      order[static_cast<std::size_t>(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (auto i : order) {
      ids[static_cast<std::size_t>(i)] = next_id++;
      REQUIRE(job.join(ids[static_cast<std::size_t>(i)], i).ok());
      auto known = planners[static_cast<std::size_t>(i)].known_schedule();
      auto done =
        job.recover(ids[static_cast<std::size_t>(i)], known.active, known.gone, known.lost);
      REQUIRE_MESSAGE(done.ok(), done.status().to_string());
      for (int k = 0; k < 3; ++k)
        step(); // the others read on meanwhile
    }
  }
  void relist_one() {
    while (!relist.empty() && gone.count(relist.back()))
      relist.pop_back();
    if (relist.empty())
      return;
    job.add_task(relist.back());
    relist.pop_back();
  }

  // One consumer sends its requests and gets whatever the tasks can answer at once.
  void read(int64_t i) {
    auto& p = planners[i];
    // A task whose worker left cannot be reached (its request would fail).
    auto reqs = p.next_requests([&](uint64_t task) { return !gone.count(task); }, 4);
    for (auto& r : reqs) {
      REQUIRE_FALSE(gone.count(r.task));
      auto& t = tasks.at(r.task);
      if (auto e = ends.find(r.task); e != ends.end())
        REQUIRE(r.first + r.count <= e->second); // never past the task's last round
      if (r.confirm) { // as the task actor: "I have every round below r.first"
        t.confirm(i, r.first);
        REQUIRE(p.on_reply(r, {}, t.committed()).ok());
        continue;
      }
      REQUIRE(t.ask(i, r.first, r.count, now).ok());
      while (t.completable() > 0) {
        std::vector<Element> round;
        int64_t x = static_cast<int64_t>(r.task) * 1000000 + next_group[r.task]++;
        for (int64_t k = 0; k < n; ++k)
          round.push_back(el(x * n + k));
        t.complete(std::move(round), now);
      }
      auto elements = t.take(i, r.count, 1 << 20);
      REQUIRE(p.on_reply(r, std::move(elements), t.committed()).ok());
    }
    for (auto& e : p.take_ready()) {
      out[i].push_back(val(e));
    }
    p.on_ack(static_cast<int64_t>(out[i].size()) - acked(i));
    acked_[i] = static_cast<int64_t>(out[i].size());
  }
  std::map<int64_t, int64_t> acked_;
  int64_t acked(int64_t i) { return acked_[i]; }

  void step() {
    ++now;
    if (!relist.empty() && rng() % 16 == 0)
      relist_one();
    auto i = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    if (rng() % 4 == 0)
      poll(i);
    else
      read(i);
  }

  // The check: the consumers' outputs taken round-robin; every group of N consecutive.
  int64_t aligned_rounds() const {
    std::size_t rounds = out[0].size();
    for (const auto& o : out)
      rounds = std::min(rounds, o.size());
    for (std::size_t r = 0; r < rounds; ++r)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = out[static_cast<std::size_t>(i)][r];
        const int64_t first = out[0][r];
        if (first % n != 0 || v != first + i)
          return -static_cast<int64_t>(r) - 1;
      }
    return static_cast<int64_t>(rounds);
  }
};

} // namespace conveyor::test_support
