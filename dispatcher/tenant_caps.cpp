#include "dispatcher/tenant_caps.hpp"

#include <algorithm>
#include <tuple>

namespace conveyor::actors {

int64_t cap_of(const TenantCaps& caps, const std::string& tenant) {
  auto c = caps.find(tenant);
  return c == caps.end() ? 0 : c->second;
}

std::set<msg::worker_id_t> tenant_workers(const DispatcherState& state, const std::string& tenant) {
  std::set<msg::worker_id_t> out;
  for (const auto* job : state.unfinished_jobs())
    if (job->tenant == tenant)
      for (const auto* t : state.tasks_of_job(job->id))
        out.insert(t->worker);
  return out;
}

bool may_place(const DispatcherState& state, const TenantCaps& max_workers,
               const std::string& tenant, msg::worker_id_t worker) {
  const int64_t cap = cap_of(max_workers, tenant);
  if (cap == 0)
    return true;
  const auto used = tenant_workers(state, tenant);
  return used.count(worker) > 0 || static_cast<int64_t>(used.size()) < cap;
}

std::vector<msg::worker_id_t> placement_order(const DispatcherState& state,
                                              const std::string& tenant,
                                              std::vector<msg::worker_id_t> workers) {
  const auto used = tenant_workers(state, tenant);
  auto key = [&](msg::worker_id_t w) {
    return std::make_tuple(used.count(w) == 0, state.tasks_of_worker(w).size(), w);
  };
  std::sort(workers.begin(), workers.end(),
            [&](msg::worker_id_t a, msg::worker_id_t b) { return key(a) < key(b); });
  return workers;
}

} // namespace conveyor::actors
