#include "pipeline/runtime/tenant.hpp"

#include <cctype>
#include <string>

namespace conveyor {

Status validate_tenant(std::string_view tenant, int64_t weight) {
  bool plain = !tenant.empty() && tenant.size() <= kMaxTenantName;
  for (char c : tenant)
    plain =
      plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!plain)
    return invalid_argument("Invalid `tenant` argument: \"" + std::string{tenant} +
                            "\". Must be 1 to " + std::to_string(kMaxTenantName) +
                            " characters of [A-Za-z0-9_.-].");
  if (weight < 1)
    return invalid_argument("`tenant_weight` must be at least 1, got " + std::to_string(weight));
  return Status::OK();
}

} // namespace conveyor
