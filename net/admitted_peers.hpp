// Which peer nodes have proved the admission token, for the frame guard (net/frame_guard.hpp).
// CAF-free: a node is named by its key, the bytes CAF's binary serializer writes for its
// caf::node_id — exactly the payload of the BASP client handshake that node sends on each
// connection, so the guard can compare what a peer claims with what the actors admitted without
// parsing CAF's format. Process-wide (one node per process; the guard and the actors share it).
//
// Why: CAF 0.17.6 reserves a frame's announced payload before any actor sees it, so until a peer
// has shown the token the guard lets through only frames up to a small pre-authentication cap.
// The actors that check the token (the dispatcher: client_hello, register_worker, get_status; a
// worker: assign_task, get_elements and the other token messages) admit the sender's node here
// (net/node_key.hpp); the guard lifts the cap for that node's connection from then on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor::actors::admitted_peers {

// Keys longer than this are never admitted (a default node id is 32 bytes, a URI one a few
// dozen): the guard keeps at most this many bytes of a handshake.
inline constexpr std::size_t kMaxKeyBytes = 1024;

void admit(const std::string& key);
bool admitted(const std::string& key);
// The node's connection is gone (the guard closed it): its next connection proves the token again.
void forget(const std::string& key);
std::size_t size(); // for tests and logs
// Changes on every forget(): a cache of "already admitted" is valid while it stays the same.
uint64_t generation();

} // namespace conveyor::actors::admitted_peers
