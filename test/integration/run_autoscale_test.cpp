// `conveyor run --autoscale`: run follows the dispatcher's autoscaler with worker processes. A
// reader waiting on a CPU-bound map gets a second worker; a trainer that the workers outpace
// lets one drain (SIGTERM); either way the DYNAMIC read ends OK with exactly N elements (only a
// loss and a repeat that cancel out could hide; the simulator's drain sweeps check identities),
// and no node outlives the command. The flags are refused where they would be ignored.
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/integration/run_nodes.hpp"

using namespace conveyor::testing;

namespace {

void check_bad_arguments(std::vector<std::string> args, const std::string& needle) {
  auto r = run_conveyor(args, Millis{20000}, "run-autoscale-badargs");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code.has_value());
  CHECK(*r.exit_code == 2);
  CHECK(contains(r.stderr_text, needle));
}

} // namespace

TEST_CASE("run --autoscale: a reader waiting on a CPU-bound map gets a second worker, and every "
          "DYNAMIC element arrives once") {
  // One worker makes a few hundred elements/s; the reader takes them as fast as they come, so
  // it waits on the worker nearly all the time: the autoscaler climbs at its first decision.
  // Worker-2 takes splits nobody holds: the job's splits are sized for the autoscaler's
  // max-workers, and the first task hands back what it read ahead beyond its window (before,
  // with 8 splits of range(1500) and up to 4 held ahead, worker-2 often made 4 elements).
  auto r = run_conveyor({"run", "--autoscale", "--min-workers", "1", "--max-workers", "2",
                         "--dataset", "range(4500).map(burn(rounds=3000000))", "--range-split-size",
                         "20", "--autoscale-interval-ms", "300", "--scale-cooldown-ms", "600",
                         "--progress-ms", "1000"},
                        Millis{120000}, "run-autoscale-up");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.stdout_text, "autoscale: 1 worker(s), bounds 1..2"));
  CHECK(contains(r.stdout_text, "autoscale: 1 -> 2 workers at"));
  CHECK(contains(r.stdout_text, "starting worker-2 (pid "));
  CHECK(contains(r.stdout_text, "summary: 4500 elements"));
  CHECK(contains(r.stdout_text, "  worker-2 (127.0.0.1:")); // the new worker served the job
  for (pid_t pid : node_pids(r.stdout_text))
    CHECK_MESSAGE(gone_within(pid, Millis{2000}), "node pid " << pid << " survived");
}

TEST_CASE("run --autoscale: a trainer the workers outpace lets one drain, and the read still "
          "gets every DYNAMIC element once") {
  // Two workers make thousands of elements/s; the trainer takes one every 3 ms and at most 32
  // are requested ahead, so the job is still producing when the autoscaler probes one worker
  // less: worker-2 drains while its splits are being read.
  auto r = run_conveyor({"run",
                         "--autoscale",
                         "--workers",
                         "2",
                         "--min-workers",
                         "1",
                         "--max-workers",
                         "2",
                         "--dataset",
                         "range(3000).map(burn(rounds=100000))",
                         "--range-split-size",
                         "10",
                         "--max-outstanding",
                         "32",
                         "--step-us",
                         "3000",
                         "--autoscale-interval-ms",
                         "300",
                         "--scale-cooldown-ms",
                         "600",
                         "--progress-ms",
                         "1000"},
                        Millis{120000}, "run-autoscale-down");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0); // a drained worker that exited non-zero fails the run
  CHECK(contains(r.stdout_text, "autoscale: 2 -> 1 workers at"));
  CHECK(contains(r.stdout_text, "draining worker-2"));
  CHECK(contains(r.stdout_text, "summary: 3000 elements"));
  for (pid_t pid : node_pids(r.stdout_text))
    CHECK_MESSAGE(gone_within(pid, Millis{2000}), "node pid " << pid << " survived");
}

TEST_CASE("run: the autoscale flags are refused where they would be ignored or cannot work") {
  check_bad_arguments({"run", "--min-workers", "2"},
                      "`--min-workers` is used only with `--autoscale`");
  check_bad_arguments({"run", "--scale-cooldown-ms", "10"},
                      "`--scale-cooldown-ms` is used only with `--autoscale`");
  check_bad_arguments({"run", "--autoscale", "--mode", "off"},
                      "`--autoscale` needs `--mode dynamic`");
  check_bad_arguments({"run", "--autoscale", "--in-process"}, "cannot be used with `--in-process`");
  check_bad_arguments({"run", "--autoscale", "--min-workers", "3", "--max-workers", "2"},
                      "`--max-workers` must be at least 3, got 2");
  check_bad_arguments({"run", "--autoscale", "--workers", "5", "--max-workers", "4"},
                      "`--workers` (the starting count with `--autoscale`) must be within");
}

TEST_CASE("bench autoscale: --csv writes the table and --plot a PNG of it") {
  const std::string csv = test_log_dir() + "/bench-autoscale.csv";
  const std::string png = test_log_dir() + "/bench-autoscale.png";
  std::remove(csv.c_str());
  std::remove(png.c_str());
  auto r = run_conveyor({"bench", "autoscale", "--seconds", "6", "--rate", "20", "--rounds", "1000",
                         "--max-workers", "1", "--csv", csv, "--plot", png},
                        Millis{120000}, "bench-autoscale");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code.has_value());
  // 0, or 1 when the start-up wait weighs on so short a run's wait share: either way it ran to
  // its end and reported.
  CHECK((*r.exit_code == 0 || *r.exit_code == 1));
  std::ifstream table(csv);
  std::string line;
  int rows = 0;
  REQUIRE(std::getline(table, line));
  CHECK(line == "seconds,workers,elements_per_s,wait_share");
  while (std::getline(table, line))
    ++rows;
  CHECK(rows >= 4);
  std::ifstream image(png, std::ios::binary);
  char signature[8] = {};
  image.read(signature, sizeof signature);
  CHECK(std::string(signature, sizeof signature) == std::string("\x89PNG\r\n\x1a\n", 8));
}
