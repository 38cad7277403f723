// OFF reads while workers come and go (issue 32): with on_worker_loss "continue" (the default,
// as tf.data) the read goes on with the workers left, the loss named in a warning and counted in
// `read --stats`; with "fail" it fails naming the worker. Workers restarted (same or new port) or
// added mid-read get a task and produce a whole copy, from its start.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/support/text.hpp"

using conveyor::testing::Cluster;
using conveyor::testing::contains;
using conveyor::testing::Millis;

namespace {

// Slow elements, so that the read outlasts a worker's kill and a new worker's start.
const std::string kEndless = "range(1000).map(sleep_us(us=2000)).repeat()";
constexpr int64_t kFiniteN = 4000;
const std::string kFinite = "range(4000).map(sleep_us(us=2000))";

std::map<int64_t, int64_t> value_counts(const std::vector<std::string>& lines) {
  std::map<int64_t, int64_t> out;
  for (const auto& l : lines)
    ++out[std::stoll(l)];
  return out;
}

// The port a worker printed in its `listening on` line.
std::string port_of(conveyor::testing::ChildProcess& worker) {
  auto port = worker.wait_listening(Millis{5000});
  REQUIRE_MESSAGE(port.ok(), port.status().to_string());
  return std::to_string(*port);
}

// Whether one line of `text` holds both `a` and `b`.
bool line_with(const std::string& text, const std::string& a, const std::string& b) {
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    const std::string line = text.substr(start, end - start);
    if (contains(line, a) && contains(line, b))
      return true;
    start = end + 1;
  }
  return false;
}

// Every value of range(kFiniteN) at least `copies` times and none beyond the range.
void check_copies(const std::vector<std::string>& lines, int64_t copies, const std::string& why) {
  INFO(why);
  auto counts = value_counts(lines);
  REQUIRE(static_cast<int64_t>(counts.size()) == kFiniteN);
  CHECK(counts.begin()->first == 0);
  CHECK(counts.rbegin()->first == kFiniteN - 1);
  int64_t short_values = 0;
  for (const auto& [v, n] : counts)
    short_values += n < copies;
  CHECK(short_values == 0);
}

} // namespace

// Both at once: the SIGKILLed worker's task is counted as lost; the SIGTERMed one drains, its
// endless task retires and loses nothing. The drain waits until the reader was told of the
// retirement (else the reader, its one credit held by the killed worker's task, never asked
// the retiring task again and counted it as lost too: 3 of 4 runs before that), and acknowledged
// it (protocol 30: else the mark could still be on its way when the worker's exit closed the
// connection, seen under the sanitizers).
TEST_CASE("OFF, continue: SIGKILL and SIGTERM of workers mid endless read - the read goes on, "
          "only the SIGKILLed task counted and named") {
  Cluster cluster(3);
  const std::string killed = port_of(cluster.worker(1));
  const std::string drained = port_of(cluster.worker(2));
  constexpr std::size_t kTake = 3000;
  auto reader = cluster.start_read(kEndless, {"--mode", "off", "--max-outstanding", "1", "--take",
                                              std::to_string(kTake), "--stats"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(300, Millis{30000}), reader->describe());
  cluster.worker(1).signal(SIGKILL);
  cluster.worker(2).signal(SIGTERM);
  REQUIRE(cluster.worker(1).wait_exit(Millis{10000}).has_value());
  const std::size_t at_signal = reader->stdout_lines().size();
  CHECK_MESSAGE(at_signal < kTake / 2, "lines at the signals: " << at_signal);
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  CHECK(reader->stdout_lines().size() == kTake);
  const auto err = reader->stderr_text();
  CHECK_MESSAGE(contains(err, "read: 1 task(s) lost before their end"), reader->describe());
  // The warning names the killed worker, never the drained one.
  CHECK_MESSAGE(line_with(err, "reading on with the other workers", ":" + killed),
                reader->describe());
  CHECK_MESSAGE(!line_with(err, "reading on with the other workers", ":" + drained),
                reader->describe());
  // The drain completed (exit 0 within --drain-timeout), not cut short by its timeout.
  CHECK(cluster.worker(2).wait_exit(Millis{30000}) == std::optional<int>{0});
  CHECK_MESSAGE(cluster.worker(2).wait_for_output("drained", Millis{1000}),
                cluster.worker(2).describe());
}

TEST_CASE("OFF, fail: a worker SIGKILLed mid endless read fails the read, naming the worker") {
  Cluster cluster(2);
  const std::string killed = port_of(cluster.worker(1));
  auto reader = cluster.start_read(kEndless, {"--mode", "off", "--max-outstanding", "1",
                                              "--on-worker-loss", "fail", "--take", "100000"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(300, Millis{30000}), reader->describe());
  cluster.worker(1).signal(SIGKILL);
  REQUIRE(cluster.worker(1).wait_exit(Millis{10000}).has_value());
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code != 0, reader->describe());
  CHECK_MESSAGE(line_with(reader->stderr_text(), "cannot be read", ":" + killed),
                reader->describe());
}

TEST_CASE("OFF: --on-worker-loss is checked, and refused with another mode") {
  Cluster cluster(1);
  auto bad = cluster.read("range(3)", {"--mode", "off", "--on-worker-loss", "ignore"});
  CHECK(bad.exit_code != 0);
  CHECK_MESSAGE(
    contains(bad.stderr_text, "`--on-worker-loss` must be continue or fail, got \"ignore\""),
    bad.stderr_text);
  auto dynamic = cluster.read("range(3)", {"--mode", "dynamic", "--on-worker-loss", "fail"});
  CHECK(dynamic.exit_code != 0);
  CHECK_MESSAGE(contains(dynamic.stderr_text, "applies to `--mode off` only"), dynamic.stderr_text);
  auto ok = cluster.read("range(3)", {"--mode", "off", "--on-worker-loss", "fail", "--stats"});
  CHECK_MESSAGE(ok.exit_code == 0, ok.stderr_text);
  CHECK_MESSAGE(contains(ok.stderr_text, "read: 0 task(s) lost before their end"), ok.stderr_text);
}

// A worker SIGKILLed mid-read of a finite dataset and started again: its new task produces the
// whole dataset from its start (tf.data), beside the survivor's whole copy; the killed task's
// partial copy is counted as lost.
void restart_mid_finite_read(bool same_port) {
  Cluster cluster(2);
  const std::string port = port_of(cluster.worker(1));
  auto reader = cluster.start_read(kFinite, {"--mode", "off", "--stats"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(300, Millis{30000}), reader->describe());
  cluster.worker(1).signal(SIGKILL);
  REQUIRE(cluster.worker(1).wait_exit(Millis{10000}).has_value());
  std::vector<std::string> flags;
  if (same_port)
    flags = {"--port", port};
  auto& again = cluster.add_worker(flags);
  CHECK_MESSAGE(again.wait_for_output("started task", Millis{30000}), again.describe());
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  check_copies(reader->stdout_lines(), 2, reader->describe());
  CHECK(static_cast<int64_t>(reader->stdout_lines().size()) > 2 * kFiniteN); // + the lost part
  CHECK_MESSAGE(contains(reader->stderr_text(), "read: 1 task(s) lost before their end"),
                reader->describe());
}

TEST_CASE("OFF: a worker SIGKILLed mid-read and restarted on the same port starts its task over") {
  restart_mid_finite_read(true);
}

TEST_CASE("OFF: a worker SIGKILLed mid-read and restarted on a new port starts its task over") {
  restart_mid_finite_read(false);
}

TEST_CASE("OFF: a worker added mid-read gets a task and produces a whole copy") {
  Cluster cluster(1);
  auto reader = cluster.start_read(kFinite, {"--mode", "off", "--stats"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(300, Millis{30000}), reader->describe());
  auto& added = cluster.add_worker();
  CHECK_MESSAGE(added.wait_for_output("started task", Millis{30000}), added.describe());
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  check_copies(reader->stdout_lines(), 2, reader->describe());
  CHECK(static_cast<int64_t>(reader->stdout_lines().size()) == 2 * kFiniteN);
  CHECK_MESSAGE(contains(reader->stderr_text(), "read: 0 task(s) lost before their end"),
                reader->describe());
}
