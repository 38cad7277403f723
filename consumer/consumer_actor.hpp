// The consumer actor: reads one job for one stream (the blocking ElementStream or the async
// API). Glossary: a *job* runs a dataset on every worker as one *task* per worker; the consumer
// learns the tasks from the job actor (in the dispatcher process) and pulls elements from the
// tasks directly, over connections it opens to each worker's advertised address.
//
//   [connect dispatcher] -> [hello]      (skipped when the caller passes a connected dispatcher:
//        the blocking Client has done both)
//   -> [register dataset] (when given a definition) -> [get or create job]
//   -> [join job] -> loop { long-poll get_tasks ; connect new workers ; request batches within
//      credits ; deliver to the sink } -> end: job finished and every task at end_of_sequence
//
// Failure handling: every request has a finite timeout; tasks and the job are monitored and a
// down_msg releases everything in flight to that peer at once (CAF does not fail in-flight
// requests to a dead peer); a task's error ends the stream with that error.
//
// A lost job (the dispatcher died or restarted): the consumer keeps reading from the tasks it
// knows (OFF tasks keep serving) and reconnects to the dispatcher with backoff for up to
// dispatcher_reconnect_timeout, asks it for the job again by id (rejoin_job: a dispatcher with
// --work-dir replayed it) and joins it again; then reading goes on as before. Without a
// dispatcher address, or when the dispatcher does not come back or does not know the job, the
// stream fails with an error saying so.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/timespan.hpp>

#include "consumer/consumer_core.hpp"
#include "consumer/element_sink.hpp"
#include "net/transport.hpp"
#include "messages/consumer_api.hpp"
#include "messages/dispatcher_consumer.hpp"

namespace conveyor::actors {

struct ConsumerStart {
  std::shared_ptr<Transport> transport;
  std::shared_ptr<ElementSink> sink;
  ConsumerLimits limits;
  caf::timespan request_timeout = std::chrono::seconds(10);
  caf::timespan task_refresh = std::chrono::milliseconds(500); // long-poll hold
  caf::timespan connect_timeout = std::chrono::seconds(5);
  // How long a consumer whose dispatcher went away tries to reach it again (see above).
  caf::timespan dispatcher_reconnect_timeout = std::chrono::seconds(30);
  uint32_t protocol_version = msg::kProtocolVersion;
  std::string auth_token; // presented in client_hello

  // The dispatcher: a handle the caller connected and greeted already, or its address.
  msg::dispatcher_actor dispatcher;
  std::string dispatcher_address;
  std::optional<std::string> definition; // register this first (distribute)
  Compression compression = Compression::automatic;
  msg::get_or_create_job job_request; // its dataset is filled in after registering
  std::string trainer_id;             // cross-trainer cache: sent with every get_elements
  // Large elements take a worker's bulk channel once it names its port; false: every element
  // comes in messages (DistributeOptions::data_transfer_protocol "caf").
  bool bulk_channels = true;
  // Coordinated reads (job_request.num_consumers set): this consumer's index, and how long a
  // round may wait for the others (coordinated/round_robin.hpp).
  int64_t consumer_index = -1;
  caf::timespan round_timeout = std::chrono::seconds(60);
};

// The one mapping of the public options onto a consumer's start parameters: the blocking
// client, the async API and the simulator all go through it. The caller adds the sink, the
// dispatcher and what to read (definition or job_request.dataset).
ConsumerStart consumer_start(const DistributeOptions& options, std::shared_ptr<Transport> transport,
                             std::chrono::milliseconds connect_timeout, uint32_t protocol_version);

msg::stream_actor spawn_consumer(caf::actor_system& sys, ConsumerStart start);

} // namespace conveyor::actors
