// Asks a running dispatcher for its status (messages/status.hpp) from outside any actor system:
// `conveyor status` and `conveyor read`'s "no workers" diagnosis use it.
#pragma once

#include <chrono>
#include <string>

#include "conveyor/options.hpp"
#include "messages/status.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// Connects to the dispatcher at `address` ("host:port"), asks, and disconnects; every step is
// bounded by `timeout`. `network` gives the TLS files and the admission token of a secured
// cluster (the dispatcher answers only a request with its token). unavailable /
// deadline_exceeded when it cannot be reached; permission_denied for a missing or wrong token.
Expected<msg::cluster_status> fetch_status(const std::string& address,
                                           std::chrono::milliseconds timeout,
                                           bool include_jobs = true,
                                           const NetworkConfig& network = {});

// fetch_status, asked again every 20 ms until the dispatcher holds no live job (finished jobs
// stay listed) or `wait` has passed; the last answer either way. The benchmarks use it to let a
// job's release land before they sample or stop the nodes.
Expected<msg::cluster_status> fetch_status_when_jobs_finished(const std::string& address,
                                                              std::chrono::milliseconds timeout,
                                                              std::chrono::milliseconds wait);

} // namespace conveyor::actors
