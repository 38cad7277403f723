// The cross-trainer cache on real processes: two `conveyor read --cross-trainer-cache` trainers
// (distinct --trainer-id) of one named job each read the same elements, OFF and DYNAMIC; the
// reference's errors
// come back as non-zero exits with its messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <memory>
#include <utility>

#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Two `conveyor read` trainers of `dataset` that join the job before any worker exists (they
// wait for one), so that both read from the tasks' first element on.
std::pair<std::unique_ptr<ChildProcess>, std::unique_ptr<ChildProcess>>
start_two_trainers(Cluster& cluster, const std::string& dataset,
                   const std::function<std::vector<std::string>(const std::string&)>& flags) {
  auto a = cluster.start_read(dataset, flags("trainer-a"), "trainer-a");
  auto b = cluster.start_read(dataset, flags("trainer-b"), "trainer-b");
  const std::string no_workers = "no workers are registered with the dispatcher";
  REQUIRE_MESSAGE(a->wait_for_output(no_workers, kReadTimeout), a->describe());
  REQUIRE_MESSAGE(b->wait_for_output(no_workers, kReadTimeout), b->describe());
  return {std::move(a), std::move(b)};
}

} // namespace

// `mode`: OFF (the worker runs the whole dataset) or DYNAMIC (the reference's
// testDynamicSharding: the worker runs the splits the job gives it, in order with one worker).
static void two_trainers_read_the_same(const std::string& mode) {
  CAPTURE(mode);
  Cluster cluster(0, {"--job-gc-timeout", "200"}); // released soon after the trainers leave
  const std::string dataset = "range(100000000).repeat()";
  auto flags = [&](const std::string& trainer) {
    return std::vector<std::string>{
      "--mode",       mode,    "--job-name", "ctc", "--cross-trainer-cache",
      "--trainer-id", trainer, "--take",     "50"};
  };
  // Both join the job before any worker produces: without the cache they would split 0..49.
  auto [a, b] = start_two_trainers(cluster, dataset, flags);
  cluster.add_worker({"--cross-trainer-cache-size-bytes", "1000000"});
  REQUIRE_MESSAGE(a->wait_exit(kReadTimeout) == 0, a->describe());
  REQUIRE_MESSAGE(b->wait_exit(kReadTimeout) == 0, b->describe());
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i)
    expected.push_back(std::to_string(i));
  CHECK_MESSAGE(a->stdout_lines() == expected, a->describe());
  CHECK_MESSAGE(b->stdout_lines() == expected, b->describe());
}

TEST_CASE("cross-trainer cache: two trainers of one job both read 0..49, from one worker's cache") {
  two_trainers_read_the_same("off");
}

TEST_CASE(
  "cross-trainer cache: DYNAMIC trainers of one job both read 0..49 from the worker's splits") {
  two_trainers_read_the_same("dynamic");
}

// Whole-epoch sharing (beyond the reference) on real processes: two trainers share one epoch
// of a range(20000) DYNAMIC job from two workers whose caches hold 1000 elements each. Both join
// the job before the workers come, so the job registers both at every task when it is assigned
// (msg::cache_trainers): without that, the trainer that learned of a task first had it evict 9000
// elements before the other's first request arrived (its read failed).
static std::pair<std::unique_ptr<ChildProcess>, std::unique_ptr<ChildProcess>>
start_whole_epoch(Cluster& cluster, const std::string& dataset) {
  auto flags = [](const std::string& trainer) {
    return std::vector<std::string>{"--mode",
                                    "dynamic",
                                    "--job-name",
                                    "epoch",
                                    "--cross-trainer-cache",
                                    "--cross-trainer-finite-epoch",
                                    "--trainer-id",
                                    trainer};
  };
  auto trainers = start_two_trainers(cluster, dataset, flags);
  cluster.add_worker({"--cross-trainer-cache-size-bytes", "8000"});
  cluster.add_worker({"--cross-trainer-cache-size-bytes", "8000"});
  return trainers;
}

// Each trainer exited 0 having printed 0..n-1 exactly once, in some order.
static void check_read_each_once(Cluster& cluster, ChildProcess& trainer, int64_t n) {
  REQUIRE_MESSAGE(trainer.wait_exit(kReadTimeout) == 0,
                  std::string(trainer.describe() + cluster.describe()));
  std::vector<int64_t> got;
  for (const auto& line : trainer.stdout_lines())
    got.push_back(std::stoll(line));
  std::sort(got.begin(), got.end());
  std::vector<int64_t> expected(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    expected[static_cast<std::size_t>(i)] = i;
  CHECK_MESSAGE(got == expected, trainer.describe());
}

TEST_CASE(
  "cross-trainer cache: --cross-trainer-finite-epoch - two trainers each read the whole epoch") {
  Cluster cluster(0, {"--job-gc-timeout", "200"});
  auto [a, b] = start_whole_epoch(cluster, "range(20000)");
  check_read_each_once(cluster, *a, 20000);
  check_read_each_once(cluster, *b, 20000);
}

// The same with a worker SIGKILLed mid-epoch: the job hands its splits out again, every trainer
// gets the elements it has not read yet from them (batches carry origins, a trainer drops what
// it already has), and both still read each element exactly once and exit 0.
TEST_CASE("cross-trainer cache: --cross-trainer-finite-epoch - a worker SIGKILLed mid-epoch loses "
          "no trainer an element") {
  Cluster cluster(0, {"--job-gc-timeout", "200"});
  auto [a, b] = start_whole_epoch(cluster, "range(20000).map(sleep_us(us=100))");
  REQUIRE_MESSAGE(a->wait_for_stdout_lines(3000, kReadTimeout), a->describe());
  cluster.worker(1).signal(SIGKILL);
  check_read_each_once(cluster, *a, 20000);
  check_read_each_once(cluster, *b, 20000);
}

TEST_CASE("cross-trainer cache: the reference's errors from `conveyor read`") {
  Cluster cluster(1);
  auto finite =
    cluster.read("range(10)", {"--job-name", "j", "--cross-trainer-cache", "--trainer-id", "t"});
  CHECK(finite.exit_code != 0);
  CHECK_MESSAGE(
    finite.stderr_text.find("Cross-trainer caching requires the input dataset to be infinite") !=
      std::string::npos,
    finite.describe);
  auto no_id = cluster.read("range(10).repeat()", {"--job-name", "j", "--cross-trainer-cache"});
  CHECK(no_id.exit_code != 0);
  CHECK_MESSAGE(no_id.stderr_text.find("requires a non-empty trainer ID") != std::string::npos,
                no_id.describe);
  auto unnamed = cluster.read("range(10).repeat()", {"--cross-trainer-cache", "--trainer-id", "t"});
  CHECK(unnamed.exit_code != 0);
  CHECK_MESSAGE(unnamed.stderr_text.find("Cross-trainer caching requires named jobs") !=
                  std::string::npos,
                unnamed.describe);
  auto coordinated =
    cluster.read("range(10).repeat()", {"--job-name", "j", "--cross-trainer-cache", "--trainer-id",
                                        "t", "--num-consumers", "2", "--consumer-index", "0"});
  CHECK(coordinated.exit_code != 0);
  CHECK_MESSAGE(coordinated.stderr_text.find(
                  "Cross-trainer caching does not support coordinated reads") != std::string::npos,
                coordinated.describe);
  auto stray = cluster.read("range(3)", {"--trainer-id", "t"});
  CHECK(stray.exit_code != 0);
  auto epoch_alone = cluster.read("range(3)", {"--job-name", "j", "--cross-trainer-finite-epoch"});
  CHECK(epoch_alone.exit_code != 0);
  CHECK_MESSAGE(epoch_alone.stderr_text.find("`--cross-trainer-finite-epoch` is used only with "
                                             "`--cross-trainer-cache`") != std::string::npos,
                epoch_alone.describe);
  auto infinite_epoch =
    cluster.read("range(10).repeat()", {"--job-name", "e", "--cross-trainer-cache", "--trainer-id",
                                        "t", "--cross-trainer-finite-epoch"});
  CHECK(infinite_epoch.exit_code != 0);
  CHECK_MESSAGE(infinite_epoch.stderr_text.find("requires a finite dataset") != std::string::npos,
                infinite_epoch.describe);
}
