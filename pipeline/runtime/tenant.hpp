// A job's tenant and weight (DistributeOptions::tenant, tenant_weight): checked alike by the
// client, the dispatcher and the CLI. The name ends up in metrics labels and status tables, so
// it is kept to a plain token.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "conveyor/status.hpp"

namespace conveyor {

inline constexpr std::size_t kMaxTenantName = 64;

// invalid_argument naming `tenant` or `tenant_weight` and what was expected: a name of 1 to 64
// characters from [A-Za-z0-9_.-], a weight of at least 1.
Status validate_tenant(std::string_view tenant, int64_t weight);

// Per-tenant caps (`--tenant-max-workers`, `--tenant-max-buffer-bytes`): tenant -> a positive
// number. A tenant not named has no cap.
using TenantCaps = std::map<std::string, int64_t>;

// Parses "TENANT=N[,TENANT=N...]" given to `flag` (its name, for the message): each tenant a
// valid name (validate_tenant) named once, each N an integer of at least 1. invalid_argument
// naming the flag, the bad entry and what was expected.
Expected<TenantCaps> parse_tenant_caps(std::string_view text, std::string_view flag);
// The same checks on caps given as a map (the C++ and Python configs): invalid_argument naming
// `field`.
Status validate_tenant_caps(const TenantCaps& caps, std::string_view field);

} // namespace conveyor
