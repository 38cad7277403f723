// DYNAMIC over several splittable sources (zip, concatenate) on real processes: the job gives
// each source its own split provider (tf.data's split_provider_index) and every source element
// is read exactly once. With a worker SIGKILLed, a per-split concatenation still delivers each
// element exactly once (its origins name their source) and a zip every element at least once;
// with the dispatcher SIGKILLed and restarted on its --work-dir every element still arrives
// (docs/SEMANTICS.md).
#include <doctest/doctest.h>

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/integration/restartable_nodes.hpp"
#include "test/support/free_port.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// "(a, b)" -> {a, b}; REQUIREs the shape.
std::pair<int64_t, int64_t> parse_pair(const std::string& line) {
  REQUIRE_MESSAGE(line.size() > 4, line);
  REQUIRE_MESSAGE(line.front() == '(', line);
  auto comma = line.find(", ");
  REQUIRE_MESSAGE(comma != std::string::npos, line);
  return {std::stoll(line.substr(1, comma - 1)), std::stoll(line.substr(comma + 2))};
}

// How often each value occurs.
std::map<int64_t, int64_t> counts(const std::vector<std::string>& lines) {
  std::map<int64_t, int64_t> out;
  for (const auto& l : lines)
    ++out[std::stoll(l)];
  return out;
}

// range(0, n).concatenate(range(kSecond, kSecond + n)): two sources with distinct values.
constexpr int64_t kSecond = 1000000;

std::string concatenated(int64_t n, int sleep_us) {
  return "range(" + std::to_string(n) + ").concatenate(range(" + std::to_string(kSecond) + ", " +
         std::to_string(kSecond + n) + ")).map(sleep_us(us=" + std::to_string(sleep_us) + "))";
}

// Every value of both sources arrived (`exactly_once`: once each), and nothing else.
void check_every_value(const std::vector<std::string>& lines, int64_t n, const std::string& why,
                       bool exactly_once = false) {
  INFO(why);
  auto got = counts(lines);
  int64_t missing = 0;
  int64_t repeated = 0;
  for (int64_t base : {int64_t{0}, kSecond})
    for (int64_t i = base; i < base + n; ++i) {
      missing += got.count(i) == 0 ? 1 : 0;
      repeated += got.count(i) != 0 && got.at(i) > 1 ? 1 : 0;
    }
  CHECK(missing == 0);
  if (exactly_once)
    CHECK(repeated == 0);
  CHECK(static_cast<int64_t>(got.size()) == 2 * n); // no value outside the sources
}

} // namespace

TEST_CASE("multi-source DYNAMIC: zip(range(N), range(N).map(square)) on 3 workers reads each "
          "source's elements exactly once") {
  Cluster cluster(3);
  // N/(8 workers x 3) = 1000-element splits: every split of both sources has the same size.
  constexpr int64_t kN = 24000;
  auto read = cluster.read("zip(range(24000), range(24000).map(square))", {"--mode", "dynamic"});
  REQUIRE_MESSAGE(read.exit_code == 0, read.describe);
  REQUIRE(static_cast<int64_t>(read.lines.size()) == kN);
  std::vector<int64_t> first(kN, 0);
  std::map<int64_t, int64_t> second;
  for (const auto& line : read.lines) {
    auto [a, b] = parse_pair(line);
    REQUIRE(a >= 0);
    REQUIRE(a < kN);
    ++first[static_cast<std::size_t>(a)];
    ++second[b];
  }
  int64_t not_once = 0;
  for (int64_t i = 0; i < kN; ++i) {
    not_once += first[static_cast<std::size_t>(i)] == 1 ? 0 : 1;
    auto s = second.find(i * i);
    not_once += s != second.end() && s->second == 1 ? 0 : 1;
  }
  CHECK_MESSAGE(not_once == 0, read.describe);
}

TEST_CASE("multi-source DYNAMIC: range(A).concatenate(range(B)) on 2 workers is the "
          "concatenation's multiset") {
  Cluster cluster(2);
  auto read = cluster.read("range(3000).concatenate(range(500, 2500))", {"--mode", "dynamic"});
  REQUIRE_MESSAGE(read.exit_code == 0, read.describe);
  CHECK(sorted(read.lines) == expected_sorted_lines("range(3000).concatenate(range(500, 2500))"));
}

// A per-split concatenation (sequential map above it): a worker SIGKILLed while the job reads
// `a` (after 2000 of 12000 elements) or `b` (after 8000): its splits go to the other tasks, and
// the consumer drops what it already had of them by (source, split, sequence).
TEST_CASE("multi-source DYNAMIC: a worker SIGKILLed mid concatenate read - every element "
          "exactly once") {
  for (int64_t kill_after : {int64_t{2000}, int64_t{8000}}) {
    CAPTURE(kill_after);
    Cluster cluster(3);
    constexpr int64_t kN = 6000;
    auto reader = cluster.start_read(concatenated(kN, 300), {"--mode", "dynamic"});
    REQUIRE_MESSAGE(reader->wait_for_stdout_lines(kill_after, Millis{30000}), reader->describe());
    REQUIRE_FALSE(reader->exited()); // the read was not over yet
    cluster.worker(1).signal(SIGKILL);
    auto code = reader->wait_exit(Millis{60000});
    REQUIRE(code.has_value());
    CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
    check_every_value(reader->stdout_lines(), kN, reader->describe(), /*exactly_once=*/true);
  }
}

// zip is not per-split (its elements pair two splits): a lost worker's splits of both sources
// are read again, at-least-once (docs/SEMANTICS.md). Equal lengths, splits of equal size: no
// element of either source is lost. The lost splits go to a task still running, so the others
// must not all have ended by the kill (a loud data_loss then): 2 ms per element keeps them busy
// ~2.7 s past the 2000th line (at 0.6 ms a loaded machine's lag let them end first).
TEST_CASE("multi-source DYNAMIC: a worker SIGKILLed mid zip read - no element of either source "
          "is lost") {
  Cluster cluster(3);
  constexpr int64_t kN = 6000;
  const std::string zipped = "zip(range(6000), range(" + std::to_string(kSecond) + ", " +
                             std::to_string(kSecond + kN) + ")).map(sleep_us(us=2000))";
  auto reader = cluster.start_read(zipped, {"--mode", "dynamic"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(2000, Millis{30000}), reader->describe());
  REQUIRE_FALSE(reader->exited());
  cluster.worker(1).signal(SIGKILL);
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  std::vector<std::string> values;
  for (const auto& line : reader->stdout_lines()) {
    auto [a, b] = parse_pair(line);
    values.push_back(std::to_string(a));
    values.push_back(std::to_string(b));
  }
  check_every_value(values, kN, reader->describe());
}

TEST_CASE("multi-source DYNAMIC: the dispatcher SIGKILLed mid concatenate read and restarted on "
          "its work dir - the job continues and every element arrives") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  JournaledPair nodes(wd);
  auto& d1 = nodes.dispatcher;
  const uint16_t port = nodes.port;
  constexpr int64_t kN = 6000; // ~1.8 s on both workers together
  auto reader = ChildProcess::conveyor(
    {"read", "--dispatcher", addr(port), "--dataset", concatenated(kN, 300), "--mode", "dynamic"},
    "read");
  REQUIRE(reader.ok());
  REQUIRE_MESSAGE(d1->wait_for_output("created job", kReadTimeout), d1->describe());
  REQUIRE_MESSAGE((*reader)->wait_for_stdout_lines(1000, Millis{30000}), (*reader)->describe());
  REQUIRE_FALSE((*reader)->exited()); // the read was not over yet
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2");
  CHECK(d2->wait_for_output("1 job(s) (1 running again)", kStartTimeout));
  auto rc = (*reader)->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), (*reader)->describe());
  CHECK_MESSAGE(*rc == 0, std::string((*reader)->describe() + d2->describe()));
  check_every_value((*reader)->stdout_lines(), kN, (*reader)->describe() + d2->describe());
  // The crash hit the epoch in the middle: the restored job handed its held splits out again.
  CHECK_MESSAGE(d2->stderr_text().find("handing out again the") != std::string::npos,
                d2->describe());
}

// tf.data resets every split provider at the end of each repetition: the second pass of a zip
// of unequal lengths pairs `b`'s first elements again, not the surplus the first pass left
// (which conveyor read before); of equal lengths, `b` (whose end the first pass never asked
// for) starts over too instead of ending the second pass at once. One worker: the sequence is
// plain zip's, repeated.
TEST_CASE("multi-source DYNAMIC: repeat above a zip starts every source over each repetition") {
  Cluster cluster(1);
  for (const std::string dataset : {"zip(range(8192), range(16384)).repeat(2)",
                                    "zip(range(4096), range(4096).map(square)).repeat(3)"}) {
    CAPTURE(dataset);
    auto read = cluster.read(dataset, {"--mode", "dynamic"});
    REQUIRE_MESSAGE(read.exit_code == 0, read.describe);
    CHECK(sorted(read.lines) == expected_sorted_lines(dataset)); // plain zip's, each repetition
  }
}
