// DYNAMIC with a worker that joins a running read (what an autoscaler does): the new worker
// takes a fair share of the splits left, because the first worker's task holds no more splits
// than its pipeline is about to read (worker/split_feed.hpp), and every element arrives once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <string>

#include "test/integration/cluster.hpp"
#include "test/integration/exactly_once.hpp"

using conveyor::testing::check_exactly_once;
using conveyor::testing::Cluster;
using conveyor::testing::Millis;

namespace {

// `read --stats`'s per-worker counts: "read:   127.0.0.1:PORT: N elements received".
std::map<std::string, int64_t> per_worker(const std::string& stderr_text) {
  std::map<std::string, int64_t> out;
  static const std::regex line(R"(read:   (\S+): (\d+) elements received)");
  for (auto it = std::sregex_iterator(stderr_text.begin(), stderr_text.end(), line);
       it != std::sregex_iterator(); ++it)
    out[(*it)[1].str()] = std::stoll((*it)[2].str());
  return out;
}

} // namespace

TEST_CASE("dynamic: a worker that joins a running read takes a fair share of the splits left, "
          "and every element arrives once") {
  // One worker at the job's creation: the dispatcher cuts range(1600) into 8 splits of 200
  // (dispatcher_actor_jobs.cpp), 2 s each at 10 ms an element. The second worker joins while
  // the first reads split 1. The first task holds split 1 and one more (its window shrank to
  // one after the first answer, and it handed the surplus back), so the newcomer takes 3 of the
  // 6 left (600 elements). Before, the first task's window grew at its first answer and it held
  // 4 splits ahead: the newcomer got splits 6 and 7 at most (400, 25%). It has from the 220th
  // element to the end of split 2 (~4 s) to start and still get 3.
  constexpr int64_t kN = 1600;
  Cluster cluster(1, {"--range-split-size", "20"});
  auto reader =
    cluster.start_read("range(1600).map(sleep_us(us=10000))", {"--mode", "dynamic", "--stats"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(220, Millis{30000}), reader->describe());
  auto& second = cluster.add_worker();
  CHECK_MESSAGE(second.wait_for_output("started task", Millis{30000}), second.describe());
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  REQUIRE_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  check_exactly_once(reader->stdout_lines(), kN, reader->describe());
  auto counts = per_worker(reader->stderr_text());
  CAPTURE(reader->stderr_text());
  REQUIRE(counts.size() == 2);
  int64_t least = kN;
  for (const auto& [worker, n] : counts)
    least = std::min(least, n);
  // The first worker read more than 220 on its own: the least is the newcomer's.
  CHECK(least * 100 >= kN * 30); // 3 splits of 8; 2 (25%) fails
}
