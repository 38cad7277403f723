#include "node/hooks.hpp"

#include <atomic>

namespace conveyor::actors::hooks {
namespace {
std::atomic<Hooks*> g_hooks{nullptr};
} // namespace

Hooks* installed() noexcept {
  return g_hooks.load(std::memory_order_acquire);
}

Hooks* install(Hooks* hooks) noexcept {
  return g_hooks.exchange(hooks, std::memory_order_acq_rel);
}

} // namespace conveyor::actors::hooks
