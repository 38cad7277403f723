// OFF, on_worker_loss "continue", while workers join and leave (issue 32): a coordinated read
// goes on in aligned rounds as 1 and then 3 workers join and one is SIGKILLed, the new workers
// serving rounds; an AUTO read takes a joining untagged worker's copy and leaves a joining
// COLOCATED one (another trainer's) alone. The uncoordinated cases are in
// off_worker_loss_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/integration/coordinated_rounds.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

// Under the sanitizers on 2 busy cores the reads take minutes; within the test's limit.
constexpr Millis kLongRead{240000};

} // namespace

TEST_CASE("OFF, continue, coordinated: 1 then 3 workers join and one is SIGKILLed - no hang, "
          "rounds aligned, the new workers serve rounds") {
  Cluster cluster(2, {"--job-gc-timeout", "300"});
  constexpr int kN = 2, kTake = 120000;
  std::vector<std::unique_ptr<ChildProcess>> readers;
  for (int i = 0; i < kN; ++i)
    readers.push_back(cluster.start_read(
      group_dataset(kN),
      {"--mode", "off", "--on-worker-loss", "continue", "--job-name", "joins", "--num-consumers",
       std::to_string(kN), "--consumer-index", std::to_string(i), "--take", std::to_string(kTake),
       "--round-timeout-ms", "30000", "--max-outstanding", "512"},
      "read" + std::to_string(i)));
  // Consumer 0 pauses while workers join, so that the rounds stop and the new tasks start within
  // the 512 rounds the consumers plan ahead (as in coordinated_test.cpp).
  auto join = [&](int count, std::size_t after_lines) {
    REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(after_lines, kLongRead),
                    readers[0]->describe());
    readers[0]->signal(SIGSTOP);
    for (int i = 0; i < count; ++i)
      cluster.add_worker();
    readers[0]->signal(SIGCONT);
  };
  join(1, 2000);
  join(3, 6000);
  REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(10000, kLongRead), readers[0]->describe());
  cluster.worker(1).signal(SIGKILL); // one of the first two: it served rounds already
  REQUIRE_MESSAGE(cluster.worker(1).wait_exit(kReadTimeout).has_value(), cluster.describe());
  CHECK_MESSAGE(
    cluster.dispatcher().wait_for_output("leaves the coordinated rounds at a round", kStartTimeout),
    cluster.describe());
  CHECK_MESSAGE(readers[0]->stdout_lines().size() < static_cast<std::size_t>(kTake),
                "the read was over before the kill");

  std::vector<std::vector<std::string>> out;
  for (auto& r : readers) {
    auto code = r->wait_exit(kLongRead);
    REQUIRE_MESSAGE(code.has_value(), std::string(r->describe() + cluster.describe()));
    CHECK_MESSAGE(*code == 0, std::string(r->describe() + cluster.describe()));
    out.push_back(r->stdout_lines());
    CHECK_MESSAGE(out.back().size() == static_cast<std::size_t>(kTake), r->describe());
  }
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  // The 2 first workers and the 4 that joined each served rounds.
  CHECK_MESSAGE(tasks_that_served(out[0]) == 6, cluster.describe());
}

TEST_CASE("OFF, continue, AUTO: a joining untagged worker contributes, a joining COLOCATED one "
          "(another trainer's) does not") {
  Cluster cluster(1);
  // Slow elements that never repeat: a task's "0" is its first element. The read is endless, so
  // however long the new workers take to start (minutes under the sanitizers), they join it.
  auto reader = cluster.start_read(
    "range(1000000000).map(sleep_us(us=2000))",
    {"--mode", "off", "--on-worker-loss", "continue", "--target-workers", "AUTO"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(200, kReadTimeout), reader->describe());
  auto& tagged = cluster.add_worker({"--worker-tags", "COLOCATED"});
  auto& untagged = cluster.add_worker();
  // Both get a task of the job; only the untagged one is read.
  CHECK_MESSAGE(tagged.wait_for_output("started task", kLongRead), tagged.describe());
  CHECK_MESSAGE(untagged.wait_for_output("started task", kLongRead), untagged.describe());
  // Long enough after both tasks started for a wrongly read COLOCATED task to show its "0".
  const std::size_t joined_at = reader->stdout_lines().size();
  CHECK_MESSAGE(reader->wait_for_stdout_lines(joined_at + 1000, kLongRead), reader->describe());
  reader->stop();
  const auto lines = reader->stdout_lines();
  CHECK_MESSAGE(tasks_that_served(lines) == 2,
                std::string(reader->describe() + cluster.describe()));
}
