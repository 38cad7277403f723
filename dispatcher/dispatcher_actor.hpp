// The dispatcher actor: owns the cluster state (dispatcher/dispatcher_state.hpp) — datasets by id
// and fingerprint, workers and their heartbeats, jobs by name — and one job actor per job.
//
// Every request that changes the state is handled the same way: validate, decide ids and time
// (from the actor's clock), make the update record and hand it to persist(), the one
// persist-then-apply path: the record is applied to the in-memory DispatcherState (so that
// the next ids are decided on it) and appended to the journal (dispatcher/journal.hpp, with
// --work-dir); its effects (spawning a job actor, telling jobs about new or removed tasks) and
// every reply run only once the journal says the record is durable (group fsync), in order.
// Nothing the dispatcher says or does leaves the actor before the records it depends on are on
// disk, so a crash loses only changes nobody has seen.
//
// Restart: DispatchServer opens the journal, which replays snapshot + records into a
// DispatcherState; the actor starts from it, re-spawns a job actor for every unfinished job
// (DYNAMIC: the split provider restored to the journaled position), and treats every known
// worker as freshly heartbeated: a worker that registers again at the same address keeps its
// id and tasks (its task actors go on serving), one that does not is removed after
// worker_timeout. Consumers re-find their job with rejoin_job.
//
// Workers: registration carries the protocol version (a mismatch is refused and logged); a
// worker is removed when its connection goes down or after worker_timeout without heartbeat,
// and every job loses its task on it. A worker that registers while jobs run gets a task for
// every unfinished job.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/timespan.hpp>

#include "dispatcher/autoscale_policy.hpp"
#include "messages/dispatcher_consumer.hpp"
#include "messages/type_ids.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/runtime/tenant.hpp"

namespace conveyor::actors {

class JournalWriter;
class DispatcherState;

struct DispatcherStart {
  std::string address; // "host:port" it listens on (for logs)
  caf::timespan worker_timeout = std::chrono::seconds(5);
  caf::timespan job_gc_timeout = std::chrono::seconds(60);
  caf::timespan request_timeout = std::chrono::seconds(10);
  caf::timespan client_timeout = std::chrono::seconds(60); // consumers' heartbeats
  int64_t range_split_size = 64; // DYNAMIC: elements per split (the minimum when adaptive)
  // Coordinated reads: how many rounds beyond the consumers' planned rounds a new worker joins
  // (coordinated/round_robin.hpp RoundRobinJob; the simulator uses a small one).
  int64_t round_lookahead = 256;
  bool adaptive_split_size = true;           // size splits from the dataset's cardinality
  std::vector<std::string> worker_addresses; // normalised "host:port"; see DispatcherConfig
  uint32_t protocol_version = msg::kProtocolVersion;
  // Admission (net/admission.hpp): the token workers and consumers must present; empty = none.
  std::string auth_token;
  // Bounds on a registered dataset (its encoded definition and its graph's node count).
  std::size_t max_dataset_bytes = 16 << 20;
  std::size_t max_dataset_nodes = 10000;
  // Where the file patterns of DYNAMIC file sources and FILE-sharding checks may be listed
  // (--allow-path); null = unrestricted.
  std::shared_ptr<const PathPolicy> paths;
  // --snapshot-reuse directories (dispatcher/snapshot_reuse.hpp), checked against `paths`.
  std::vector<std::string> snapshot_reuse;
  // Null: state in memory only. Otherwise the opened journal and the state it replayed.
  std::shared_ptr<JournalWriter> journal;
  std::shared_ptr<DispatcherState> restored;
  // The worker estimate (dispatcher/worker_estimate.hpp) is made every autoscale_interval from
  // the jobs' status (0 = never: the simulator's default); with a scale_command ("CMD {n}",
  // dispatcher/scale_command.hpp) the autoscaler (dispatcher/autoscale_policy.hpp) acts on it.
  caf::timespan autoscale_interval{0};
  AutoscaleConfig autoscale;
  std::string scale_command;
  // An in-process actuator instead of scale_command (the simulator's, sim/autoscale_actuator.hpp):
  // the autoscaler acts when either is set, and a changed target goes to this one (called on the
  // dispatcher actor: it must not block).
  std::function<void(int64_t target)> scale_to;
  // Per-tenant caps (dispatcher/tenant_caps.hpp, worker/tenant_buffers.hpp): the workers a
  // tenant's jobs may have tasks on, and the bytes its tasks may buffer on each worker.
  TenantCaps tenant_max_workers;
  TenantCaps tenant_max_buffer_bytes;
};

using dispatcher_full_actor =
  msg::dispatcher_actor::extend<caf::reacts_to<msg::tick_atom>,
                                caf::reacts_to<msg::synced_atom, uint64_t, std::string>>;

dispatcher_full_actor spawn_dispatcher(caf::actor_system& sys, DispatcherStart start);

} // namespace conveyor::actors
