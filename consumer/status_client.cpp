#include "consumer/status_client.hpp"

#include <algorithm>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "node/node_config.hpp"
#include "net/transport.hpp"
#include "messages/all.hpp"

namespace conveyor::actors {

Expected<msg::cluster_status> fetch_status(const std::string& address,
                                           std::chrono::milliseconds timeout, bool include_jobs,
                                           const NetworkConfig& network) {
  auto addr = parse_address(address);
  if (!addr.ok())
    return addr.status();
  NodeSystem node{network};
  auto& sys = node.get();
  auto transport = make_transport(sys, network);
  auto dispatcher = connect_blocking<msg::dispatcher_actor>(
    sys, *transport, *addr, caf::timespan{timeout}, "the dispatcher");
  if (!dispatcher.ok())
    return dispatcher.status();
  Expected<msg::cluster_status> result{Status{ErrorCode::internal, "no answer"}};
  {
    caf::scoped_actor self{sys};
    self
      ->request(*dispatcher, caf::timespan{timeout},
                msg::get_status{include_jobs, network.auth_token})
      .receive(
        [&](msg::cluster_status& s) {
          s.dispatcher = addr->to_string();
          result = std::move(s);
        },
        [&](caf::error& err) {
          result = msg::to_status(err, "asking the dispatcher at " + addr->to_string() +
                                         " for its status");
        });
  }
  return result;
}

Expected<msg::cluster_status> fetch_status_when_jobs_finished(const std::string& address,
                                                              std::chrono::milliseconds timeout,
                                                              std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto status = fetch_status(address, timeout);
    if (!status.ok() || std::chrono::steady_clock::now() >= deadline ||
        std::all_of(status->jobs.begin(), status->jobs.end(),
                    [](const msg::job_status& j) { return j.finished; }))
      return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace conveyor::actors
