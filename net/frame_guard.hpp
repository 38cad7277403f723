// The frame guard: a small TCP front end on a node's public port, in front of CAF's own BASP
// reader (which, in 0.17.6, reserves whatever payload length a 32-byte header announces — one
// header saying 0xFFFFFFFF made the dispatcher allocate ~4 GB and stall).
//
//   peer --TCP--> guard (public host:port) --TCP--> CAF (127.0.0.1:internal port)
//
// For every accepted connection the guard opens one to CAF and copies bytes both ways. In plain
// mode it parses the peer's BASP frames (header: operation u8, 2 padding, flags u8, payload length
// u32 big-endian, 24 more bytes) and closes the connection on an unknown operation, a first frame
// that is not a client handshake, or a payload longer than the limit — before CAF sees the header,
// so nothing is reserved. The limit: `handshake_max_bytes` for the handshake; then, when the node
// requires a token (`require_admission`), `preauth_max_bytes` until the peer's node is admitted
// (net/admitted_peers.hpp: the actors admit a node once a message of it carried the token), and
// `max_frame_bytes` from then on. The guard learns the peer's node from its client handshake (the
// payload is the serialized caf::node_id). At most one connection per node and guard is lifted (the
// first that needs it: a second connection claiming an admitted node's id stays capped), and when
// a lifted connection closes its node is forgotten, so a new connection proves the token again.
// A node id is no secret (host hash and process id): a peer that knows an admitted node's id and
// connects while that node has no lifted connection gets `max_frame_bytes` — as it could pass the
// dispatcher's own admitted-node check; use TLS where that matters. In TLS mode the
// bytes are encrypted, so it only bounds connections (OpenSSL bounds the handshake, and only peers
// with a certificate get further). Plain mode: connections not admitted yet (no handshake; with a
// token, no token shown) hold at most 3/4 of `max_connections`; past that a new connection closes
// the oldest of them, so strangers holding connections cannot lock clients out. Either way: at
// most `max_connections_per_address` from one IP, and at most `max_connections` at once (more are closed
// on accept), and a connection silent in both directions for `idle_timeout` is closed.
// One thread accepts; each connection has one thread (so at most max_connections + 1 threads).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

struct GuardLimits {
  bool parse_basp = true; // false for TLS (encrypted bytes)
  uint32_t handshake_max_bytes = 64 << 10;
  // true when the node requires an admission token: frames after the handshake are capped at
  // preauth_max_bytes until the peer's node is admitted. false: every peer counts as admitted
  // once its handshake is seen.
  bool require_admission = false;
  uint32_t preauth_max_bytes = 64 << 10;
  uint32_t max_frame_bytes = 64 << 20;
  int max_connections = 128;
  // Open connections from one peer address (IP) at once; more are closed on accept.
  int max_connections_per_address = 32;
  std::chrono::milliseconds idle_timeout{30000};
  // Plain mode: a peer must finish its BASP client handshake within this long.
  std::chrono::milliseconds handshake_timeout{10000};
};

struct GuardStats {
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused_full{0};       // closed on accept: too many connections
  std::atomic<int64_t> refused_address{0};    // closed on accept: too many from that address
  std::atomic<int64_t> evicted_unadmitted{0}; // oldest unadmitted closed to make room
  std::atomic<int64_t> closed_bad_frame{0};
  std::atomic<int64_t> closed_preauth{0}; // of closed_bad_frame: over the pre-auth cap
  std::atomic<int64_t> lifted{0};         // connections whose node was admitted
  std::atomic<int64_t> closed_idle{0};    // idle, or no handshake in time
  std::atomic<int> open{0};
};

class FrameGuard {
public:
  // Listens on host:port (0 = any free port) and forwards to 127.0.0.1:target_port.
  // io_error naming the address when it cannot listen.
  static Expected<std::unique_ptr<FrameGuard>> start(const std::string& host, uint16_t port,
                                                     uint16_t target_port, GuardLimits limits,
                                                     std::string node_name);
  ~FrameGuard(); // stops accepting, closes every connection, joins the threads
  uint16_t port() const { return port_; }
  const GuardStats& stats() const { return *stats_; }

  struct Shared; // state shared with the connection threads

private:
  FrameGuard() = default;
  uint16_t port_ = 0;
  std::shared_ptr<GuardStats> stats_;
  std::shared_ptr<Shared> shared_;
};

// The BASP check on its own (for tests): given the 32 header bytes, OK or why the frame is refused.
// `admitted`: the peer's node was admitted (or the node requires no token); it matters only after
// the handshake.
Status check_basp_header(const unsigned char* header, bool handshake_done, bool admitted,
                         const GuardLimits& limits);

} // namespace conveyor::actors
