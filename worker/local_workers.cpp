#include "worker/local_workers.hpp"

#include <atomic>
#include <map>
#include <mutex>

#include <caf/actor_cast.hpp>
#include <caf/weak_intrusive_ptr.hpp>
#include <caf/actor_control_block.hpp>

#include "pipeline/runtime/per_process.hpp"

namespace conveyor::actors {

namespace {

// Weak: the registry never keeps an actor (or its actor system) alive.
struct Entry {
  caf::weak_actor_ptr bulk_server;
  std::map<uint64_t, caf::weak_actor_ptr> tasks;
};

caf::actor strong(const caf::weak_actor_ptr& weak) {
  return caf::actor_cast<caf::actor>(weak.lock());
}

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> workers;
};

// Never destroyed: workers may stop during exit. Per process: a process forked from one that
// runs workers (a PyTorch DataLoader worker, say) has none of the workers' threads, so its
// LOCAL reads must not look for them there.
Registry& registry() {
  static PerProcess<Registry> registry;
  return registry.get([] { return new Registry; });
}

} // namespace

void LocalWorkers::add(const std::string& address, caf::actor bulk_server) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  r.workers[address] = Entry{caf::actor_cast<caf::weak_actor_ptr>(bulk_server), {}};
}

void LocalWorkers::remove(const std::string& address) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  r.workers.erase(address);
}

bool LocalWorkers::empty() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  return r.workers.empty();
}

bool LocalWorkers::contains(const std::string& address) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  return r.workers.count(address) > 0;
}

std::vector<std::string> LocalWorkers::addresses() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  std::vector<std::string> out;
  for (const auto& [address, entry] : r.workers)
    out.push_back(address);
  return out;
}

void LocalWorkers::add_task(const std::string& address, uint64_t task, caf::actor handle) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  if (auto w = r.workers.find(address); w != r.workers.end())
    w->second.tasks[task] = caf::actor_cast<caf::weak_actor_ptr>(handle);
}

void LocalWorkers::remove_task(const std::string& address, uint64_t task) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  if (auto w = r.workers.find(address); w != r.workers.end())
    w->second.tasks.erase(task);
}

caf::actor LocalWorkers::task(const std::string& address, uint64_t task) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  auto w = r.workers.find(address);
  if (w == r.workers.end())
    return {};
  auto t = w->second.tasks.find(task);
  return t == w->second.tasks.end() ? caf::actor{} : strong(t->second);
}

caf::actor LocalWorkers::bulk_server(const std::string& address) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mu};
  auto w = r.workers.find(address);
  return w == r.workers.end() ? caf::actor{} : strong(w->second.bulk_server);
}

namespace {
std::atomic<uint64_t> in_process_frames{0};
} // namespace

void LocalWorkers::note_frame() { in_process_frames.fetch_add(1, std::memory_order_relaxed); }

uint64_t LocalWorkers::frames_delivered() {
  return in_process_frames.load(std::memory_order_relaxed);
}

} // namespace conveyor::actors
