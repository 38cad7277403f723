// Per-tenant buffer caps on one worker (`--tenant-max-buffer-bytes`, issue 38): the bytes its
// tasks of each tenant hold in their buffers (elements made and not yet taken by a consumer),
// and whether a tenant is at its cap. No actors: each task holds a Slot and reports its buffer
// after every step and take; a task of a tenant at its cap stops producing until consumers
// take enough for the tenant to fall below it (backpressure: nothing is dropped).
//
// A task whose own buffer is empty may still make one element: tenants' jobs share the cap,
// and without this a job whose consumers stopped reading would starve another job of the same
// tenant on this worker. So a tenant passes its cap by at most one element per task.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace conveyor::actors {

class TenantBuffers : public std::enable_shared_from_this<TenantBuffers> {
public:
  // One task's part of its tenant's bytes; destroying it takes them away.
  class Slot {
  public:
    Slot(std::shared_ptr<TenantBuffers> owner, std::string tenant, bool capped);
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // The task's buffered bytes now.
    void set(int64_t bytes);
    // Whether the task must not make another element: its tenant's tasks hold at least the
    // cap together and its own buffer is not empty.
    bool held_back() const;
    const std::string& tenant() const { return tenant_; }
    // Its tenant had a cap when it joined (then it is checked after every element; else only
    // between steps, sparing uncapped tasks a lock per element).
    bool capped() const { return capped_; }

  private:
    std::shared_ptr<TenantBuffers> owner_;
    std::string tenant_;
    bool capped_ = false;
    int64_t bytes_ = 0;
  };

  // A task of `tenant` joins; `cap` is the bytes its tasks here may buffer together (0 = no
  // cap). The dispatcher sends the cap with every task: the latest one counts.
  std::unique_ptr<Slot> join(const std::string& tenant, int64_t cap);

  struct Usage {
    std::string tenant;
    int64_t cap = 0; // 0 = none
    int64_t bytes = 0;
    int64_t tasks = 0;
  };
  // Every tenant with a task here, by name.
  std::vector<Usage> usage() const;

private:
  struct Tenant {
    int64_t cap = 0;
    int64_t bytes = 0;
    int64_t tasks = 0;
  };
  mutable std::mutex mu_; // tasks run on several threads
  std::map<std::string, Tenant> tenants_;
};

} // namespace conveyor::actors
