// `conveyor run`: the one-command local cluster. It must print its topology, samples and a
// summary, read exactly the expected elements, and leave no child process behind — also when
// interrupted with Ctrl-C.
#include <signal.h>

#include <fstream>
#include <regex>
#include <thread>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/integration/run_nodes.hpp"

using namespace conveyor::testing;

TEST_CASE("run: a local cluster of 2 worker processes reads a DYNAMIC dataset once and cleans up") {
  auto r = run_conveyor({"run", "--workers", "2", "--dataset", "range(20000).map(square)", "--mode",
                         "dynamic", "--progress-ms", "200"},
                        kReadTimeout, "run");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.stdout_text, "dispatcher"));
  CHECK(contains(r.stdout_text, "worker-1"));
  CHECK(contains(r.stdout_text, "worker-2"));
  CHECK(contains(r.stdout_text, "expecting 20000 elements"));
  CHECK(contains(r.stdout_text, "summary: 20000 elements"));
  CHECK(contains(r.stdout_text, "cluster stopped"));
  const auto pids = node_pids(r.stdout_text);
  CHECK(pids.size() == 3);
  for (pid_t pid : pids)
    CHECK_MESSAGE(gone_within(pid, Millis{2000}), "node pid " << pid << " survived");
}

TEST_CASE("run: a user's CONVEYOR_LOG_LEVEL=warning and CONVEYOR_LOG_FORMAT=json do not hide the "
          "nodes' readiness") {
  // The nodes inherit the shell's environment; run reads their readiness from info lines in text.
  auto r = run_to_completion({"/usr/bin/env", "CONVEYOR_LOG_LEVEL=warning",
                              "CONVEYOR_LOG_FORMAT=json", conveyor_binary(), "run", "--workers",
                              "1", "--dataset", "range(100)", "--mode", "dynamic"},
                             kReadTimeout, "run-quiet-env", test_log_dir());
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.stdout_text, "summary: 100 elements"));
}

TEST_CASE("run: OFF mode on 3 in-process workers produces everything three times") {
  auto r = run_conveyor(
    {"run", "--in-process", "--workers", "3", "--dataset", "range(100)", "--mode", "off"},
    kReadTimeout, "run-inproc");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.stdout_text, "summary: 300 elements"));
}

TEST_CASE("run: Ctrl-C stops the reader and every node, and exits with 130") {
  // About 100 s of work: only an interrupt can end it within the test's time.
  auto run = ChildProcess::conveyor({"run", "--workers", "2", "--dataset",
                                     "range(100000).map(sleep_us(us=1000))", "--mode", "dynamic"},
                                    "run-sigint");
  REQUIRE(run.ok());
  auto& child = **run;
  REQUIRE_MESSAGE(child.wait_for_output("first elements:\n  ", kStartTimeout), child.describe());
  const auto pids = node_pids(child.stdout_text());
  REQUIRE_MESSAGE(pids.size() == 3, child.describe());
  child.signal(SIGINT);
  auto code = child.wait_exit(Millis{20000});
  CAPTURE(child.describe());
  CHECK(code == 130);
  CHECK(contains(child.stdout_text(), "cluster stopped"));
  for (pid_t pid : pids)
    CHECK_MESSAGE(gone_within(pid, Millis{2000}), "node pid " << pid << " survived");
}
