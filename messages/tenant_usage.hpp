// A worker's executor threads held per tenant (pipeline/runtime/fair_share.hpp): sent with
// every heartbeat, listed by `conveyor status`.
#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace conveyor::msg {

struct tenant_usage {
  std::string tenant;
  int64_t weight = 1;
  double thread_seconds = 0; // since the worker's process started, running items included
  // What its tasks on the worker buffer now, and their cap there (0 = none;
  // worker/tenant_buffers.hpp).
  int64_t buffered_bytes = 0;
  int64_t max_buffer_bytes = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tenant_usage& x) {
  return f(caf::meta::type_name("tenant_usage"), x.tenant, x.weight, x.thread_seconds,
           x.buffered_bytes, x.max_buffer_bytes);
}

// A tenant across the cluster (`conveyor status`): its caps (0 = none), the workers its jobs'
// tasks are on and what they buffer there in all (as of the workers' last heartbeats).
struct tenant_status {
  std::string tenant;
  int64_t max_workers = 0;
  int64_t workers = 0;
  int64_t max_buffer_bytes = 0;
  int64_t buffered_bytes = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tenant_status& x) {
  return f(caf::meta::type_name("tenant_status"), x.tenant, x.max_workers, x.workers,
           x.max_buffer_bytes, x.buffered_bytes);
}

} // namespace conveyor::msg
