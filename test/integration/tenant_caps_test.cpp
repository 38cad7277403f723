// Per-tenant caps on real processes (issue 38): with `--tenant-max-workers small=1` a job of
// tenant "small" has its tasks on exactly one of three workers while another tenant's job uses
// all three; with `--tenant-max-buffer-bytes` a tenant's tasks stop producing at the cap and
// resume as its consumer reads (nothing lost); `conveyor status` shows both; bad values are
// refused naming the flag.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string status_json(const Cluster& cluster) {
  auto s = run_conveyor({"status", "--dispatcher", cluster.address(), "--json"}, Millis{20000},
                        "status-json");
  REQUIRE(s.exit_code == 0);
  return s.stdout_text;
}

// A number field of the top-level tenant entry of `tenant`, or -1.
int64_t tenant_field(const std::string& json, const std::string& tenant, const std::string& field) {
  std::smatch m;
  const std::regex entry("\\{\"tenant\":\"" + tenant + "\",\"max_workers\":[^}]*\\}");
  if (!std::regex_search(json, m, entry))
    return -1;
  std::smatch f;
  const std::string e = m[0].str();
  if (!std::regex_search(e, f, std::regex("\"" + field + "\":(\\d+)")))
    return -1;
  return std::atoll(f[1].str().c_str());
}

// The "tasks" of each worker in a status JSON, in order.
std::vector<int64_t> worker_tasks(const std::string& json) {
  std::vector<int64_t> out;
  const std::regex worker(
    "\"address\":\"127\\.0\\.0\\.1:\\d+\",\"tags\":\\[[^\\]]*\\],\"tasks\":(\\d+)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), worker);
       it != std::sregex_iterator(); ++it)
    out.push_back(std::atoll((*it)[1].str().c_str()));
  return out;
}

} // namespace

TEST_CASE("tenant caps: a tenant capped at 1 worker reads on exactly 1 of 3, another on all 3") {
  Cluster cluster(3, {"--tenant-max-workers", "small=1"});
  // OFF: every worker with a task produces the whole dataset, so the output counts the workers.
  auto small = cluster.read("range(50)", {"--tenant", "small"});
  CAPTURE(small.describe);
  REQUIRE(small.exit_code == 0);
  CHECK(sorted(small.lines) == expected_sorted_lines("range(50)", 1));
  auto big = cluster.read("range(50)", {"--tenant", "big"});
  CAPTURE(big.describe);
  REQUIRE(big.exit_code == 0);
  CHECK(sorted(big.lines) == expected_sorted_lines("range(50)", 3));

  // Both at once, endless: status shows the capped tenant on one worker and its cap.
  auto small_job =
    cluster.start_read("range(1000000000)", {"--tenant", "small", "--print", "none"}, "small");
  auto big_job =
    cluster.start_read("range(1000000000)", {"--tenant", "big", "--print", "none"}, "big");
  std::string json;
  std::vector<int64_t> tasks;
  for (int i = 0; i < 200; ++i) { // bounded: both jobs created, the finished ones gone
    json = status_json(cluster);
    tasks = worker_tasks(json);
    std::sort(tasks.begin(), tasks.end());
    if (tenant_field(json, "small", "workers") == 1 && tenant_field(json, "big", "workers") == 3 &&
        tasks == std::vector<int64_t>{1, 1, 2})
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CAPTURE(json);
  CHECK(tenant_field(json, "small", "max_workers") == 1);
  CHECK(tenant_field(json, "small", "workers") == 1);
  CHECK(tenant_field(json, "big", "max_workers") == 0);
  CHECK(tenant_field(json, "big", "workers") == 3);
  CHECK(tasks == std::vector<int64_t>{1, 1, 2}); // big on each, small on one

  auto table =
    run_conveyor({"status", "--dispatcher", cluster.address()}, Millis{20000}, "status-table");
  CAPTURE(table.describe);
  CHECK(std::regex_search(table.stdout_text, std::regex("\\n  small +1 +1 ")));
  small_job->stop();
  big_job->stop();
}

TEST_CASE("tenant caps: a tenant at its buffer cap waits for its consumer and loses nothing") {
  constexpr int64_t kCap = 4096;
  Cluster cluster(1, {"--tenant-max-buffer-bytes", "small=" + std::to_string(kCap)});
  // The whole dataset arrives, each element once, however often production stopped at the cap.
  auto whole = cluster.read("range(5000)", {"--tenant", "small"});
  CAPTURE(whole.describe);
  REQUIRE(whole.exit_code == 0);
  CHECK(sorted(whole.lines) == expected_sorted_lines("range(5000)", 1));

  // Endless readers of both tenants: the capped one's buffer stays at its cap (plus at most one
  // element per task); the other's is free to grow far beyond it. The other tenant's reader is
  // stopped (SIGSTOP) once its job exists, so its worker's buffer fills however fast a reader
  // would keep up (under the sanitizers one did, and that buffer stayed empty).
  auto small_job =
    cluster.start_read("range(1000000000)", {"--tenant", "small", "--print", "none"}, "small");
  auto big_job = cluster.start_read("range(1000000000).batch(1000)",
                                    {"--tenant", "big", "--print", "none"}, "big");
  int64_t small_max = -1, big_max = -1;
  bool big_stopped = false;
  std::string json;
  // At least 20 samples (2 s) of the capped buffer, then until the uncapped one passed the cap;
  // bounded in time, as each sample starts a `conveyor status` process (slow under the sanitizers).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; std::chrono::steady_clock::now() < deadline &&
                  !(small_max > 0 && big_max > kCap + 256 && i >= 20);
       ++i) {
    json = status_json(cluster);
    small_max = std::max(small_max, tenant_field(json, "small", "buffered_bytes"));
    big_max = std::max(big_max, tenant_field(json, "big", "buffered_bytes"));
    if (!big_stopped && tenant_field(json, "big", "workers") >= 1) {
      big_job->signal(SIGSTOP);
      big_stopped = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (big_stopped)
    big_job->signal(SIGCONT);
  CAPTURE(json);
  CHECK(tenant_field(json, "small", "max_buffer_bytes") == kCap);
  CHECK(small_max > 0);
  CHECK(small_max <= kCap + 256); // one element past the cap at most
  CHECK(big_max > kCap + 256);    // not held at the other tenant's cap
  CHECK(contains(json, "\"max_buffer_bytes\":4096}"));
  small_job->stop();
  big_job->stop();
}

TEST_CASE("tenant caps: bad --tenant-max-workers and --tenant-max-buffer-bytes are refused") {
  struct Bad {
    const char* flag;
    const char* value;
    const char* says;
  };
  for (auto bad : {Bad{"--tenant-max-workers", "small=0", "must be at least 1, got 0"},
                   Bad{"--tenant-max-workers", "small", "must be TENANT=N"},
                   Bad{"--tenant-max-buffer-bytes", "a=1k", "is not a whole number"},
                   Bad{"--tenant-max-buffer-bytes", "a b=5", "Invalid `tenant` argument"}}) {
    CAPTURE(bad.value);
    auto r =
      run_conveyor({"dispatcher", "--port", "0", bad.flag, bad.value}, Millis{20000}, "bad-cap");
    CAPTURE(r.describe);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.stderr_text, std::string{"`"} + bad.flag + "`"));
    CHECK(contains(r.stderr_text, bad.says));
  }
}
