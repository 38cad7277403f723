// The simulator's command line: `conveyor-sim` (apps/sim/, a program of its own so that the
// `conveyor` binary holds no simulator) runs, fails on a planted bug with a replay command that
// names it, refuses bad flags as `conveyor-sim`; `conveyor sim` only points to it.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "test/support/child_process.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

CommandResult run_sim(std::vector<std::string> args, const std::string& name) {
  args.insert(args.begin(), CONVEYOR_BINARY_DIR "/conveyor-sim");
  return run_to_completion(std::move(args), Millis{120000}, name, test_log_dir());
}

} // namespace

TEST_CASE("conveyor-sim: --help names the program and lists the flags") {
  auto r = run_sim({"--help"}, "sim-help");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.stdout_text, "usage: conveyor-sim --dataset EXPR"));
  for (const char* flag : {"--workers", "--consumers", "--mode", "--seed", "--faults", "--runs"})
    CHECK_MESSAGE(contains(r.stdout_text, flag), flag);
}

TEST_CASE(
  "conveyor-sim: a run passes, a planted bug fails with a replay command, bad flags exit 2") {
  auto ok = run_sim(
    {"--dataset", "range(50)", "--workers", "2", "--mode", "dynamic", "--seed", "3"}, "sim-run");
  CAPTURE(ok.describe);
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.stdout_text, "seed 3: PASS"));

  // The sweep of test/sim/planted_bug_test.cpp's duplicate-split case (seeds 1..30): some fail.
  auto bug = run_sim({"--dataset", "range(200).shuffle(8, seed=3)", "--workers", "4", "--mode",
                      "dynamic", "--runs", "30", "--plant-bug", "duplicate-split"},
                     "sim-bug");
  CAPTURE(bug.describe);
  CHECK(bug.exit_code == 1);
  CHECK(contains(bug.stdout_text, "replay: conveyor-sim --workers 4"));

  auto bad = run_sim({"--dataset", "range(5)", "--workers", "0"}, "sim-bad");
  CAPTURE(bad.describe);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.stderr_text, "conveyor-sim: "));
  CHECK(contains(bad.stderr_text, "--workers"));
}

TEST_CASE("conveyor sim: the conveyor binary only points to conveyor-sim") {
  auto r = run_conveyor({"sim", "--dataset", "range(5)"}, Millis{20000}, "sim-moved");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "conveyor sim: "));
  CHECK(contains(r.stderr_text, "`conveyor-sim`"));
  CHECK(r.stdout_text.empty());
}
