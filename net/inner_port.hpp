// The port CAF listens on behind the frame guard (net/frame_guard.hpp) is on 127.0.0.1, which any
// local user can reach — and there CAF 0.17.6 reserves whatever a BASP header announces (512 MiB
// from one header). CAF accepts with ::accept (libcaf_io policy/tcp.cpp) and has no hook to refuse
// a connection, so inner_port.cpp interposes `accept` (as openssl_error_queue.cpp does for SSL_*)
// and, for a connection to a protected port, lets through only one whose peer is 127.0.0.1 on a
// source port the guard bound for its own connection to CAF (the guard binds before it connects,
// and no other socket can bind that address and port while the guard holds it). Anything else is
// closed at once and `accept` says EAGAIN, which CAF treats as "nothing to accept yet".
// Not covered: a connection accepted between CAF's publish and protect() (start-up, a few ms).
#pragma once

#include <cstdint>

namespace conveyor::actors::inner_port {

// Whether this process's calls to `accept` resolve to the checking version (not the case in a
// module loaded with RTLD_LOCAL, e.g. the Python extension). Also links the definitions in.
bool accept_checked();

// Connections accepted on 127.0.0.1:`port` are checked from now on (until unprotect).
void protect(uint16_t port);
void unprotect(uint16_t port);

// The guard's own connection to CAF leaves from 127.0.0.1:`port`.
void allow_source(uint16_t port);
void disallow_source(uint16_t port);

// Connections closed on a protected port so far.
int64_t refused();

} // namespace conveyor::actors::inner_port
