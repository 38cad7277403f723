// The cross-trainer cache on real processes: two `conveyor read --cross-trainer-cache` trainers
// (distinct --trainer-id) of one named job each read the same elements; the reference's errors
// come back as non-zero exits with its messages.
#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

TEST_CASE("cross-trainer cache: two trainers of one job both read 0..49, from one worker's cache") {
  Cluster cluster(0, {"--job-gc-timeout", "200"}); // released soon after the trainers leave
  const std::string dataset = "range(100000000).repeat()";
  auto flags = [](const std::string& trainer) {
    return std::vector<std::string>{"--mode", "off", "--job-name", "ctc", "--cross-trainer-cache",
                                    "--trainer-id", trainer, "--take", "50"};
  };
  // Both join the job before any worker produces: without the cache they would split 0..49.
  auto a = cluster.start_read(dataset, flags("trainer-a"), "trainer-a");
  auto b = cluster.start_read(dataset, flags("trainer-b"), "trainer-b");
  const std::string no_workers = "no workers are registered with the dispatcher";
  REQUIRE_MESSAGE(a->wait_for_output(no_workers, kReadTimeout), a->describe());
  REQUIRE_MESSAGE(b->wait_for_output(no_workers, kReadTimeout), b->describe());
  cluster.add_worker({"--cross-trainer-cache-size-bytes", "1000000"});
  REQUIRE_MESSAGE(a->wait_exit(kReadTimeout) == 0, a->describe());
  REQUIRE_MESSAGE(b->wait_exit(kReadTimeout) == 0, b->describe());
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i)
    expected.push_back(std::to_string(i));
  CHECK_MESSAGE(a->stdout_lines() == expected, a->describe());
  CHECK_MESSAGE(b->stdout_lines() == expected, b->describe());
}

TEST_CASE("cross-trainer cache: the reference's errors from `conveyor read`") {
  Cluster cluster(1);
  auto finite = cluster.read("range(10)", {"--job-name", "j", "--cross-trainer-cache", "--trainer-id", "t"});
  CHECK(finite.exit_code != 0);
  CHECK_MESSAGE(finite.stderr_text.find("Cross-trainer caching requires the input dataset to be infinite") !=
                  std::string::npos,
                finite.describe);
  auto no_id = cluster.read("range(10).repeat()", {"--job-name", "j", "--cross-trainer-cache"});
  CHECK(no_id.exit_code != 0);
  CHECK_MESSAGE(no_id.stderr_text.find("requires a non-empty trainer ID") != std::string::npos, no_id.describe);
  auto unnamed = cluster.read("range(10).repeat()", {"--cross-trainer-cache", "--trainer-id", "t"});
  CHECK(unnamed.exit_code != 0);
  CHECK_MESSAGE(unnamed.stderr_text.find("Cross-trainer caching requires named jobs") != std::string::npos,
                unnamed.describe);
  auto dynamic = cluster.read("range(10).repeat()", {"--mode", "dynamic", "--job-name", "j",
                                                     "--cross-trainer-cache", "--trainer-id", "t"});
  CHECK(dynamic.exit_code != 0);
  CHECK_MESSAGE(dynamic.stderr_text.find("requires processing mode OFF") != std::string::npos, dynamic.describe);
  auto stray = cluster.read("range(3)", {"--trainer-id", "t"});
  CHECK(stray.exit_code != 0);
}
