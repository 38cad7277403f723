#include "net/admitted_peers.hpp"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace conveyor::actors::admitted_peers {

namespace {

// Bounded by the admitted nodes alive at once: the guard forgets a node when its connection closes.
struct Registry {
  std::shared_mutex mu;
  std::unordered_set<std::string> keys;
  std::atomic<uint64_t> generation{0};
};

Registry& registry() {
  static Registry* r = new Registry; // never destroyed: guard threads may outlive static teardown
  return *r;
}

} // namespace

void admit(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    return;
  auto& r = registry();
  {
    std::shared_lock<std::shared_mutex> lock(r.mu);
    if (r.keys.count(key) > 0) // the common case (a worker admits on every get_elements)
      return;
  }
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.keys.insert(key);
}

bool admitted(const std::string& key) {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  return r.keys.count(key) > 0;
}

void forget(const std::string& key) {
  auto& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  if (r.keys.erase(key) > 0)
    ++r.generation;
}

std::size_t size() {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  return r.keys.size();
}

} // namespace conveyor::actors::admitted_peers

namespace conveyor::actors::admitted_peers {

uint64_t generation() { return registry().generation.load(); }

} // namespace conveyor::actors::admitted_peers
