// The service core's behaviours replayed on the simulated cluster: the reference's examples
// (range(5) on 2 workers: OFF gives each element twice, DYNAMIC once), shared jobs, epochs,
// an empty dataset, workers that crash, restart or are partitioned away.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "sim/sim.hpp"
#include "pipeline/graph/dataset.hpp"

using namespace std::chrono_literals;
using conveyor::Dataset;
using conveyor::Element;
using conveyor::Fault;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;
using conveyor::SimResult;

namespace {

SimResult run(const Dataset& ds, SimConfig cfg) {
  auto r = conveyor::simulate(ds, cfg);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  INFO(r->summary());
  return std::move(*r);
}

std::vector<int64_t> values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    out.push_back(e[0].as_int64());
  std::sort(out.begin(), out.end());
  return out;
}

SimConfig config(int workers, ShardingPolicy policy, uint64_t seed = 1) {
  SimConfig cfg;
  cfg.workers = workers;
  cfg.options.policy = policy;
  cfg.seed = seed;
  return cfg;
}

} // namespace

TEST_CASE("OFF: range(5) on 2 simulated workers gives every element twice, for every seed") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto r = run(Dataset::range(5), config(2, ShardingPolicy::off, seed));
    CHECK_MESSAGE(r.ok(), r.summary());
    CHECK(values(r.elements()) == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
    REQUIRE(r.consumers.size() == 1);
    CHECK(r.consumers[0].status.ok());
    // Per worker, the stream is the dataset in order.
    std::map<std::string, std::vector<int64_t>> per_worker;
    for (std::size_t i = 0; i < r.consumers[0].elements.size(); ++i)
      per_worker[r.consumers[0].sources[i]].push_back(r.consumers[0].elements[i][0].as_int64());
    REQUIRE(per_worker.size() == 2);
    for (const auto& [worker, seq] : per_worker)
      CHECK(seq == std::vector<int64_t>{0, 1, 2, 3, 4});
  }
}

TEST_CASE("DYNAMIC: range(5) on 2 simulated workers gives every element once, for every seed") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto r = run(Dataset::range(5), config(2, ShardingPolicy::dynamic, seed));
    CHECK_MESSAGE(r.ok(), r.summary());
    CHECK(values(r.elements()) == std::vector<int64_t>{0, 1, 2, 3, 4});
  }
}

TEST_CASE("DYNAMIC: two consumers sharing a named job together get every element once") {
  auto cfg = config(3, ShardingPolicy::dynamic, 4);
  cfg.consumers = 2;
  auto r = run(Dataset::range(50), cfg);
  CHECK_MESSAGE(r.ok(), r.summary());
  std::vector<int64_t> expected(50);
  for (int i = 0; i < 50; ++i)
    expected[static_cast<std::size_t>(i)] = i;
  CHECK(values(r.elements()) == expected);
  CHECK(r.consumers[0].status.ok());
  CHECK(r.consumers[1].status.ok());
}

TEST_CASE("DYNAMIC: repeat(3) hands every split out once per epoch") {
  auto r = run(Dataset::range(10).repeat(3), config(2, ShardingPolicy::dynamic, 5));
  CHECK_MESSAGE(r.ok(), r.summary());
  std::vector<int64_t> expected;
  for (int i = 0; i < 10; ++i)
    for (int k = 0; k < 3; ++k)
      expected.push_back(i);
  CHECK(values(r.elements()) == expected);
}

TEST_CASE("an empty dataset ends at once in both modes") {
  for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    auto r = run(Dataset::range(0), config(2, policy, 6));
    CHECK_MESSAGE(r.ok(), r.summary());
    CHECK(r.elements().empty());
    CHECK(r.consumers[0].status.ok());
  }
}

TEST_CASE("DYNAMIC: a worker that crashes mid-job: its splits are read again, nothing twice") {
  auto cfg = config(3, ShardingPolicy::dynamic, 7);
  cfg.faults.push_back(Fault::crash("worker-1", 0us).at_fraction(0.3));
  cfg.options.max_outstanding_requests = 4;
  auto r = run(Dataset::range(300), cfg);
  CHECK_MESSAGE(r.ok(), r.summary());
  REQUIRE(r.faults_injected.size() == 1);
  auto got = values(r.elements());
  CHECK(std::adjacent_find(got.begin(), got.end()) == got.end()); // no duplicates
  CHECK(got.size() == 300);                                       // none lost: exactly-once
  CHECK(r.consumers[0].ended);
  CHECK(r.consumers[0].status.ok());
}

TEST_CASE("OFF, on_worker_loss fail: a worker lost mid-read fails the read, naming the worker - "
          "never short and OK") {
  auto cfg = config(2, ShardingPolicy::off, 8);
  cfg.consumer_step = 1000us; // a slow trainer: the job is still running when worker-1 is back
  cfg.options.max_outstanding_requests = 2;
  cfg.options.on_worker_loss = "fail";
  cfg.faults.push_back(Fault::restart("worker-1", 0us, 100ms).at_fraction(0.2));
  auto r = run(Dataset::range(100), cfg);
  CHECK_MESSAGE(r.ok(), r.summary()); // the invariants hold: ordered per incarnation, no repeat
  REQUIRE(r.consumers[0].ended);
  CHECK_FALSE(r.consumers[0].status.ok());
  CHECK(r.consumers[0].status.message().find("worker-1:6000") != std::string::npos);
}

TEST_CASE("OFF, on_worker_loss continue: a worker restarted mid-read - the read ends OK, its new "
          "task reads a whole copy") {
  auto cfg = config(2, ShardingPolicy::off, 8);
  cfg.consumer_step = 1000us; // a slow trainer: the job is still running when worker-1 is back
  cfg.options.max_outstanding_requests = 2;
  cfg.faults.push_back(Fault::restart("worker-1", 0us, 100ms).at_fraction(0.2));
  auto r = run(Dataset::range(100), cfg);
  // The invariants hold: per incarnation ordered and unrepeated, and the short copy counted.
  CHECK_MESSAGE(r.ok(), r.summary());
  REQUIRE(r.consumers[0].ended);
  CHECK_MESSAGE(r.consumers[0].status.ok(), r.consumers[0].status.to_string());
  CHECK(r.consumers[0].lost_tasks == 1);
  std::map<std::string, int64_t> per_source;
  for (const auto& s : r.consumers[0].sources)
    ++per_source[s];
  int64_t whole = 0;
  for (const auto& [src, n] : per_source)
    whole += n == 100;
  CHECK_MESSAGE(whole == 2, r.summary()); // worker-0's and worker-1's new task's
}

TEST_CASE("a partition that heals before the connection timeout loses nothing") {
  auto cfg = config(2, ShardingPolicy::dynamic, 9);
  cfg.options.max_outstanding_requests = 2;
  cfg.consumer_step = 500us;
  cfg.faults.push_back(Fault::partition("worker-0", "consumer-0", 0us, 1s).at_fraction(0.2));
  cfg.faults.push_back(Fault::partition("worker-1", "dispatcher", 0us, 2s).at_fraction(0.4));
  auto r = run(Dataset::range(200), cfg);
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.faults_injected.size() == 2);
  std::vector<int64_t> expected(200);
  for (int i = 0; i < 200; ++i)
    expected[static_cast<std::size_t>(i)] = i;
  CHECK(values(r.elements()) == expected); // TCP kept everything: only delayed
  CHECK(r.virtual_time > 2s);
}

TEST_CASE("a consumer that crashes leaves no job behind") {
  auto cfg = config(2, ShardingPolicy::dynamic, 10);
  cfg.consumers = 2;
  cfg.consumer_step = 500us;
  cfg.options.max_outstanding_requests = 2;
  cfg.faults.push_back(Fault::crash("consumer-1", 0us).at_fraction(0.3));
  auto r = run(Dataset::range(200), cfg);
  CHECK_MESSAGE(r.ok(), r.summary()); // includes the leak check after the job's GC time
  CHECK(r.consumers[0].status.ok());
  CHECK_FALSE(r.consumers[1].status.ok());
}

TEST_CASE("the simulated run reports what it did") {
  auto r = run(Dataset::range(20), config(2, ShardingPolicy::dynamic, 11));
  CHECK(r.seed == 11);
  CHECK(r.trace_hash.size() == 16);
  CHECK(r.steps > 0);
  CHECK(r.messages > 0);
  CHECK(r.trace.empty()); // only with keep_trace
  CHECK(r.replay_command.find("conveyor-sim --workers 2 --consumers 1 --dataset 'range(20)' "
                              "--mode dynamic --seed 11") == 0);
  CHECK(r.summary().find("seed 11: PASS  20 elements") == 0);
}

TEST_CASE("bad simulator configurations are refused with a message naming the problem") {
  auto bad = [](SimConfig cfg, const char* what) {
    auto r = conveyor::simulate(Dataset::range(3), cfg);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == conveyor::ErrorCode::invalid_argument);
    CHECK_MESSAGE(r.status().message().find(what) != std::string::npos, r.status().message());
  };
  auto cfg = config(0, ShardingPolicy::off);
  bad(cfg, "`workers` must be 1..10000, got 0");
  cfg = config(2, ShardingPolicy::off);
  cfg.faults.push_back(Fault::crash("worker-7", 1ms));
  bad(cfg, "no node \"worker-7\"");
  cfg = config(2, ShardingPolicy::off);
  cfg.faults.push_back(Fault::restart("consumer-0", 1ms, 1ms));
  bad(cfg, "consumers can crash but not restart");
  cfg = config(2, ShardingPolicy::off);
  cfg.random_faults = "explode:2";
  bad(cfg, "unknown kind");
  cfg = config(2, ShardingPolicy::file);
  bad(cfg, "OFF and DYNAMIC");
  cfg = config(2, ShardingPolicy::off);
  cfg.plant_bug = "nope";
  bad(cfg, "unknown planted bug");
  auto infinite = conveyor::simulate(Dataset::range(3).repeat(), config(1, ShardingPolicy::off));
  REQUIRE_FALSE(infinite.ok());
  CHECK(infinite.status().message().find("finite") != std::string::npos);
}

TEST_CASE(
  "a cluster with an admission token passes it everywhere: jobs to workers, consumers to tasks") {
  // Workers refuse assign_task and get_elements without the token: a hop that forgot it fails
  // the read with permission_denied.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
      auto cfg = config(2, policy, seed);
      cfg.auth_token = "sim-secret";
      auto r = run(Dataset::range(5), cfg);
      CHECK_MESSAGE(r.ok(), r.summary());
      REQUIRE(r.consumers.size() == 1);
      CHECK_MESSAGE(r.consumers[0].status.ok(), r.consumers[0].status.to_string());
      CHECK(r.elements().size() == (policy == ShardingPolicy::off ? 10u : 5u));
    }
  }
}

TEST_CASE(
  "named DYNAMIC job: late consumers read one iteration, no duplicates across a repetition") {
  // Consumer i starts i x stagger late: mid-read, or after the others read everything and the
  // job ended. tf.data keys a named job by (name, iteration): a late consumer of iteration 0
  // reads what is left of it, or end of sequence, never the data again (issue 32). The
  // invariants flag a consumer in another job than the others (Observation::one_iteration).
  std::vector<int64_t> expected(200);
  for (int i = 0; i < 200; ++i)
    expected[static_cast<std::size_t>(i)] = i;
  for (auto stagger : {0ms, 5ms, 50ms, 3000ms}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      CAPTURE(stagger.count());
      auto cfg = config(2, ShardingPolicy::dynamic, seed);
      cfg.consumers = 3;
      cfg.consumer_stagger = stagger;
      // The ended iteration is kept until job GC: the last consumer starts 6 s late at most.
      cfg.job_gc_timeout = std::chrono::seconds(10);
      auto r = run(Dataset::range(200), cfg);
      CHECK_MESSAGE(r.ok(), r.summary() << "\n" << r.replay_command);
      CHECK_MESSAGE(values(r.elements()) == expected, r.summary());
      for (const auto& c : r.consumers)
        CHECK_MESSAGE(c.status.ok(), c.status.to_string());
    }
  }
}

TEST_CASE("named job sim: consumer_stagger needs several consumers") {
  auto cfg = config(2, ShardingPolicy::dynamic);
  cfg.consumer_stagger = 5ms;
  auto r = conveyor::simulate(Dataset::range(5), cfg);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("`consumer_stagger`") != std::string::npos);
}
