// The stop flag (IteratorContext::stop, pipeline/runtime/stop_flag.hpp): every kernel that can
// loop without returning an element sees it and returns `cancelled` promptly. Each case is a
// pipeline whose first get_next would run (nearly) forever: without the checks it never returns,
// and the watchdog below fails the test binary instead of hanging it.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include <pthread.h>
#include <time.h>

#include "ops_test_util.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/runtime/memory_budget.hpp"

using namespace conveyor;

namespace {

struct Stopped {
  Status status;
  // The pipeline thread's CPU time from setting the flag to get_next returning (CPU, not wall
  // time: a loaded machine may leave the thread unscheduled for longer than the bound).
  std::chrono::nanoseconds after_stop{};
};

std::chrono::nanoseconds cpu_time(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Starts `text`'s first get_next on a thread, sets the stop flag after 30 ms of it, and waits for
// it to return (at most 10 s: past that the pipeline ignores the flag, and the binary exits).
Stopped stop_first_get_next(const std::string& text, MemoryBudget* budget = nullptr) {
  test::register_test_functions();
  auto ds = parse_dataset(text);
  REQUIRE_MESSAGE(ds.ok(), ds.status().to_string());
  std::atomic<bool> stop{false};
  IteratorContext ctx;
  ctx.stop = &stop;
  ctx.memory = budget;
  auto it = ds->make_iterator(ctx);
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  std::promise<Stopped> done;
  auto result = done.get_future();
  std::promise<clockid_t> clock_of_thread;
  std::atomic<int64_t> cpu_at_stop{0}; // ns, set before the flag
  std::thread runner([&] {
    clockid_t clock{};
    pthread_getcpuclockid(pthread_self(), &clock);
    clock_of_thread.set_value(clock);
    Element e;
    bool end = false;
    Status st = (*it)->get_next(e, end);
    Stopped s;
    s.status = st;
    s.after_stop = cpu_time(CLOCK_THREAD_CPUTIME_ID) - std::chrono::nanoseconds(cpu_at_stop.load());
    done.set_value(s);
  });
  const clockid_t clock = clock_of_thread.get_future().get();
  std::this_thread::sleep_for(std::chrono::milliseconds(30)); // let it get deep into its loop
  cpu_at_stop.store(cpu_time(clock).count());
  stop.store(true);
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: `%s` ignored its stop flag for 10 s\n", text.c_str());
    std::_Exit(1); // the thread cannot be stopped otherwise
  }
  runner.join();
  return result.get();
}

// `op` or its input (the source checks the flag too, whichever sees it first) reports it.
void check_stops(const std::string& text, const char* op) {
  CAPTURE(text);
  Stopped s = stop_first_get_next(text);
  CAPTURE(s.status.to_string());
  CHECK(s.status.code() == ErrorCode::cancelled);
  CHECK((s.status.message().find(op) != std::string::npos ||
         s.status.message().find("`range` stopped") != std::string::npos));
  CHECK(s.after_stop < std::chrono::milliseconds(100));
}

constexpr const char* kEndless = "range(9223372036854775807)";

} // namespace

TEST_CASE("stop flag: a stopped batch, padded_batch, shuffle, filter, skip or shard returns "
          "cancelled within 100 ms of CPU") {
  const std::string src = kEndless;
  check_stops(src + ".batch(9223372036854775807)", "`batch`");
  check_stops(src + ".padded_batch(9223372036854775807)", "`padded_batch`");
  check_stops(src + ".shuffle(9223372036854775807)", "`shuffle`");
  check_stops(src + ".filter(mod_eq(m=2, r=5))", "`filter`"); // keeps nothing
  check_stops(src + ".skip(9223372036854775806)", "`skip`");
  check_stops(src + ".shard(9223372036854775807, 9223372036854775806)", "`shard`");

  // Below a map (a user function between elements) and a parallel map.
  check_stops(src + ".map(add(k=1)).batch(9223372036854775807)", "stopped");
  check_stops(src + ".map(add(k=1), num_parallel_calls=4).batch(9223372036854775807)", "stopped");
}

TEST_CASE("stop flag: flat_map, interleave and repeat over endless empty inner datasets stop too") {
  // range_fn(0) is empty: each input element opens a dataset that yields nothing.
  check_stops("from_tensors(0).repeat().flat_map(range_fn)", "stopped");
  check_stops("from_tensors(0).repeat().interleave(range_fn, cycle_length=2)", "stopped");
  check_stops("from_tensors(0).repeat().flat_map(range_fn).repeat()", "stopped");
}

TEST_CASE(
  "stop flag: a source returns cancelled once stopped, and an unstopped pipeline runs as before") {
  test::register_test_functions();
  std::atomic<bool> stop{false};
  IteratorContext ctx;
  ctx.stop = &stop;
  auto ds = parse_dataset("range(10).batch(3)");
  REQUIRE(ds.ok());
  auto it = ds->make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<Element> out;
  CHECK(test::drain(**it, out).ok());
  CHECK(out.size() == 4);
  auto source = parse_dataset("range(10)");
  REQUIRE(source.ok());
  auto range = source->make_iterator(ctx);
  REQUIRE(range.ok());
  Element e;
  bool end = false;
  CHECK((*range)->get_next(e, end).ok());
  stop.store(true);
  Status st = (*range)->get_next(e, end);
  CHECK(st.code() == ErrorCode::cancelled);
  CHECK(st.message().find("`range`") != std::string::npos);

  // ignore_errors passes the cancellation on at once: it is no failed element to drop (dropping
  // it, it asked again a million times and then gave up).
  auto tolerant = parse_dataset("range(10).ignore_errors()");
  REQUIRE(tolerant.ok());
  auto it2 = tolerant->make_iterator(ctx);
  REQUIRE(it2.ok());
  st = (*it2)->get_next(e, end);
  CHECK(st.code() == ErrorCode::cancelled);
  CHECK(st.message().find("giving up") == std::string::npos);
}
