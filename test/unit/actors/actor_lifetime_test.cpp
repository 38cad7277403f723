// What ended jobs leave behind on a long-running node: nothing that grows with the number of jobs.
// A worker once kept every task actor it had stopped (then with a thread each): CAF removes the
// link of an actor that receives an exit_msg, so a task stopped with send_exit never reported its
// exit back (worker_actor.cpp, stop). Tasks now run on the process's Executor: neither their
// objects nor the node's threads may grow with the jobs. The dispatcher's side (job actors kept
// alive by their GC timer for a minute) is measured by `conveyor bench jobs`.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "cluster_fixture.hpp"
#include "worker/task_actor.hpp"
#include "test/support/thread_count.hpp"

using namespace conveyor;
using namespace conveyor::test;
using conveyor::testing::thread_count;

TEST_CASE(
  "a worker keeps no task of jobs that ended: 30 short jobs, task objects and threads flat") {
  TestCluster cluster{1};
  auto client = cluster.client();
  auto read_one = [&](ShardingPolicy policy) {
    DistributeOptions o;
    o.policy = policy;
    auto stream = client.distribute(Dataset::range(10), o);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    REQUIRE(ints(read_all(*stream)).size() == 10);
  };
  read_one(ShardingPolicy::off); // warm-up: connections, the node's pools
  read_one(ShardingPolicy::dynamic);
  const auto before = thread_count();
  const int tasks_before = actors::task_actor_objects();
  constexpr int kJobs = 30;
  for (int i = 0; i < kJobs; ++i)
    read_one(i % 2 == 0 ? ShardingPolicy::off : ShardingPolicy::dynamic);
  // A task ends shortly after its job is released: wait (bounded) for the last ones.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((thread_count() > before + 3 || actors::task_actor_objects() > tasks_before) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  INFO("threads before the jobs: " << before << ", after " << kJobs << " jobs: " << thread_count());
  CHECK(thread_count() <= before + 3);
  INFO("task actor objects before the jobs: " << tasks_before
                                              << ", after: " << actors::task_actor_objects());
  CHECK(actors::task_actor_objects() <= tasks_before);
}
