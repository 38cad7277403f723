// The actors' side of net/admitted_peers.hpp: a caf::node_id's key, and admitting the node of the
// message being handled once its token was checked.
#pragma once

#include <string>

#include <caf/fwd.hpp>

namespace conveyor::actors {

// The bytes CAF's binary serializer writes for `node`: what that node sends as the payload of its
// BASP client handshake (libcaf_io basp::instance::write_client_handshake in 0.17.6).
std::string node_key(const caf::node_id& node);

// Call after the current message's token passed the check: admits its sender's node (nothing
// for a message from this node or without a sender). Cheap when the same node is admitted again
// (a worker calls it on every get_elements): one compare per call on this thread.
void admit_sender_node(caf::local_actor* self);

} // namespace conveyor::actors
