// A loopback port nothing listens on right now: the OS picks it and the socket is closed again at
// once, so a process started next can bind it (tests that must name ports before a server starts:
// a fixed worker list, a dispatcher restarted on its old port). 0 when no socket could be bound.
#pragma once

#include <cstdint>

namespace conveyor::testing {

uint16_t free_loopback_port();

} // namespace conveyor::testing
