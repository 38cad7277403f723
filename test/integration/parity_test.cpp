// tf.data parity on real processes (issue 32): concatenate and random read through the service
// (DYNAMIC over several sources: multi_source_dynamic_test.cpp), and job GC / client timeouts
// as the reference's: a job is released only --job-gc-timeout after its last consumer went
// (also when it went by missing its heartbeats), and an iteration whose consumer heartbeats is
// kept however long it reads.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>

#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

std::vector<std::string> numbers(int64_t begin, int64_t end) {
  std::vector<std::string> out;
  for (int64_t i = begin; i < end; ++i)
    out.push_back(std::to_string(i));
  return out;
}

} // namespace

TEST_CASE("parity: concatenate and random read through the service") {
  Cluster cluster(1);
  auto concat = cluster.read("range(50).concatenate(range(50, 100))", {"--mode", "off"});
  REQUIRE_MESSAGE(concat.exit_code == 0, concat.describe);
  CHECK(concat.lines == numbers(0, 100)); // one worker: in order

  // A seeded random dataset is the same sequence on the worker as locally.
  const std::string random = "random(seed=7).take(20)";
  auto remote = cluster.read(random, {"--mode", "off"});
  REQUIRE_MESSAGE(remote.exit_code == 0, remote.describe);
  REQUIRE(remote.lines.size() == 20);
  CHECK(sorted(remote.lines) == expected_sorted_lines(random));
}

TEST_CASE("job GC: a job whose reader stopped heartbeating is released --job-gc-timeout later") {
  // The reader dies without a word: the job drops it after --client-timeout, and only then
  // starts counting --job-gc-timeout (before, the same heartbeat check released it at once).
  constexpr int kGcMs = 3000;
  Cluster cluster(1, {"--client-timeout", "1000", "--job-gc-timeout", std::to_string(kGcMs)});
  auto reader = cluster.start_read("range(100000000).map(sleep_us(us=1000))",
                                   {"--mode", "off", "--job-name", "gc"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(20, Millis{30000}), reader->describe());
  reader->signal(SIGKILL);
  REQUIRE(reader->wait_exit(Millis{10000}).has_value());
  auto& dispatcher = cluster.dispatcher();
  REQUIRE_MESSAGE(dispatcher.wait_for_output("sent no heartbeat", Millis{15000}),
                  cluster.describe());
  const auto dropped = std::chrono::steady_clock::now();
  REQUIRE_MESSAGE(dispatcher.wait_for_output("released (no consumer for the job's GC timeout)",
                                             Millis{kGcMs + 15000}),
                  cluster.describe());
  const auto released = std::chrono::steady_clock::now();
  const auto waited =
    std::chrono::duration_cast<std::chrono::milliseconds>(released - dropped).count();
  // Timers run early by no more than scheduling noise; 500 ms of slack for the log polling.
  CHECK_MESSAGE(waited >= kGcMs - 500, "released " << waited << " ms after the drop\n"
                                                   << cluster.describe());
}

TEST_CASE("job GC: a named DYNAMIC job is kept while its consumer heartbeats, past both timeouts") {
  // ~2 s of reading (4000 x 1 ms over 2 workers) with --client-timeout 1000 and
  // --job-gc-timeout 200: the active iteration stays, and every element comes exactly once.
  Cluster cluster(2, {"--client-timeout", "1000", "--job-gc-timeout", "200"});
  const auto started = std::chrono::steady_clock::now();
  auto read = cluster.read("range(4000).map(sleep_us(us=1000))",
                           {"--mode", "dynamic", "--job-name", "kept"}, kReadTimeout);
  REQUIRE_MESSAGE(read.exit_code == 0, read.describe);
  CHECK(std::chrono::steady_clock::now() - started > std::chrono::milliseconds(1500));
  CHECK(sorted(read.lines) == sorted(numbers(0, 4000)));
  CHECK_MESSAGE(cluster.dispatcher().stderr_text().find("sent no heartbeat") == std::string::npos,
                cluster.describe());
  CHECK_MESSAGE(cluster.dispatcher().stderr_text().find("GC timeout") == std::string::npos,
                cluster.describe());
}

TEST_CASE("parity: --external-state-policy WARN, IGNORE and FAIL for a dataset with random") {
  Cluster cluster(1);
  const std::string dataset = "range(3).map(square).concatenate(random(seed=1).take(2))";
  const std::string what = "random(seed=1) depends on random seed generator resource.";
  auto warned = cluster.read(dataset, {"--mode", "off"}); // WARN is the default
  REQUIRE_MESSAGE(warned.exit_code == 0, warned.describe);
  CHECK(warned.lines.size() == 5);
  CHECK_MESSAGE(warned.stderr_text.find(what) != std::string::npos, warned.describe);

  auto ignored = cluster.read(dataset, {"--mode", "off", "--external-state-policy", "IGNORE"});
  REQUIRE_MESSAGE(ignored.exit_code == 0, ignored.describe);
  CHECK(ignored.lines.size() == 5);
  CHECK_MESSAGE(ignored.stderr_text.find(what) == std::string::npos, ignored.describe);

  auto failed = cluster.read(dataset, {"--mode", "off", "--external-state-policy", "fail"});
  CHECK_MESSAGE(failed.exit_code.value_or(0) != 0, failed.describe);
  CHECK_MESSAGE(failed.stderr_text.find(what) != std::string::npos, failed.describe);
  CHECK(failed.lines.empty());

  auto bad = cluster.read(dataset, {"--mode", "off", "--external-state-policy", "STRICT"});
  CHECK_MESSAGE(bad.exit_code.value_or(0) != 0, bad.describe);
  CHECK_MESSAGE(bad.stderr_text.find("`--external-state-policy` must be WARN, IGNORE or FAIL") !=
                  std::string::npos,
                bad.describe);
}
