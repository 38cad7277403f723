// Asks a running dispatcher for its status (messages/status.hpp) from outside any actor system:
// `conveyor status` and `conveyor read`'s "no workers" diagnosis use it.
#pragma once

#include <chrono>
#include <string>

#include "messages/status.hpp"
#include "pipeline/status.hpp"

namespace conveyor::actors {

// Connects to the dispatcher at `address` ("host:port"), asks, and disconnects; every step is
// bounded by `timeout`. unavailable / deadline_exceeded when it cannot be reached.
Expected<msg::cluster_status> fetch_status(const std::string& address,
                                           std::chrono::milliseconds timeout,
                                           bool include_jobs = true);

} // namespace conveyor::actors
