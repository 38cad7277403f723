// Coordinated (round-robin) reads over real processes (actors/round_robin.hpp): N `conveyor read`
// consumers of one named job with --num-consumers N, each its own --consumer-index, reading a
// dataset whose element x expands to the group [x*N, ..., x*N + N - 1]. Taking the consumers'
// outputs round-robin (round r = line r of every consumer), every group of N must be N
// consecutive integers starting at a multiple of N.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"

using namespace conveyor::testing;

namespace {

std::string group_dataset(int n) {
  return "range(1000000).flat_map(group_fn(n=" + std::to_string(n) + ")).repeat()";
}

std::vector<std::string> coordinated_flags(const std::string& job, int n, int index, int take) {
  return {"--job-name", job, "--num-consumers", std::to_string(n), "--consumer-index",
          std::to_string(index), "--take", std::to_string(take), "--round-timeout-ms", "30000"};
}

// Starts N consumers, waits for them all; returns their stdout lines.
using Readers = std::vector<std::unique_ptr<ChildProcess>>;
std::vector<std::vector<std::string>> read_coordinated(
  Cluster& cluster, const std::string& job, int n, int take,
  const std::function<void(Readers&)>& meanwhile = {},
  const std::vector<std::string>& extra_flags = {}) {
  Readers readers;
  for (int i = 0; i < n; ++i) {
    auto flags = coordinated_flags(job, n, i, take);
    flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
    readers.push_back(cluster.start_read(group_dataset(n), flags, "read" + std::to_string(i)));
  }
  if (meanwhile)
    meanwhile(readers);
  std::vector<std::vector<std::string>> out;
  for (auto& r : readers) {
    auto code = r->wait_exit(kReadTimeout);
    REQUIRE_MESSAGE(code.has_value(), std::string(r->describe() + cluster.describe()));
    CHECK_MESSAGE(*code == 0, std::string(r->describe() + cluster.describe()));
    out.push_back(r->stdout_lines());
    CHECK_MESSAGE(out.back().size() == static_cast<std::size_t>(take), r->describe());
  }
  return out;
}

// The check. Returns the number of aligned rounds, or -(first bad round + 1).
long aligned_rounds(const std::vector<std::vector<std::string>>& out) {
  const auto n = static_cast<long>(out.size());
  std::size_t rounds = out[0].size();
  for (const auto& o : out)
    rounds = std::min(rounds, o.size());
  for (std::size_t r = 0; r < rounds; ++r) {
    const long first = std::stol(out[0][r]);
    if (first % n != 0)
      return -static_cast<long>(r) - 1;
    for (long i = 1; i < n; ++i)
      if (std::stol(out[static_cast<std::size_t>(i)][r]) != first + i)
        return -static_cast<long>(r) - 1;
  }
  return static_cast<long>(rounds);
}

// Each worker produces the dataset from its start (OFF), so group 0 (consumer 0 reads "0")
// comes once from every task that served rounds.
std::size_t tasks_that_served(const std::vector<std::string>& consumer0) {
  return static_cast<std::size_t>(std::count(consumer0.begin(), consumer0.end(), "0"));
}

} // namespace

TEST_CASE("coordinated: N = 2, 3, 4 consumers on 2 workers see aligned rounds") {
  Cluster cluster(2, {"--job-gc-timeout", "300"});
  for (int n = 2; n <= 4; ++n) {
    CAPTURE(n);
    constexpr int kTake = 3000;
    auto out = read_coordinated(cluster, "rr" + std::to_string(n), n, kTake);
    CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
    CHECK(tasks_that_served(out[0]) == 2); // both workers served rounds
  }
}

TEST_CASE("coordinated: a worker added mid-job keeps rounds aligned and serves rounds") {
  Cluster cluster(2, {"--job-gc-timeout", "300"});
  constexpr int kN = 3, kTake = 20000;
  auto out = read_coordinated(cluster, "grow", kN, kTake, [&](Readers& readers) {
    // The consumers are reading. Consumer 0 pauses (so every round waits for it: the rounds
    // stop), a third worker joins, consumer 0 goes on: the new task serves rounds from a round
    // the job chose, and no round is skipped or repeated.
    REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(2000, kReadTimeout), readers[0]->describe());
    readers[0]->signal(SIGSTOP);
    cluster.add_worker();
    readers[0]->signal(SIGCONT);
  }, {"--max-outstanding", "512"}); // consumers plan at most 512 rounds ahead: the new worker
                                    // joins within ~800 rounds of where they were
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 3, cluster.describe()); // the new one too
}

TEST_CASE("coordinated: the reference's errors and the protocol's own") {
  Cluster cluster(1, {"--job-gc-timeout", "300"});
  SUBCASE("a finite dataset is refused, naming the fix") {
    auto r = cluster.read("range(10)", coordinated_flags("fin", 2, 0, 5));
    CHECK(r.exit_code != 0);
    CHECK_MESSAGE(r.stderr_text.find("require an infinite dataset") != std::string::npos,
                  r.describe);
    CHECK(r.stderr_text.find("cardinality 10") != std::string::npos);
  }
  SUBCASE("consumers that disagree on num_consumers, or share an index") {
    auto first = cluster.start_read(group_dataset(2), coordinated_flags("agree", 2, 0, 100000),
                                    "first");
    // The job exists once the first consumer reads from it (it waits for consumer 1 to come,
    // which never does, so its first round never completes: nothing is printed).
    REQUIRE_MESSAGE(cluster.dispatcher().wait_for_output("created job", kStartTimeout),
                    cluster.describe());
    auto other_n = cluster.read(group_dataset(2), coordinated_flags("agree", 3, 1, 5));
    CHECK(other_n.exit_code != 0);
    CHECK_MESSAGE(other_n.stderr_text.find("num_consumers 2; a consumer asked for num_consumers 3") !=
                    std::string::npos,
                  other_n.describe);
    auto same_index = cluster.read(group_dataset(2), coordinated_flags("agree", 2, 0, 5));
    CHECK(same_index.exit_code != 0);
    CHECK_MESSAGE(same_index.stderr_text.find("consumer_index 0 is already read by another consumer") !=
                    std::string::npos,
                  same_index.describe);
    first->stop();
  }
  SUBCASE("a consumer that never comes: the others fail after the round timeout, naming it") {
    auto flags = coordinated_flags("alone", 3, 1, 5);
    REQUIRE(flags[flags.size() - 2] == "--round-timeout-ms");
    flags.back() = "1500"; // --round-timeout-ms
    auto r = cluster.read(group_dataset(3), flags);
    CHECK(r.exit_code != 0);
    CHECK_MESSAGE(r.stderr_text.find("for consumer_index 0, 2 of num_consumers 3") !=
                    std::string::npos,
                  r.describe);
  }
}
