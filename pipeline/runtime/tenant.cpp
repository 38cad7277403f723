#include "pipeline/runtime/tenant.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
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

namespace {

Status check_cap(std::string_view tenant, int64_t n, std::string_view where) {
  if (auto s = validate_tenant(tenant, 1); !s.ok())
    return invalid_argument(std::string{where} + ": " + s.message());
  if (n < 1)
    return invalid_argument(std::string{where} + ": the cap of tenant \"" + std::string{tenant} +
                            "\" must be at least 1, got " + std::to_string(n));
  return Status::OK();
}

} // namespace

Expected<TenantCaps> parse_tenant_caps(std::string_view text, std::string_view flag) {
  const std::string where = "`" + std::string{flag} + "`";
  TenantCaps caps;
  if (text.empty())
    return invalid_argument(where + " must be TENANT=N[,TENANT=N...], got nothing");
  for (std::size_t b = 0; b <= text.size();) {
    const auto e = std::min(text.find(',', b), text.size());
    const auto entry = text.substr(b, e - b);
    b = e + 1;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == entry.size())
      return invalid_argument(where + " entry \"" + std::string{entry} +
                              "\" must be TENANT=N (e.g. team-a=2)");
    const auto tenant = entry.substr(0, eq);
    const std::string number{entry.substr(eq + 1)};
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != number.size() || number.empty() ||
        !std::isdigit(static_cast<unsigned char>(number[0])))
      return invalid_argument(where + " entry \"" + std::string{entry} + "\": \"" + number +
                              "\" is not a whole number");
    CONVEYOR_RETURN_IF_ERROR(check_cap(tenant, n, where));
    if (!caps.emplace(std::string{tenant}, n).second)
      return invalid_argument(where + " names tenant \"" + std::string{tenant} + "\" twice");
  }
  return caps;
}

Status validate_tenant_caps(const TenantCaps& caps, std::string_view field) {
  for (const auto& [tenant, n] : caps)
    CONVEYOR_RETURN_IF_ERROR(check_cap(tenant, n, "`" + std::string{field} + "`"));
  return Status::OK();
}

} // namespace conveyor
