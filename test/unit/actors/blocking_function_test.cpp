// A user function that blocks (a sleep, a slow file system, a deadlock in user code) holds only
// its own task: other jobs on the same worker are still served, and the worker keeps its
// heartbeats. Tasks run on the process's Executor (worker/executor_scheduled.hpp), never on the
// actor system's scheduler threads, which the test nodes have two of; the Executor adds a thread
// while all of its threads are inside blocked items.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "cluster_fixture.hpp"
#include "conveyor/functions.hpp"
#include "pipeline/runtime/executor.hpp"
#include "test/support/gate.hpp"

using namespace conveyor;
using namespace conveyor::test;
using namespace std::chrono_literals;

namespace {

// Calls of `test_block_until_released` wait here until the test opens the gate.
conveyor::testing::Gate& gate() {
  static conveyor::testing::Gate g;
  return g;
}

// Registers a test helper map (once per process for each name: the registry refuses repeats).
void register_map_once(std::once_flag& once, const char* name, const char* doc, MapFn fn) {
  std::call_once(once, [&] {
    FunctionDef d;
    d.name = name;
    d.kind = FunctionKind::map;
    d.doc = doc;
    d.map = std::move(fn);
    Status st = FunctionRegistry::global().add(std::move(d));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
  });
}

void register_blocking_map() {
  static std::once_flag once;
  register_map_once(once, "test_block_until_released",
                    "test helper: blocks until the test releases it",
                    [](const Element& e, const Params&) -> Expected<Element> {
                      gate().wait(60s); // bounded: a failing test still ends
                      return e;
                    });
}

} // namespace

TEST_CASE("a blocked user function holds only its own task: other jobs on the worker are served") {
  register_blocking_map();
  TestCluster cluster{1};
  auto client = cluster.client();
  DistributeOptions off;
  off.policy = ShardingPolicy::off;

  // More than the worker's scheduler threads (test_network: 2) and the Executor's base threads.
  const int kBlocked = std::max(3, Executor::shared().base_threads() + 1);
  std::vector<ElementStream> blocked;
  for (int i = 0; i < kBlocked; ++i) {
    auto s = client.distribute(Dataset::range(2).map("test_block_until_released"), off);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    blocked.push_back(std::move(*s));
  }
  REQUIRE_MESSAGE(gate().wait_for_waiters(kBlocked, 30s),
                  "only " << gate().waiting() << " of " << kBlocked << " calls started");

  // Every blocked task is inside the user function now; an unrelated job still runs.
  auto fast = client.distribute(Dataset::range(10), off);
  REQUIRE_MESSAGE(fast.ok(), fast.status().to_string());
  std::vector<int64_t> got;
  for (;;) {
    Element e;
    bool end = false;
    Status st = fast->next(e, end, 20s);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      break;
    got.push_back(e[0].as_int64());
  }
  CHECK(got == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  gate().open();
  // The blocked jobs finish too: the worker was never evicted while they blocked.
  for (auto& s : blocked)
    CHECK(sorted(ints(read_all(s))) == std::vector<int64_t>{0, 1});
}

namespace {

std::atomic<int>& spins_started() {
  static std::atomic<int> n{0};
  return n;
}

// `test_spin_1s`: computes (spins on the clock) for a second, then returns its input.
void register_spinning_map() {
  static std::once_flag once;
  register_map_once(once, "test_spin_1s", "test helper: spins for a second",
                    [](const Element& e, const Params&) -> Expected<Element> {
                      ++spins_started();
                      const auto until = std::chrono::steady_clock::now() + 1s;
                      while (std::chrono::steady_clock::now() < until) {
                      }
                      return e;
                    });
}

} // namespace

// A slow function does not block, it computes: the Executor gives the other jobs a thread once no
// item started for Executor::kLongItems. Without that, each slow task's turn (16 messages, each a
// one-second element) held a pool thread for up to ~16 s before the unrelated job ran.
TEST_CASE(
  "a slow CPU-bound user function holds only its own task: other jobs on the worker are served") {
  register_spinning_map();
  TestCluster cluster{1};
  auto client = cluster.client();
  DistributeOptions off;
  off.policy = ShardingPolicy::off;

  const int kSlow = std::max(3, Executor::shared().base_threads() + 1);
  const int before = spins_started().load();
  std::vector<ElementStream> slow;
  for (int i = 0; i < kSlow; ++i) {
    auto s = client.distribute(Dataset::range(1000).map("test_spin_1s"), off);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    slow.push_back(std::move(*s));
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (spins_started().load() - before < kSlow && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  REQUIRE_MESSAGE(spins_started().load() - before >= kSlow, "the slow jobs did not all start");

  const auto start = std::chrono::steady_clock::now();
  auto fast = client.distribute(Dataset::range(10), off);
  REQUIRE_MESSAGE(fast.ok(), fast.status().to_string());
  CHECK(ints(read_all(*fast)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const auto took =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  INFO("the unrelated job took " << took.count() << " ms next to " << kSlow << " slow ones");
  CHECK(took < 4s); // ~0.2 s here; 7-15 s without the kLongItems rule (2-core VM)
  slow.clear();     // (their tasks stop after the element they compute)
}
