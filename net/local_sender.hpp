// Messages a node sends only to its own actors — timers (tick_atom, produce_atom), its start-up
// (connect_atom) and drain steps (drain_atom, drained_atom) — carry no admission token. Any peer
// that can reach a published actor could send them too, and so drive a worker's heartbeats, a
// task's production, a dispatcher's journal compaction or a graceful stop. Their handlers accept
// them only from an actor of the same node (a message sent with no sender is refused too: one
// from another node may come without one).
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// Whether the message `self` is handling now came from an actor of `self`'s own node (cheap: a
// task checks it on every production step).
bool from_this_node(caf::local_actor* self);

// OK when the message `self` is handling now came from an actor of `self`'s own node; else
// permission_denied "only <owner> may send <what>", logged as a warning under `log_name` with
// the sender's node.
Status check_local_sender(caf::local_actor* self, const char* log_name, const std::string& what,
                          const std::string& owner);

} // namespace conveyor::actors
