// Coordinated (round-robin) reads over real processes (coordinated/round_robin.hpp): N `conveyor read`
// consumers of one named job with --num-consumers N, each its own --consumer-index, reading a
// dataset whose element x expands to the group [x*N, ..., x*N + N - 1]. Taking the consumers'
// outputs round-robin (round r = line r of every consumer), every group of N must be N
// consecutive integers starting at a multiple of N.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/integration/coordinated_rounds.hpp"

using namespace conveyor::testing;

namespace {

std::vector<std::string> coordinated_flags(const std::string& job, int n, int index, int take,
                                           int round_timeout_ms = 30000) {
  return {"--job-name",
          job,
          "--num-consumers",
          std::to_string(n),
          "--consumer-index",
          std::to_string(index),
          "--take",
          std::to_string(take),
          "--round-timeout-ms",
          std::to_string(round_timeout_ms)};
}

// The fault tests read 30 000 rounds (~9 s in a normal build; the fault comes at round 3 000):
// under the sanitizers on 2 busy cores that takes minutes, within the test's 300 s limit.
constexpr Millis kFaultReadTimeout{240000};

// Starts N consumers, waits for them all; returns their stdout lines.
using Readers = std::vector<std::unique_ptr<ChildProcess>>;
std::vector<std::vector<std::string>>
read_coordinated(Cluster& cluster, const std::string& job, int n, int take,
                 const std::function<void(Readers&)>& meanwhile = {},
                 const std::vector<std::string>& extra_flags = {}, Millis timeout = kReadTimeout) {
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
    auto code = r->wait_exit(timeout);
    REQUIRE_MESSAGE(code.has_value(), std::string(r->describe() + cluster.describe()));
    CHECK_MESSAGE(*code == 0, std::string(r->describe() + cluster.describe()));
    out.push_back(r->stdout_lines());
    CHECK_MESSAGE(out.back().size() == static_cast<std::size_t>(take), r->describe());
  }
  return out;
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

TEST_CASE("coordinated: the issue's bucketizing run, 15 consumers on 4 workers, rounds aligned") {
  // 15 `conveyor read` processes, each its own --consumer-index of one job; every round hands
  // the 15 trainers the 15 elements of one group (the same "bucket" on every trainer).
  // 20 processes on a shared machine: a worker's heartbeat may come late; a worker declared lost
  // fails a coordinated job (by design), so give heartbeats room.
  Cluster cluster(4, {"--job-gc-timeout", "300", "--worker-timeout", "30000"});
  constexpr int kN = 15, kTake = 2000;
  // 15 processes start at once. On a loaded machine (20 sanitizer processes on 2 cores) a
  // reader's handshake with the dispatcher may not finish before the middleman's heartbeat tick,
  // which ends it (CAF 0.17.6; docs/ARCHITECTURE.md, "Connecting"); the connect loop tries again
  // until --connect-timeout. A reader that could not connect at all never joined: it is started
  // again, at most twice per index, and the others wait for its index meanwhile, so the round
  // timeout (120 s) outlasts two such restarts (CI once: a restart was still connecting when a
  // 30 s round timeout fired).
  Readers readers;
  auto start = [&](int i) {
    auto flags = coordinated_flags("bucketize", kN, i, kTake, 120000);
    flags.insert(flags.end(), {"--connect-timeout", "20000"});
    return cluster.start_read(group_dataset(kN), flags, "read" + std::to_string(i));
  };
  for (int i = 0; i < kN; ++i)
    readers.push_back(start(i));
  std::vector<int> restarts(kN, 0);
  std::vector<bool> done(kN, false);
  std::vector<std::vector<std::string>> out(kN);
  const auto deadline = std::chrono::steady_clock::now() + 5 * kReadTimeout;
  for (bool waiting = true; waiting;) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, cluster.describe());
    waiting = false;
    for (int i = 0; i < kN; ++i) {
      auto& r = readers[static_cast<std::size_t>(i)];
      if (done[static_cast<std::size_t>(i)])
        continue;
      auto code = r->wait_exit(Millis{200});
      if (!code) {
        waiting = true;
        continue;
      }
      if (*code != 0 && restarts[static_cast<std::size_t>(i)] < 2 &&
          r->stderr_text().find("cannot connect to dispatcher") != std::string::npos) {
        MESSAGE("reader " << i << " could not connect; starting it again: " << r->stderr_text());
        ++restarts[static_cast<std::size_t>(i)];
        r = start(i);
        waiting = true;
        continue;
      }
      done[static_cast<std::size_t>(i)] = true;
      CHECK_MESSAGE(*code == 0, std::string(r->describe() + cluster.describe()));
      out[static_cast<std::size_t>(i)] = r->stdout_lines();
      REQUIRE_MESSAGE(out[static_cast<std::size_t>(i)].size() == static_cast<std::size_t>(kTake),
                      r->describe());
    }
  }
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 4, cluster.describe()); // every worker served
}

TEST_CASE("coordinated: a worker added mid-job keeps rounds aligned and serves rounds") {
  Cluster cluster(2, {"--job-gc-timeout", "300"});
  constexpr int kN = 3, kTake = 20000;
  auto out = read_coordinated(
    cluster, "grow", kN, kTake,
    [&](Readers& readers) {
      // The consumers are reading. Consumer 0 pauses (so every round waits for it: the rounds
      // stop), a third worker joins, consumer 0 goes on: the new task serves rounds from a round
      // the job chose, and no round is skipped or repeated.
      REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(2000, kReadTimeout),
                      readers[0]->describe());
      readers[0]->signal(SIGSTOP);
      cluster.add_worker();
      readers[0]->signal(SIGCONT);
    },
    {"--max-outstanding", "512"}); // consumers plan at most 512 rounds ahead: the new worker
                                   // joins within ~800 rounds of where they were
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 3, cluster.describe()); // the new one too
}

TEST_CASE(
  "coordinated: a tagged (COLOCATED) worker added mid-read under AUTO serves rounds, aligned") {
  // AUTO leaves another host's COLOCATED worker to its own trainer, but coordinated reads read
  // every task (all consumers must agree on the schedule): the tagged worker joins the rounds.
  Cluster cluster(2, {"--job-gc-timeout", "300"});
  constexpr int kN = 2, kTake = 20000;
  auto out =
    read_coordinated(cluster, "tagged", kN, kTake,
                     [&](Readers& readers) {
                       REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(2000, kReadTimeout),
                                       readers[0]->describe());
                       readers[0]->signal(SIGSTOP);
                       cluster.add_worker({"--worker-tags", "COLOCATED"});
                       readers[0]->signal(SIGCONT);
                     },
                     {"--max-outstanding", "512", "--target-workers", "AUTO"});
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 3, cluster.describe()); // the tagged one too
}

TEST_CASE(
  "coordinated: a worker stopped with SIGTERM leaves the rounds, a restarted one joins - aligned") {
  // SIGTERM drains the worker: the job ends its task at a round every consumer agrees on (as a
  // new worker's start round), the task serves its rounds up to there, then the worker leaves.
  // Then a worker is started again and joins at a later round. Nothing is skipped or repeated.
  Cluster cluster(3, {"--job-gc-timeout", "300"});
  // Enough rounds that the read outlasts the drain and the restart (30 000 once ran out during
  // the drain under ASan: 27 000 rounds in ~0.25 s).
  constexpr int kN = 3, kTake = 120000;
  auto out = read_coordinated(
    cluster, "drain", kN, kTake,
    [&](Readers& readers) {
      REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(3000, kReadTimeout),
                      readers[0]->describe());
      cluster.worker(0).signal(SIGTERM);
      auto code = cluster.worker(0).wait_exit(kReadTimeout);
      REQUIRE_MESSAGE(code.has_value(), cluster.describe());
      CHECK_MESSAGE(*code == 0, cluster.describe());
      CHECK_MESSAGE(cluster.worker(0).stderr_text().find("drain did not complete") ==
                      std::string::npos,
                    cluster.describe());
      CHECK_MESSAGE(cluster.dispatcher().wait_for_output("serves its last round at", kStartTimeout),
                    cluster.describe());
      const auto when_drained = readers[0]->stdout_lines().size();
      CHECK_MESSAGE(when_drained < static_cast<std::size_t>(kTake),
                    "the read was over before the drain");
      // A worker starts again (a restart on a new port): consumer 0 pauses so that the rounds
      // stop while it registers, as in the test above.
      readers[0]->signal(SIGSTOP);
      cluster.add_worker();
      readers[0]->signal(SIGCONT);
    },
    {"--max-outstanding", "512"}, kFaultReadTimeout);
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 4, cluster.describe()); // 3 first ones + the new one
}

TEST_CASE("coordinated: a worker SIGKILLed mid-read leaves the rounds aligned - the others go on") {
  // No drain: what the worker held is lost with it. Consumers hand a round to their reader only
  // once every consumer has it (the task's commit watermark), so the job can end the lost task
  // at the rounds all of them received; its later rounds are skipped by all alike.
  Cluster cluster(3, {"--job-gc-timeout", "300"});
  // Enough rounds that the read outlasts the crash and the replacement (30 000 once ran out before
  // the crash was noticed under ASan, once reads got faster), as in the drain test above.
  constexpr int kN = 3, kTake = 120000;
  auto out = read_coordinated(
    cluster, "crash", kN, kTake,
    [&](Readers& readers) {
      REQUIRE_MESSAGE(readers[0]->wait_for_stdout_lines(3000, kReadTimeout),
                      readers[0]->describe());
      cluster.worker(0).signal(SIGKILL);
      REQUIRE_MESSAGE(cluster.worker(0).wait_exit(kReadTimeout).has_value(), cluster.describe());
      CHECK_MESSAGE(cluster.dispatcher().wait_for_output("leaves the coordinated rounds at a round",
                                                         kStartTimeout),
                    cluster.describe());
      CHECK_MESSAGE(readers[0]->stdout_lines().size() < static_cast<std::size_t>(kTake),
                    "the read was over before the crash");
      // A replacement joins at a later round; consumer 0 pauses so that the rounds stop while it
      // registers (as in the drain test above).
      readers[0]->signal(SIGSTOP);
      cluster.add_worker();
      readers[0]->signal(SIGCONT);
    },
    {"--max-outstanding", "512"}, kFaultReadTimeout);
  CHECK_MESSAGE(aligned_rounds(out) == kTake, cluster.describe());
  CHECK_MESSAGE(tasks_that_served(out[0]) == 4, cluster.describe()); // 3 first ones + the new one
}

TEST_CASE(
  "coordinated: a consumer SIGKILLed and restarted with its index rejoins at the others' round") {
  Cluster cluster(2, {"--job-gc-timeout", "300", "--worker-timeout", "30000"});
  constexpr int kN = 3, kAgain = 3000;
  // Consumers plan at most 512 rounds ahead, so the others are near the killed one's round.
  const std::vector<std::string> small_window{"--max-outstanding", "512"};
  auto flags = [&](int index, int take) {
    auto f = coordinated_flags("restart", kN, index, take);
    f.insert(f.end(), small_window.begin(), small_window.end());
    return f;
  };
  Readers readers;
  for (int i = 0; i < kN; ++i)
    readers.push_back(
      cluster.start_read(group_dataset(kN), flags(i, 1000000), "read" + std::to_string(i)));
  REQUIRE_MESSAGE(readers[1]->wait_for_stdout_lines(2000, kReadTimeout), readers[1]->describe());
  readers[1]->signal(SIGKILL);
  REQUIRE(readers[1]->wait_exit(kStartTimeout).has_value());
  const auto before = readers[1]->stdout_lines(); // what the killed process printed
  REQUIRE_MESSAGE(
    cluster.dispatcher().wait_for_output("lost the connection to consumer", kStartTimeout),
    cluster.describe());
  // The same index again, in a new process: it takes the index over and rejoins.
  auto again = cluster.start_read(group_dataset(kN), flags(1, kAgain), "read1-again");
  auto code = again->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(code.has_value(), std::string(again->describe() + cluster.describe()));
  CHECK_MESSAGE(*code == 0, std::string(again->describe() + cluster.describe()));
  const auto after = again->stdout_lines();
  REQUIRE_MESSAGE(after.size() == static_cast<std::size_t>(kAgain), again->describe());
  CHECK_MESSAGE(cluster.dispatcher().wait_for_output("consumer_index 1 rejoins", kStartTimeout),
                cluster.describe());
  // Its first elements are index 1 of some rounds' groups; find those rounds in consumer 0's
  // output (each task produces the dataset from its start, so a group value alone can appear
  // in several rounds: the first two rounds together place it).
  const long first = std::stol(after[0]), second = std::stol(after[1]);
  REQUIRE(first % kN == 1);
  REQUIRE_MESSAGE(
    readers[0]->wait_for_output("\n" + std::to_string(second - 1) + "\n", kReadTimeout),
    readers[0]->describe());
  const auto out0_now = readers[0]->stdout_lines();
  std::size_t r0 = out0_now.size();
  for (std::size_t r = 0; r + 1 < out0_now.size() && r0 == out0_now.size(); ++r)
    if (out0_now[r] == std::to_string(first - 1) && out0_now[r + 1] == std::to_string(second - 1))
      r0 = r;
  REQUIRE_MESSAGE(r0 < out0_now.size(), "rounds of " << first << ", " << second << " not found");
  // No round is served twice to index 1, and it rejoined where the others were (they waited
  // for it; they are at most a window or two of rounds ahead).
  CHECK(r0 >= before.size());
  CHECK_MESSAGE(r0 <= before.size() + 4 * 512,
                "rejoined at round " << r0 << " after " << before.size());
  // The others go on through the rounds it read; then every round lines up.
  for (int i : {0, 2})
    REQUIRE_MESSAGE(
      readers[static_cast<std::size_t>(i)]->wait_for_stdout_lines(r0 + kAgain, kReadTimeout),
      readers[static_cast<std::size_t>(i)]->describe());
  for (auto& r : readers)
    r->stop();
  const auto out0 = readers[0]->stdout_lines(), out2 = readers[2]->stdout_lines();
  REQUIRE(out0.size() >= r0 + kAgain);
  REQUIRE(out2.size() >= r0 + kAgain);
  // The killed process's rounds and the new one's, against consumers 0 and 2.
  for (std::size_t r = 0; r < before.size(); ++r) {
    CAPTURE(r);
    REQUIRE(std::stol(out0[r]) % kN == 0);
    REQUIRE(std::stol(before[r]) == std::stol(out0[r]) + 1);
    REQUIRE(std::stol(out2[r]) == std::stol(out0[r]) + 2);
  }
  for (std::size_t k = 0; k < after.size(); ++k) {
    CAPTURE(k);
    REQUIRE(std::stol(out0[r0 + k]) % kN == 0);
    REQUIRE(std::stol(after[k]) == std::stol(out0[r0 + k]) + 1);
    REQUIRE(std::stol(out2[r0 + k]) == std::stol(out0[r0 + k]) + 2);
  }
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
    auto first =
      cluster.start_read(group_dataset(2), coordinated_flags("agree", 2, 0, 100000), "first");
    // The job exists once the first consumer reads from it (it waits for consumer 1 to come,
    // which never does, so its first round never completes: nothing is printed).
    REQUIRE_MESSAGE(cluster.dispatcher().wait_for_output("created job", kStartTimeout),
                    cluster.describe());
    auto other_n = cluster.read(group_dataset(2), coordinated_flags("agree", 3, 1, 5));
    CHECK(other_n.exit_code != 0);
    CHECK_MESSAGE(other_n.stderr_text.find(
                    "num_consumers 2; a consumer asked for num_consumers 3") != std::string::npos,
                  other_n.describe);
    auto same_index = cluster.read(group_dataset(2), coordinated_flags("agree", 2, 0, 5));
    CHECK(same_index.exit_code != 0);
    CHECK_MESSAGE(same_index.stderr_text.find(
                    "consumer_index 0 is already read by another consumer") != std::string::npos,
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
