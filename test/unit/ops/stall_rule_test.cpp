// When the executor's supervisor adds a thread (pipeline/runtime/stall_rule.hpp), on made-up
// CPU and run-queue times: a thread that sleeps is blocked, one that waits for a core on a loaded
// machine is not (taking it for blocked added threads until the tenants' weights no longer held,
// issue 38), and threads that compute get company after kLongItems of their own CPU time.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "pipeline/runtime/stall_rule.hpp"

using namespace conveyor;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kWindow = 20 * kMs;
constexpr int64_t kLong = 200 * kMs;

// Threads whose use grows by `cpu` and `wait` ns per window.
struct Threads {
  std::vector<ThreadUse> now;
  explicit Threads(int n) : now(static_cast<std::size_t>(n), ThreadUse{0, 0, true}) {}
  std::vector<ThreadUse> advance(std::size_t i, int64_t cpu, int64_t wait) {
    now[i].cpu += cpu;
    now[i].wait += wait;
    return now;
  }
};

// One window in which every thread runs `cpu` and waits `wait` ns.
StallVerdict window(StallRule& rule, Threads& threads, int64_t cpu, int64_t wait) {
  const auto before = threads.now;
  for (std::size_t i = 0; i < threads.now.size(); ++i)
    threads.advance(i, cpu, wait);
  return rule.on_stalled(before, threads.now, kWindow);
}

} // namespace

TEST_CASE("stall rule: a thread that slept through the window is blocked") {
  StallRule rule(kLong);
  Threads threads(2);
  const auto before = threads.now;
  threads.advance(0, kWindow, 0);       // computes
  threads.advance(1, kMs / 2, kMs / 2); // sleeps (1 ms runnable of 20)
  CHECK(rule.on_stalled(before, threads.now, kWindow) == StallVerdict::blocked);
}

// The cause of issue 38's drift under load: at load 8 on 2 cores a computing thread gets ~1/4 of
// a core; by its CPU time alone (under a tenth of the window) it looked blocked.
TEST_CASE("stall rule: a thread that waited for a core on a loaded machine is not blocked") {
  StallRule rule(kLong);
  Threads threads(2);
  for (int i = 0; i < 100; ++i) // 2 s of stall: ~1 ms on a CPU and 19 ms waiting per window
    CHECK(window(rule, threads, kMs, 19 * kMs) == StallVerdict::none);
}

// The kernel counts a wait when it ends: a thread that has waited for a core all window long
// shows neither CPU nor wait yet, only that it is runnable (24 threads on its core: 13 ms of CPU
// in 1 s).
TEST_CASE("stall rule: a runnable thread whose wait is not counted yet is not blocked") {
  StallRule rule(kLong);
  std::vector<ThreadUse> before{{5 * kMs, 7 * kMs, true, true}};
  std::vector<ThreadUse> after{{5 * kMs, 7 * kMs, true, true}};
  CHECK(rule.on_stalled(before, after, kWindow) == StallVerdict::none);
  after[0].runnable = false; // asleep all along
  CHECK(rule.on_stalled(before, after, kWindow) == StallVerdict::blocked);
  // Next to a sleeping one, it shows the cores are short: no thread for the sleeper either.
  before.push_back(before[0]);
  after.push_back(before[0]);
  CHECK(rule.on_stalled(before, after, kWindow) == StallVerdict::none);
}

// A thread waits for a result that a descheduled one computes (a task's step for its map's
// call): another thread would wait for a core too, and the runnable one goes on by itself.
TEST_CASE("stall rule: a blocked thread gets no company while another waits for a core") {
  StallRule rule(kLong);
  Threads threads(2);
  for (int i = 0; i < 50; ++i) {
    const auto before = threads.now;
    threads.advance(0, kMs / 2, 0);        // sleeps
    threads.advance(1, 4 * kMs, 16 * kMs); // computes a fifth of the time, waits the rest
    CHECK(rule.on_stalled(before, threads.now, kWindow) == StallVerdict::none);
  }
  // Once the cores are free again, the sleeper is replaced.
  const auto before = threads.now;
  threads.advance(0, kMs / 2, 0);
  threads.advance(1, 18 * kMs, 2 * kMs);
  CHECK(rule.on_stalled(before, threads.now, kWindow) == StallVerdict::blocked);
}

TEST_CASE("stall rule: where the run-queue time is unknown, only the CPU time counts") {
  StallRule rule(kLong);
  std::vector<ThreadUse> before{{0, 0, false}};
  std::vector<ThreadUse> after{{kMs, 19 * kMs, false}};
  CHECK(rule.on_stalled(before, after, kWindow) == StallVerdict::blocked);
  before = {{0, 0, false}}; // (a thread whose TID was not known yet at the window's start)
  after = {{kMs, 19 * kMs, true}};
  CHECK(rule.on_stalled(before, after, kWindow) == StallVerdict::blocked);
}

TEST_CASE("stall rule: threads that compute get one more after kLongItems of their CPU time") {
  StallRule rule(kLong);
  Threads threads(2);
  for (int i = 0; i < 9; ++i) // 180 ms each
    CHECK(window(rule, threads, kWindow, 0) == StallVerdict::none);
  CHECK(window(rule, threads, kWindow, 0) == StallVerdict::long_items); // 200 ms
  // The count starts over: the next one comes after another kLongItems.
  CHECK(window(rule, threads, kWindow, 0) == StallVerdict::none);
}

TEST_CASE("stall rule: on a loaded machine kLongItems is CPU time, not wall time") {
  StallRule rule(kLong);
  Threads threads(2);
  // A quarter of a core each: 200 ms of CPU after 800 ms of stall, not after 200 ms.
  for (int i = 0; i < 39; ++i)
    CHECK(window(rule, threads, kWindow / 4, 3 * kWindow / 4) == StallVerdict::none);
  CHECK(window(rule, threads, kWindow / 4, 3 * kWindow / 4) == StallVerdict::long_items);
}

TEST_CASE("stall rule: it takes every thread's kLongItems, and progress starts the count over") {
  StallRule rule(kLong);
  Threads threads(2);
  for (int i = 0; i < 15; ++i) { // thread 1 got half a core: 150 ms in all
    const auto before = threads.now;
    threads.advance(0, kWindow, 0);
    threads.advance(1, kWindow / 2, kWindow / 2);
    CHECK(rule.on_stalled(before, threads.now, kWindow) == StallVerdict::none);
  }
  rule.reset(); // an item started
  for (int i = 0; i < 9; ++i)
    CHECK(window(rule, threads, kWindow, 0) == StallVerdict::none);
  // The threads changed (an extra left): nothing is decided, and the count starts over.
  std::vector<ThreadUse> one{threads.now[0]};
  CHECK(rule.on_stalled(one, threads.now, kWindow) == StallVerdict::none);
  CHECK(window(rule, threads, kWindow, 0) == StallVerdict::none);
}
