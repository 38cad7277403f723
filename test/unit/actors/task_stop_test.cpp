// A task whose job ended stops its pipeline (TaskLimits::stop, set by the worker with stop_task)
// within 100 ms of work, even deep in a batch that would never return: the issue-33 case
// range(2**63-1).batch(2**63-1) kept a worker's thread at 100% CPU until the OOM killer.
#include <doctest/doctest.h>

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include "pipeline/graph/text_form.hpp"
#include "worker/task_runner.hpp"

using namespace conveyor;
using namespace conveyor::actors;

namespace {

std::chrono::nanoseconds cpu_time(clockid_t clock) {
  timespec ts{};
  REQUIRE(clock_gettime(clock, &ts) == 0);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

} // namespace

TEST_CASE("task stop: a stopped task's endless batch ends within 100 ms of its thread's CPU, "
          "failing with cancelled") {
  for (const char* text : {"range(9223372036854775807).batch(9223372036854775807)",
                           "range(9223372036854775807).map(add(k=1), "
                           "num_parallel_calls=2).shuffle(9223372036854775807)"}) {
    CAPTURE(text);
    TaskLimits limits;
    limits.stop = std::make_shared<std::atomic<bool>>(false);
    TaskRunner runner{ShardingPolicy::off, Compression::none, limits};
    auto ds = parse_dataset(text);
    REQUIRE_MESSAGE(ds.ok(), ds.status().to_string());
    REQUIRE(runner.start(*ds, nullptr).ok());

    std::promise<std::pair<TaskRunner::Step, std::chrono::nanoseconds>> done; // and its CPU then
    auto result = done.get_future();
    std::promise<clockid_t> clock_of_thread;
    std::thread producer([&] {
      clockid_t clock{};
      pthread_getcpuclockid(pthread_self(), &clock);
      clock_of_thread.set_value(clock);
      const TaskRunner::Step step = runner.produce();
      done.set_value({step, cpu_time(CLOCK_THREAD_CPUTIME_ID)});
    });
    const clockid_t clock = clock_of_thread.get_future().get();
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // deep in the batch
    const auto cpu_at_stop = cpu_time(clock);
    limits.stop->store(true); // what the worker does with stop_task
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      std::fprintf(stderr, "FAILED: a stopped task's pipeline ran on for 10 s\n");
      std::_Exit(1); // the thread cannot be stopped otherwise
    }
    const auto [step, cpu_at_end] = result.get();
    const auto cpu_after_stop = cpu_at_end - cpu_at_stop;
    CHECK(step == TaskRunner::Step::failed);
    producer.join();
    CAPTURE(std::chrono::duration_cast<std::chrono::microseconds>(cpu_after_stop).count());
    CHECK(cpu_after_stop < std::chrono::milliseconds(100));
    CHECK(runner.error().code() == ErrorCode::cancelled);
  }
}
