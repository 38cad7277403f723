#include "worker/tenant_buffers.hpp"

#include <utility>

namespace conveyor::actors {

TenantBuffers::Slot::Slot(std::shared_ptr<TenantBuffers> owner, std::string tenant, bool capped)
  : owner_(std::move(owner)), tenant_(std::move(tenant)), capped_(capped) {}

TenantBuffers::Slot::~Slot() {
  std::lock_guard<std::mutex> lock{owner_->mu_};
  auto t = owner_->tenants_.find(tenant_);
  if (t == owner_->tenants_.end())
    return;
  t->second.bytes -= bytes_;
  if (--t->second.tasks == 0)
    owner_->tenants_.erase(t);
}

void TenantBuffers::Slot::set(int64_t bytes) {
  if (bytes == bytes_)
    return;
  std::lock_guard<std::mutex> lock{owner_->mu_};
  owner_->tenants_[tenant_].bytes += bytes - bytes_;
  bytes_ = bytes;
}

bool TenantBuffers::Slot::held_back() const {
  if (bytes_ == 0)
    return false;
  std::lock_guard<std::mutex> lock{owner_->mu_};
  auto t = owner_->tenants_.find(tenant_);
  return t != owner_->tenants_.end() && t->second.cap > 0 && t->second.bytes >= t->second.cap;
}

std::unique_ptr<TenantBuffers::Slot> TenantBuffers::join(const std::string& tenant, int64_t cap) {
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto& t = tenants_[tenant];
    t.cap = cap;
    ++t.tasks;
  }
  return std::make_unique<Slot>(shared_from_this(), tenant, cap > 0);
}

std::vector<TenantBuffers::Usage> TenantBuffers::usage() const {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<Usage> out;
  for (const auto& [name, t] : tenants_)
    out.push_back(Usage{name, t.cap, t.bytes, t.tasks});
  return out;
}

} // namespace conveyor::actors
