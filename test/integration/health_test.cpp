// Operations, issue 38: /healthz and /readyz on the metrics port of real processes, the
// autoscaler's --scale-command, and `conveyor read --progress`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/integration/node_http.hpp"
#include "test/support/free_port.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;
namespace fs = std::filesystem;

namespace {

// Polls GET path until it answers `code` (bounded by `limit`).
HttpReply wait_code(uint16_t port, const std::string& path, int code, Millis limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  HttpReply r = http_get(port, path);
  while (r.code != code && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = http_get(port, path);
  }
  return r;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("health: a worker is live at once and ready only once registered with its dispatcher") {
  // The dispatcher's port is chosen, but nobody listens on it yet.
  const uint16_t dport = free_loopback_port();
  const std::string address = "127.0.0.1:" + std::to_string(dport);
  auto w = ChildProcess::conveyor({"worker", "--dispatcher", address, "--port", "0",
                                   "--metrics-port", "0", "--dispatcher-timeout", "60000"},
                                  "health-worker");
  REQUIRE(w.ok());
  auto& worker = **w;
  const uint16_t wport = metrics_port_of(worker);
  auto live = http_get(wport, "/healthz");
  CAPTURE(worker.describe());
  CHECK(live.code == 200);
  auto ready = http_get(wport, "/readyz");
  CHECK(ready.code == 503);
  CHECK(contains(ready.body, "not registered with the dispatcher at " + address));

  auto d = ChildProcess::conveyor(
    {"dispatcher", "--port", std::to_string(dport), "--metrics-port", "0"}, "health-dispatcher");
  REQUIRE(d.ok());
  auto& dispatcher = **d;
  REQUIRE(dispatcher.wait_listening(kStartTimeout).ok());
  const uint16_t mport = metrics_port_of(dispatcher);
  CHECK(http_get(mport, "/healthz").code == 200);
  auto dready = http_get(mport, "/readyz");
  CHECK(dready.code == 200);
  CHECK(contains(dready.body, "ready"));
  ready = wait_code(wport, "/readyz", 200, kStartTimeout);
  CHECK(ready.code == 200);
  // /metrics is still the exposer's, and other paths are not found.
  CHECK(http_get(mport, "/metrics").code == 200);
  CHECK(http_get(mport, "/nothing").code == 404);
  worker.stop(Millis{10000});
  dispatcher.stop(Millis{10000});
  CHECK(worker.wait_exit(Millis{0}) == 0);
  CHECK(dispatcher.wait_exit(Millis{0}) == 0);
}

TEST_CASE("autoscale: --scale-command runs with the count the dispatcher computed") {
  const fs::path out =
    fs::path(test_log_dir()) /
    ("scale-" + std::to_string(::getpid()) + "-" +
     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(out.parent_path());
  // The command writes its argument; cooldown 0 and a short interval so it decides at once.
  Cluster cluster(1, {"--scale-command", "printf '%s' {n} > '" + out.string() + "'",
                      "--max-workers", "6", "--autoscale-interval-ms", "200", "--scale-cooldown-ms",
                      "0", "--metrics-port", "0"});
  // One worker at 50 elements/s and a reader that takes them at once: it waits nearly all the
  // time, so the target climbs (to the estimate, then one more each interval while the workers
  // asked for do not come: the command here starts none) up to --max-workers.
  auto reader = cluster.start_read("range(100000).map(sleep_us(us=20000))",
                                   {"--mode", "dynamic", "--print", "none"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // (An early, shorter window may ask for fewer first: the target climbs to the cap.)
  while (read_text(out) != "6" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string n = read_text(out);
  CAPTURE(cluster.describe());
  REQUIRE(!n.empty());
  CHECK(n == "6");
  auto js = run_conveyor({"status", "--dispatcher", cluster.address(), "--json"}, Millis{20000},
                         "status-autoscale");
  CAPTURE(js.describe);
  REQUIRE(js.exit_code == 0);
  CHECK(contains(js.stdout_text, "\"autoscale_target\":6"));
  CHECK(std::regex_search(js.stdout_text, std::regex("\"desired_workers\":[1-9]")));
  CHECK(contains(cluster.dispatcher().stderr_text(), "autoscale: "));
  const auto mport = metrics_port_of(cluster.dispatcher());
  auto metrics = http_get(mport, "/metrics");
  CHECK(contains(metrics.body, "conveyor_desired_workers "));
  CHECK(contains(metrics.body, "conveyor_autoscale_target_workers 6"));
  reader->stop();
  std::error_code ec;
  fs::remove(out, ec);
}

TEST_CASE("autoscale: the bounds are checked and need --scale-command") {
  auto r = run_conveyor({"dispatcher", "--port", "0", "--max-workers", "3"}, Millis{20000});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "`--max-workers` is used only with `--scale-command`"));
  r = run_conveyor({"dispatcher", "--port", "0", "--scale-command", "scale"}, Millis{20000});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "must contain {n}"));
  r = run_conveyor({"dispatcher", "--port", "0", "--scale-command", "scale {n}", "--min-workers",
                    "5", "--max-workers", "2"},
                   Millis{20000});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "`--max-workers` must be at least"));
}

TEST_CASE("read: --progress reports on stderr once a second and leaves stdout to elements") {
  Cluster cluster(1);
  auto r = cluster.read("range(60).map(sleep_us(us=50000))", {"--mode", "dynamic", "--progress"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(r.lines.size() == 60);
  for (const auto& line : r.lines)
    CHECK(std::regex_match(line, std::regex("[0-9]+")));
  // About 3 s of reading: at least two lines, each with the elements, rate, waits and the ETA
  // (DYNAMIC, cardinality 60).
  std::regex progress(
    "read: [0-9]+ elements, [0-9.]+ [KMGT]?i?B in [0-9]+ s, [0-9]+ elements/s \\([^)]*\\); "
    "waiting [0-9]+%: worker [0-9]+%, network [0-9]+%, split [0-9]+%, credit [0-9]+%; [0-9]+% of "
    "60");
  const auto lines =
    std::distance(std::sregex_iterator(r.stderr_text.begin(), r.stderr_text.end(), progress),
                  std::sregex_iterator());
  CHECK(lines >= 2);

  // Not a terminal and no flag: quiet; --progress=off: quiet.
  for (auto flags : {std::vector<std::string>{}, std::vector<std::string>{"--progress=off"}}) {
    flags.insert(flags.end(), {"--mode", "dynamic"});
    auto q = cluster.read("range(30).map(sleep_us(us=50000))", flags);
    CAPTURE(q.describe);
    REQUIRE(q.exit_code == 0);
    CHECK_FALSE(contains(q.stderr_text, "elements/s"));
  }
  auto bad = cluster.read("range(3)", {"--progress=sometimes"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.stderr_text, "`--progress` must be on, off or auto, got \"sometimes\""));
}
