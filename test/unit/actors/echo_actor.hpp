// A published echo actor and a blocking ask, for tests of CAF's network layer under conveyor's
// configuration (connection_reuse_test.cpp, node_identity_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

namespace conveyor::test {

// Answers x with x + offset. (It takes an argument because CAF 0.17.6 dereferences a null
// argument tuple when a function actor is spawned without one, which UBSan reports.)
inline caf::behavior echo(caf::event_based_actor*, int32_t offset) {
  return {[offset](int32_t x) { return x + offset; }};
}

// Whether `sys` gets x back from an echo(0) `target` within 2 s.
inline bool answered(caf::actor_system& sys, const caf::actor& target, int32_t x) {
  caf::scoped_actor self{sys};
  bool ok = false;
  self->request(target, std::chrono::seconds(2), x)
    .receive([&](int32_t got) { ok = got == x; }, [&](caf::error&) { ok = false; });
  return ok;
}

} // namespace conveyor::test
