// Per-tenant worker caps (`--tenant-max-workers`, issue 38): where the dispatcher may put a
// task of a tenant's job, decided on the cluster state alone (no actors).
//
// A tenant's workers are those holding a live task of one of its unfinished jobs. A tenant with
// a cap of N has tasks on at most N workers: a task of its job goes on a worker that already
// serves the tenant, or on a new one while it uses fewer than N. Its jobs share those workers
// (a second job of the tenant goes where the first is), and the rest of the cluster serves the
// other tenants. A tenant without a cap has a task on every worker, as before.
//
// Caps are configuration, not state: they are not journaled. A dispatcher restarted with other
// caps applies them to the tasks it creates from then on; the tasks its journal restores stay
// where they were, also above a lowered cap (removing an OFF task would lose what its consumers
// have not read), and status shows the tenant above its cap until those jobs end.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "dispatcher/dispatcher_state.hpp"
#include "pipeline/runtime/tenant.hpp"

namespace conveyor::actors {

// The cap of `tenant` in `caps`, or 0 when it has none.
int64_t cap_of(const TenantCaps& caps, const std::string& tenant);

// The workers the live tasks of `tenant`'s unfinished jobs are on.
std::set<msg::worker_id_t> tenant_workers(const DispatcherState& state, const std::string& tenant);

// Whether a new task of a job of `tenant` may go on `worker` under `max_workers`.
bool may_place(const DispatcherState& state, const TenantCaps& max_workers,
               const std::string& tenant, msg::worker_id_t worker);

// The order in which a job of `tenant` takes `workers`: those already serving the tenant
// first, then those with the fewest live tasks, then by id (so that capped tenants spread
// over the cluster instead of all landing on its first worker).
std::vector<msg::worker_id_t> placement_order(const DispatcherState& state,
                                              const std::string& tenant,
                                              std::vector<msg::worker_id_t> workers);

} // namespace conveyor::actors
