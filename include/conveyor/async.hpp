// The asynchronous consumer API, for code that is itself a CAF actor. Includes CAF; the
// blocking API (conveyor/client.hpp) does not.
//
//   caf::actor_system_config cfg;
//   conveyor::configure_actor_system(cfg);           // middleman, message types, heartbeats
//   caf::actor_system sys{cfg};
//   auto sink = sys.spawn(my_sink);                  // accepts conveyor::msg::stream_batch
//   auto stream = conveyor::spawn_element_stream(sys, sink, "127.0.0.1:5050",
//                                                StreamSource::from_dataset(ds), options);
//   // my_sink receives stream_batch{elements, end_of_sequence, status, source} messages and
//   // returns credits with self->send(batch.source, conveyor::msg::ack_atom_v, uint64_t{n})
//   // once it has taken n elements. At most max_outstanding_requests elements are requested or unacked.
//   // The last batch has end_of_sequence or a non-OK status. (cancel_atom) stops the stream.
//
// Keep one actor system for the process's life: CAF 0.17.6 counts the systems a process starts in
// one byte of their node IDs, so a system made after 255 others can take a live one's ID, and two
// live systems with one ID get each other's replies. (conveyor's own Clients and servers skip
// the IDs of each other's live systems, not of yours.)
#pragma once

#include <optional>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "conveyor/client.hpp"
#include "conveyor/options.hpp"
#include "conveyor/messages/consumer_api.hpp"
#include "conveyor/dataset.hpp"

namespace conveyor {

// Loads the middleman, registers conveyor's message types and error category, and enables
// connection heartbeats. Call before constructing the actor_system.
void configure_actor_system(caf::actor_system_config& cfg, const NetworkConfig& network = {});

// What a stream reads: a dataset to register (distribute) or a registered dataset id.
struct StreamSource {
  std::optional<Dataset> dataset;
  std::string dataset_id;
  static StreamSource from_dataset(Dataset d) { return StreamSource{std::move(d), {}}; }
  static StreamSource from_id(std::string id) { return StreamSource{std::nullopt, std::move(id)}; }
};

// Spawns a consumer actor that connects to the dispatcher at `dispatcher_address`
// asynchronously (bounded by client.connect_timeout), registers the dataset if one is given,
// joins or creates the job and pushes the elements to `sink`. Every error — bad options, an
// unreachable dispatcher, an unknown dataset id, a failed task — arrives as the final
// stream_batch's status; invalid options are reported to `sink` at once and give a null handle.
msg::stream_actor spawn_element_stream(caf::actor_system& sys, msg::stream_sink_actor sink,
                                       const std::string& dispatcher_address, StreamSource source,
                                       DistributeOptions options, ClientConfig client = {});

} // namespace conveyor
