// A loopback port nothing listens on right now: one below the kernel's ephemeral range that a
// bind accepted, closed again at once so that a process started next can bind it (tests that must
// name ports before a server starts: a fixed worker list, a dispatcher restarted on its old port).
// 0 when no such port was found.
#pragma once

#include <cstdint>

namespace conveyor::testing {

uint16_t free_loopback_port();

} // namespace conveyor::testing
