// The dispatcher actor: owns the cluster state (actors/dispatcher_state.hpp) — datasets by id
// and fingerprint, workers and their heartbeats, jobs by name — and one job actor per job.
//
// Every request that changes the state is handled the same way: validate, decide ids and time
// (from the actor's clock), make the update record, apply it, then act (spawn a job actor, tell
// jobs about new or removed tasks) and reply. A journal (a later issue) appends each record
// before it is applied.
//
// Workers: registration carries the protocol version (a mismatch is refused and logged); a
// worker is removed when its connection goes down or after worker_timeout without heartbeat,
// and every job loses its task on it. A worker that registers while jobs run gets a task for
// every unfinished job.
#pragma once

#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/timespan.hpp>

#include "messages/dispatcher_consumer.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::actors {

struct DispatcherStart {
  std::string address; // "host:port" it listens on (for logs)
  caf::timespan worker_timeout = std::chrono::seconds(5);
  caf::timespan job_gc_timeout = std::chrono::seconds(60);
  caf::timespan request_timeout = std::chrono::seconds(10);
  int64_t range_split_size = 64;
  std::vector<std::string> worker_addresses; // normalised "host:port"; see DispatcherConfig
  uint32_t protocol_version = msg::kProtocolVersion;
  // Admission (actors/admission.hpp): the token workers and consumers must present; empty = none.
  std::string auth_token;
  // Bounds on a registered dataset (its encoded definition and its graph's node count).
  std::size_t max_dataset_bytes = 16 << 20;
  std::size_t max_dataset_nodes = 10000;
};

using dispatcher_full_actor = msg::dispatcher_actor::extend<caf::reacts_to<msg::tick_atom>>;

dispatcher_full_actor spawn_dispatcher(caf::actor_system& sys, DispatcherStart start);

} // namespace conveyor::actors
