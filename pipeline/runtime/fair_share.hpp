// Weighted fair shares of an executor's threads (issue 38): across tenants by weight, within a
// tenant equally per group (a group is one job's share: pipeline/runtime/executor.hpp).
//
// Shares are in thread time, running items included, so a tenant whose items are long or block
// is charged for as long as they hold a thread. A tenant's virtual time is its thread time per
// unit of weight; the next group served is the first in turn whose tenant is within `lead` of
// the least virtual time among tenants with work, and which itself is within `lead` of the
// least served group of its tenant. Over a saturated stretch the tenants' thread times thus go
// as their weights (3:1 weights give 0.75/0.25 of the threads), and within `lead` tenants and
// groups take plain turns so that short items alternate. A tenant or group that had no work
// comes back at most `lead` behind (no credit saved up while idle).
//
// No clock and no lock: the caller passes `now` (any monotonic ns) and serializes the calls, so a
// test drives it with a fake clock.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

// Thread time held by a set of items (ns of the caller's clock): `used` by finished ones, plus
// `running` ones that started at `started_sum` in total.
struct ThreadTime {
  int64_t used = 0;
  int64_t running = 0;
  int64_t started_sum = 0;
  int64_t at(int64_t now) const { return used + running * now - started_sum; }
  void start(int64_t now) {
    ++running;
    started_sum += now;
  }
  void finish(int64_t started, int64_t now) {
    used += now - started;
    --running;
    started_sum -= started;
  }
};

// One tenant on one executor. `weight` >= 1 (the caller checks it); it may change between items:
// what the tenant used before is counted at the weight it had then.
struct ShareTenant {
  explicit ShareTenant(std::string tenant, int64_t w = 1) : name(std::move(tenant)), weight(w) {}
  const std::string name;
  int64_t weight;
  ThreadTime time;           // all its groups' items: the real thread time (what status reports)
  int64_t virtual_used = 0;  // finished items' thread time per unit of weight, plus catch-up
  int ready_groups = 0;      // its groups with work (the caller counts: on_ready/on_unready)
  int64_t least_served = 0;  // the least thread time of its groups with work, when last looked
  int64_t scratch_least = 0; // pick()'s per-call minimum
  void start(int64_t now) { time.start(now); }
  void finish(int64_t started, int64_t now) {
    time.finish(started, now);
    virtual_used += (now - started) / weight;
  }
  // Thread time per unit of weight, running items included.
  int64_t virtual_time(int64_t now) const {
    return virtual_used + (time.running * now - time.started_sum) / weight;
  }
};

class FairShare {
public:
  explicit FairShare(int64_t lead_ns) : lead_(lead_ns) {}

  // A group of `tenant` gets work after a time without: it, and its tenant when no other of its
  // groups has work, come back at most `lead` behind the others. `group` is its thread time.
  void on_ready(ThreadTime& group, ShareTenant& tenant, int64_t now) {
    if (tenant.ready_groups++ == 0) {
      const int64_t behind = least_virtual_ - lead_ - tenant.virtual_time(now);
      if (behind > 0)
        tenant.virtual_used += behind; // (its reported thread time stays true)
    }
    const int64_t behind = tenant.least_served - lead_ - group.at(now);
    if (behind > 0) {
      // (Credited to the group only: the tenant's own time was set right above.)
      group.used += behind;
    }
  }
  void on_unready(ShareTenant& tenant) { --tenant.ready_groups; }

  // The index in `ready` (groups with work, in turn order; non-empty) of the group to serve next.
  // `time_of(g)` is a group's ThreadTime, `tenant_of(g)` its ShareTenant&.
  template <class Seq, class TimeOf, class TenantOf>
  std::size_t pick(const Seq& ready, int64_t now, TimeOf time_of, TenantOf tenant_of) {
    for (const auto& g : ready)
      tenant_of(g).scratch_least = INT64_MAX;
    int64_t least_virtual = INT64_MAX;
    for (const auto& g : ready) {
      ShareTenant& t = tenant_of(g);
      t.scratch_least = std::min(t.scratch_least, time_of(g).at(now));
      least_virtual = std::min(least_virtual, t.virtual_time(now));
    }
    least_virtual_ = std::max(least_virtual_, least_virtual);
    for (const auto& g : ready) {
      ShareTenant& t = tenant_of(g);
      t.least_served = std::max(t.least_served, t.scratch_least);
    }
    std::size_t i = 0;
    for (const auto& g : ready) {
      const ShareTenant& t = tenant_of(g);
      if (t.virtual_time(now) <= least_virtual + lead_ &&
          time_of(g).at(now) <= t.scratch_least + lead_)
        return i; // (found: the least served group of the least served tenant qualifies)
      ++i;
    }
    return 0; // unreachable
  }

private:
  const int64_t lead_;
  int64_t least_virtual_ = 0; // the least virtual time of a tenant with work, when last looked
};

} // namespace conveyor
