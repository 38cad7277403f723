// Multi-tenant shares on real processes (issue 38): a saturated worker's executor threads go to
// tenants by weight, jobs carry their tenant to the dispatcher and the worker, a named job keeps
// its tenant and weight, and `conveyor status` shows both the jobs' tenants and each worker's
// measured thread share per tenant.
#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

// The measured share of `tenant` in `conveyor bench fairness --weights` output, or -1.
double measured_share(const std::string& out, const std::string& tenant) {
  std::smatch m;
  if (std::regex_search(out, m,
                        std::regex("\\n" + tenant + " +\\d+ +([0-9.]+) +([0-9.]+) +([0-9.]+)")))
    return std::atof(m[2].str().c_str());
  return -1;
}

} // namespace

// The bench runs a dispatcher and one worker as child processes, one endless CPU-bound job per
// tenant with more parallel calls than the worker has threads, and reads the worker's executor
// counters (thread time per tenant) over the window. ±0.1 (the scheduler's own test holds
// ±0.05 on a fake clock): robust on a loaded 2-core machine.
TEST_CASE("tenants: weights 3:1 share one saturated worker's thread time 0.75/0.25") {
  auto r =
    run_conveyor({"bench", "fairness", "--weights", "3,1", "--seconds", "4", "--rounds", "300000"},
                 Millis{120000}, "bench-weights");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  const double heavy = measured_share(r.stdout_text, "tenant1");
  const double light = measured_share(r.stdout_text, "tenant2");
  CHECK(heavy == doctest::Approx(0.75).epsilon(0.1 / 0.75));
  CHECK(light == doctest::Approx(0.25).epsilon(0.1 / 0.25));
}

TEST_CASE(
  "tenants: a job's tenant and weight reach status, and a named job or a tenant keeps them") {
  Cluster cluster(1, {"--job-gc-timeout", "60000"});
  auto running =
    cluster.start_read("range(1000000000).map(burn(rounds=1000))",
                       {"--job-name", "shared", "--tenant", "team-a", "--tenant-weight", "2"});
  // Bounded wait for the job and the worker's first heartbeat with its tenant.
  std::string json;
  for (int i = 0; i < 200; ++i) {
    auto s = run_conveyor({"status", "--dispatcher", cluster.address(), "--json"}, Millis{20000},
                          "status-json");
    json = s.stdout_text;
    if (contains(json, "\"tenant\":\"team-a\",\"weight\":2"))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CAPTURE(json);
  CHECK(contains(json, "\"tenant\":\"team-a\",\"tenant_weight\":2")); // the job
  CHECK(contains(json, "\"tenant\":\"team-a\",\"weight\":2"));        // the worker's share
  CHECK(std::regex_search(
    json, std::regex(R"("tenant":"team-a","weight":2,"thread_seconds":[0-9.e+-]+,"share":)")));

  // The same name with another tenant or weight: refused like other mismatched job options.
  auto other_tenant = cluster.read("range(1000000000).map(burn(rounds=1000))",
                                   {"--job-name", "shared", "--tenant", "team-b"});
  CAPTURE(other_tenant.describe);
  CHECK(other_tenant.exit_code != 0);
  CHECK(contains(other_tenant.stderr_text, "job \"shared\" runs with tenant \"team-a\""));
  auto other_weight =
    cluster.read("range(1000000000).map(burn(rounds=1000))",
                 {"--job-name", "shared", "--tenant", "team-a", "--tenant-weight", "5"});
  CAPTURE(other_weight.describe);
  CHECK(other_weight.exit_code != 0);
  CHECK(contains(other_weight.stderr_text, "runs with tenant_weight 2"));
  // Another job of the same tenant must agree on its weight too.
  auto private_job = cluster.read("range(10)", {"--tenant", "team-a", "--tenant-weight", "3"});
  CAPTURE(private_job.describe);
  CHECK(private_job.exit_code != 0);
  CHECK(contains(private_job.stderr_text, "tenant \"team-a\" runs with tenant_weight 2"));

  auto table =
    run_conveyor({"status", "--dispatcher", cluster.address()}, Millis{20000}, "status-table");
  CAPTURE(table.describe);
  CHECK(contains(table.stdout_text, "tenant team-a, weight 2"));
  CHECK(contains(table.stdout_text, "thread share: "));
  CHECK(contains(table.stdout_text, "team-a (weight 2) "));
  running->stop();
}

TEST_CASE("tenants: conveyor read refuses a bad --tenant or --tenant-weight, naming it") {
  Cluster cluster(1);
  auto weight = cluster.read("range(3)", {"--tenant-weight", "0"});
  CHECK(weight.exit_code != 0);
  CHECK(contains(weight.stderr_text, "--tenant-weight"));
  auto name = cluster.read("range(3)", {"--tenant", "a b"});
  CHECK(name.exit_code != 0);
  CHECK(contains(name.stderr_text, "Invalid `tenant` argument: \"a b\""));
}
