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
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tenant_usage& x) {
  return f(caf::meta::type_name("tenant_usage"), x.tenant, x.weight, x.thread_seconds);
}

} // namespace conveyor::msg
