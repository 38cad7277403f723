// The bulk data path: element frames (net/bulk_frame.hpp) on a TCP stream per (consumer,
// worker) beside the CAF control messages, owned by caf::io brokers.
//
//   worker node:   task actor --(bulk_send_atom, channel, GatherBuffer frame)--> bulk server
//                  broker (one per worker; accepts and reads the connections through CAF) -->
//                  its bulk writer (net/bulk_writer.hpp: a thread writing each frame's pieces,
//                  header and the tensors' own storage, with sendmsg: no copy on send). TLS:
//                  a session actor per connection encrypts the pieces in place (bulk_tls.hpp).
//   consumer node: bulk client broker (one per consumer actor; one connection per worker)
//                  reads a 40-byte header then exactly `length` bytes, and moves CAF's read
//                  buffer into (bulk_frame_atom, channel, task, batch_seq, index, count, bytes)
//                  for the consumer actor: the bytes become the elements' storage (no copy).
//   consumer actor <-(bulk_ready_atom, channel) once the worker acknowledged the hello
//                  <-(bulk_lost_atom, channel, reason) when the channel breaks or cannot open
//
// The consumer opens a channel with (bulk_open_atom, host, port, channel) to its bulk client.
// Both brokers come from the node's Transport (net/transport.hpp), so the simulator swaps in
// actors that carry the same frames over its simulated network (sim/sim_transport.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

namespace conveyor::actors {

class TlsEndpoint; // net/tls_stream.hpp

struct BulkServer {
  caf::actor actor;  // takes (bulk_send_atom, uint64_t channel, GatherBuffer frame)
  uint16_t port = 0; // where consumers connect (on the worker address's host)
  explicit operator bool() const { return static_cast<bool>(actor); }
};

// TCP: a broker listening on host:port (0 = a free port). With `tls`, every connection is a mutual-TLS
// session (net/tls_stream.hpp): a peer without a certificate signed by the node's CA is
// refused, and the refusal logged.
caf::expected<BulkServer> spawn_tcp_bulk_server(caf::actor_system& sys, const std::string& host,
                                                uint16_t port,
                                                std::shared_ptr<TlsEndpoint> tls = nullptr);
// TCP: the consumer-side broker delivering to `consumer`; it ends when `consumer` does. With
// `tls`, its connections are TLS sessions, the worker's certificate checked against the CA.
caf::actor spawn_tcp_bulk_client(caf::actor_system& sys, const caf::actor& consumer,
                                 std::shared_ptr<TlsEndpoint> tls = nullptr);

} // namespace conveyor::actors
