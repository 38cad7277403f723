// A job's tenant and weight (DistributeOptions::tenant, tenant_weight): checked alike by the
// client, the dispatcher and the CLI. The name ends up in metrics labels and status tables, so
// it is kept to a plain token.
#pragma once

#include <cstdint>
#include <string_view>

#include "conveyor/status.hpp"

namespace conveyor {

inline constexpr std::size_t kMaxTenantName = 64;

// invalid_argument naming `tenant` or `tenant_weight` and what was expected: a name of 1 to 64
// characters from [A-Za-z0-9_.-], a weight of at least 1.
Status validate_tenant(std::string_view tenant, int64_t weight);

} // namespace conveyor
