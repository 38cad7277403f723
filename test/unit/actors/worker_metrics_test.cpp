// A worker's metrics endpoint (node/metrics.hpp task_samples): the per-tenant buffered bytes sum
// the buffers of the tenant's running tasks; an ended task's buffer no longer counts.
#include <doctest/doctest.h>

#include <string>

#include "node/metrics.hpp"

namespace metrics = conveyor::metrics;

namespace {

// The value of the sample `name` labelled tenant=`tenant`, or -1 when there is none.
double tenant_sample(const std::vector<metrics::Sample>& samples, const std::string& name,
                     const std::string& tenant) {
  for (const auto& s : samples) {
    auto l = s.labels.find("tenant");
    if (s.name == name && l != s.labels.end() && l->second == tenant)
      return s.value;
  }
  return -1;
}

} // namespace

TEST_CASE("worker metrics: buffered bytes per tenant sum its running tasks' buffers") {
  // Tenant names of this test only: the task table is process-wide.
  auto a1 = metrics::register_task(901, 1, "ds", "wm-tenant-a");
  auto a2 = metrics::register_task(902, 2, "ds", "wm-tenant-a");
  auto b = metrics::register_task(903, 3, "ds", "wm-tenant-b");
  a1->buffered_bytes = 1000;
  a2->buffered_bytes = 234;
  b->buffered_bytes = 77;
  const std::string name = "conveyor_worker_tenant_buffered_bytes";
  auto samples = metrics::task_samples();
  CHECK(tenant_sample(samples, name, "wm-tenant-a") == 1234);
  CHECK(tenant_sample(samples, name, "wm-tenant-b") == 77);
  CHECK(metrics::to_text(samples).find("# TYPE conveyor_worker_tenant_buffered_bytes gauge") !=
        std::string::npos);

  // An ended task's buffer went with it; the tenant stays listed, at 0.
  b->ended = true;
  samples = metrics::task_samples();
  CHECK(tenant_sample(samples, name, "wm-tenant-b") == 0);
  CHECK(tenant_sample(samples, name, "wm-tenant-a") == 1234);
}
