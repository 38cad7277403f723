// The process-wide hooks pointer. Compiled only into the object library conveyor_hooked (with
// -DCONVEYOR_SIM_HOOKS; CMakeLists.txt leaves it out of conveyor_actors), so the production
// libraries have no way to install hooks at all.
#include "node/hooks.hpp"

#include <atomic>

#ifndef CONVEYOR_SIM_HOOKS
#error                                                                                             \
  "node/hooks.cpp belongs to the simulator's build only (conveyor_hooked, -DCONVEYOR_SIM_HOOKS)"
#endif

namespace conveyor::actors::hooks {
namespace {
std::atomic<Hooks*> g_hooks{nullptr};
} // namespace

Hooks* installed() noexcept { return g_hooks.load(std::memory_order_acquire); }

Hooks* install(Hooks* hooks) noexcept { return g_hooks.exchange(hooks, std::memory_order_acq_rel); }

} // namespace conveyor::actors::hooks
