// Per-tenant caps (issue 38), without actors: parsing the flags, where the dispatcher may put a
// capped tenant's tasks (dispatcher/tenant_caps.hpp), and a worker's per-tenant buffer
// accounting (worker/tenant_buffers.hpp).
#include <doctest/doctest.h>

#include <algorithm>

#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/tenant_caps.hpp"
#include "pipeline/runtime/tenant.hpp"
#include "worker/tenant_buffers.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::msg;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A cluster of `workers` workers and one dataset.
DispatcherState cluster(int workers) {
  DispatcherState s;
  REQUIRE(s.apply(RegisterDatasetRecord{"1000", "f", "def", 0, 1}).ok());
  for (int i = 1; i <= workers; ++i)
    REQUIRE(s.apply(RegisterWorkerRecord{s.next_worker_id(), "h:" + std::to_string(i), 10}).ok());
  return s;
}

job_id_t add_job(DispatcherState& s, const std::string& tenant) {
  CreateJobRecord r{s.next_job_id(), "1000", "", 0, -1, "AUTO", 20};
  r.tenant = tenant;
  const auto id = r.job;
  REQUIRE(s.apply(r).ok());
  return id;
}

// What the dispatcher does for a new job: a task on each worker it may use, in its order.
std::vector<worker_id_t> place(DispatcherState& s, const TenantCaps& caps, job_id_t job) {
  const std::string tenant = s.job(job)->tenant;
  std::vector<worker_id_t> live;
  for (const auto* w : s.workers())
    live.push_back(w->id);
  std::vector<worker_id_t> placed;
  for (auto w : placement_order(s, tenant, live))
    if (may_place(s, caps, tenant, w)) {
      REQUIRE(s.apply(CreateTaskRecord{s.next_task_id(), job, w, 30}).ok());
      placed.push_back(w);
    }
  std::sort(placed.begin(), placed.end());
  return placed;
}

} // namespace

TEST_CASE("tenant caps: TENANT=N lists parse, and bad ones are refused naming the flag") {
  auto caps = parse_tenant_caps("team-a=2,b.x_1=1048576", "--tenant-max-buffer-bytes");
  REQUIRE(caps.ok());
  CHECK(caps->size() == 2);
  CHECK(caps->at("team-a") == 2);
  CHECK(caps->at("b.x_1") == 1048576);
  struct Bad {
    const char* text;
    const char* says;
  };
  for (auto bad :
       {Bad{"", "got nothing"}, Bad{"team-a", "must be TENANT=N"}, Bad{"=2", "must be TENANT=N"},
        Bad{"a=", "must be TENANT=N"}, Bad{"a=2,", "must be TENANT=N"},
        Bad{"a=two", "is not a whole number"}, Bad{"a=2x", "is not a whole number"},
        Bad{"a=-1", "is not a whole number"}, Bad{"a=0", "must be at least 1, got 0"},
        Bad{"a b=1", "Invalid `tenant`"}, Bad{"a=1,a=2", "names tenant \"a\" twice"},
        Bad{"a=99999999999999999999", "is not a whole number"}}) {
    CAPTURE(bad.text);
    auto r = parse_tenant_caps(bad.text, "--tenant-max-workers");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == ErrorCode::invalid_argument);
    CHECK(has(r.status().message(), "`--tenant-max-workers`"));
    CHECK(has(r.status().message(), bad.says));
  }
  CHECK(validate_tenant_caps({{"a", 1}}, "tenant_max_workers").ok());
  auto zero = validate_tenant_caps({{"a", 0}}, "tenant_max_workers");
  CHECK(has(zero.message(), "`tenant_max_workers`: the cap of tenant \"a\" must be at least 1"));
  CHECK(!validate_tenant_caps({{"", 3}}, "tenant_max_buffer_bytes").ok());
}

TEST_CASE("tenant caps: a capped tenant's jobs share at most N workers, others use all") {
  auto s = cluster(3);
  const TenantCaps caps{{"small", 1}};
  auto a = add_job(s, "small");
  CHECK(place(s, caps, a).size() == 1);
  CHECK(tenant_workers(s, "small").size() == 1);
  // Another tenant (no cap) gets every worker.
  auto b = add_job(s, "big");
  CHECK(place(s, caps, b) == std::vector<worker_id_t>{1, 2, 3});
  // A second job of the capped tenant goes where the first one is.
  const auto first = *tenant_workers(s, "small").begin();
  auto c = add_job(s, "small");
  CHECK(place(s, caps, c) == std::vector<worker_id_t>{first});
  CHECK(tenant_workers(s, "small").size() == 1);
  // Its worker is removed: the tenant may take another one (and only one).
  REQUIRE(s.apply(RemoveWorkerRecord{first, "gone", 40}).ok());
  CHECK(tenant_workers(s, "small").empty());
  CHECK(place(s, caps, a).size() == 1);
  CHECK(place(s, caps, c).size() == 1);
  CHECK(tenant_workers(s, "small").size() == 1);
  // Ended jobs free their workers.
  REQUIRE(s.apply(FinishJobRecord{a, 50}).ok());
  REQUIRE(s.apply(FinishJobRecord{c, 50}).ok());
  CHECK(tenant_workers(s, "small").empty());
}

TEST_CASE("tenant caps: new capped jobs spread over the least loaded workers") {
  auto s = cluster(3);
  const TenantCaps caps{{"t1", 1}, {"t2", 1}, {"t3", 2}};
  auto j1 = add_job(s, "t1");
  auto j2 = add_job(s, "t2");
  auto p1 = place(s, caps, j1);
  auto p2 = place(s, caps, j2);
  REQUIRE(p1.size() == 1);
  REQUIRE(p2.size() == 1);
  CHECK(p1 != p2); // the second one avoids the busy worker
  auto j3 = add_job(s, "t3");
  auto p3 = place(s, caps, j3);
  REQUIRE(p3.size() == 2);
  CHECK(std::find(p3.begin(), p3.end(), worker_id_t{6} - p1[0] - p2[0]) != p3.end());
  CHECK(cap_of(caps, "t3") == 2);
  CHECK(cap_of(caps, "other") == 0);
}

TEST_CASE("tenant buffers: a tenant at its cap is held back until its buffers drain") {
  auto buffers = std::make_shared<TenantBuffers>();
  auto a1 = buffers->join("a", 100);
  auto a2 = buffers->join("a", 100);
  auto b = buffers->join("b", 0);
  CHECK(a1->capped());
  CHECK(!b->capped());
  a1->set(60);
  CHECK(!a1->held_back());
  a2->set(40); // together at the cap
  CHECK(a1->held_back());
  CHECK(a2->held_back());
  b->set(1000000); // no cap: never held back, and not counted against "a"
  CHECK(!b->held_back());
  // A task with an empty buffer may still make one element (no tenant's job starves another).
  a2->set(0);
  a1->set(100);
  CHECK(a1->held_back());
  CHECK(!a2->held_back());
  // Consumers take: below the cap, production resumes.
  a1->set(30);
  CHECK(!a1->held_back());
  auto usage = buffers->usage();
  REQUIRE(usage.size() == 2);
  CHECK(usage[0].tenant == "a");
  CHECK(usage[0].cap == 100);
  CHECK(usage[0].bytes == 30);
  CHECK(usage[0].tasks == 2);
  CHECK(usage[1].bytes == 1000000);
  // A task that ends takes its bytes away; a tenant with no task left is forgotten.
  a1.reset();
  CHECK(buffers->usage()[0].bytes == 0);
  a2.reset();
  b.reset();
  CHECK(buffers->usage().empty());
}
