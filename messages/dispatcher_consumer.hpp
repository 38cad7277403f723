// Client / consumer -> dispatcher: handshake, dataset registration, job creation. Also defines
// the dispatcher's whole interface (it is the actor workers and clients connect to).
//
//   client -> dispatcher  client_hello{version} -> dispatcher_hello (version_mismatch if the
//                         versions differ; the dispatcher logs the refusal too)
//   client -> dispatcher  register_dataset{definition, compression, requested_id} ->
//                         dataset_registered{id}. Same fingerprint -> same id; a requested id
//                         naming another definition -> already_exists.
//   client -> dispatcher  get_element_spec{dataset} -> element_spec_reply{spec}: the registered
//                         dataset's element spec (not_found for an unknown id).
//   client -> dispatcher  get_or_create_job{dataset, job_name, policy, ...} -> job_info{job}.
//                         A named job is keyed by (dataset, job_name, iteration) as in tf.data:
//                         every consumer asking for that iteration shares it (they must ask
//                         for the same options: invalid_argument naming the option otherwise);
//                         once it ended it stays (job_info.finished, no handle: the consumer
//                         reads end of sequence) until job GC. kNextIteration asks for the
//                         name's running job, or its next iteration. An unnamed job is private.
#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>
#include <caf/optional.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/dispatcher_job.hpp"
#include "messages/dispatcher_worker.hpp"
#include "messages/protocol.hpp"
#include "messages/status.hpp"
#include "messages/type_ids.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/sharding/sharding.hpp"

namespace conveyor::msg {

struct client_hello {
  uint32_t protocol_version = 0;
  std::string client;     // a name for the dispatcher's log
  std::string auth_token; // admission proof (NetworkConfig::auth_token); never logged
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_hello& x) {
  return f(caf::meta::type_name("client_hello"), x.protocol_version, x.client, x.auth_token);
}

struct dispatcher_hello {
  uint32_t protocol_version = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dispatcher_hello& x) {
  return f(caf::meta::type_name("dispatcher_hello"), x.protocol_version);
}

struct register_dataset {
  std::string definition; // pipeline/graph/serialize.hpp to_binary form
  Compression compression = Compression::automatic;
  caf::optional<std::string> requested_id;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, register_dataset& x) {
  return f(caf::meta::type_name("register_dataset"), x.definition, x.compression, x.requested_id);
}

struct dataset_registered {
  dataset_id_t dataset;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dataset_registered& x) {
  return f(caf::meta::type_name("dataset_registered"), x.dataset);
}

// A registered dataset's element spec, as tf.data's GetElementSpec: what from_dataset_id
// re-nests the elements with when the reader has no dataset in hand.
struct get_element_spec {
  dataset_id_t dataset;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_element_spec& x) {
  return f(caf::meta::type_name("get_element_spec"), x.dataset);
}

struct element_spec_reply {
  std::string spec; // pipeline/io/snapshot_files.hpp format_spec_components; "" = unknown
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, element_spec_reply& x) {
  return f(caf::meta::type_name("element_spec_reply"), x.spec);
}

struct get_or_create_job {
  dataset_id_t dataset;
  caf::optional<std::string> job_name; // none = a private job
  ShardingPolicy policy = ShardingPolicy::off;
  caf::optional<int64_t> num_consumers;
  std::string target_workers = "AUTO";
  // Read with the cross-trainer cache (the consumer's trainer id goes in get_elements): the job's
  // tasks keep a cache its trainers share (worker/cross_trainer_cache.hpp).
  CacheSharing cross_trainer_cache = CacheSharing::none;
  // Named jobs: a repetition ends only once this many consumers joined it and read to its end
  // (DistributeOptions::expected_consumers).
  int64_t expected_consumers = 1;
  // Named jobs: the consumer's iteration index (tf.data: how many times this consumer's dataset
  // was iterated before), or kNextIteration (the name's running job, else its next iteration).
  int64_t iteration = 0;
  // The tenant whose share of the workers' executor threads the job's tasks use, and its weight
  // (DistributeOptions::tenant, tenant_weight; pipeline/runtime/fair_share.hpp).
  std::string tenant = "default";
  int64_t tenant_weight = 1;
  // DistributeOptions::resume_from: a read cursor (pipeline/sharding/read_cursor.hpp) the new
  // private DYNAMIC job continues from — it hands out no complete split and has the workers skip
  // the consumed prefix of the partial ones. Empty = a read from the start.
  std::string resume_cursor = {};
  // DistributeOptions::deterministic: > 0, the job hands out no split more than this many
  // splits past the lowest unfinished one of its epoch, and tells its consumer which splits
  // finished (task_list::finished_splits), for the consumer's reorder. 0 = off.
  int64_t deterministic_window = 0;
};
inline constexpr int64_t kNextIteration = -1;
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_or_create_job& x) {
  return f(caf::meta::type_name("get_or_create_job"), x.dataset, x.job_name, x.policy,
           x.num_consumers, x.target_workers, x.cross_trainer_cache, x.expected_consumers,
           x.iteration, x.tenant, x.tenant_weight, x.resume_cursor, x.deterministic_window);
}

struct job_info {
  job_id_t job = 0;
  std::string job_name; // empty for a private job
  dataset_id_t dataset;
  ShardingPolicy policy = ShardingPolicy::off;
  bool finished = false;  // the job ended before this consumer could join (it says so loudly)
  job_actor handle;       // null when finished and released
  int64_t repetition = 0; // named jobs: the iteration of the name this job reads (0, 1, ...)
  // What a consumer's read cursor records (ElementStream::checkpoint): the dataset's fingerprint,
  // the job's DYNAMIC split size, and whether its elements carry their split (a per-split
  // pipeline: only then can a read be resumed).
  std::string fingerprint = {};
  int64_t split_size = 0;
  bool per_split = false;
  int64_t file_seed = -1; // the order of list_files(shuffle=True) without a seed (JobEntry)
  // OFF: why a read of the job's pipeline cannot be resumed (off_resume_refusal; empty: it can).
  std::string off_refusal = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_info& x) {
  return f(caf::meta::type_name("job_info"), x.job, x.job_name, x.dataset, x.policy, x.finished,
           x.handle, x.repetition, x.fingerprint, x.split_size, x.per_split, x.file_seed,
           x.off_refusal);
}

// A consumer whose dispatcher restarted asks for its job again by id (the restarted dispatcher
// replayed it from its journal). Replies job_info (finished and no handle for a job that ended
// meanwhile); not_found when the dispatcher does not know the job (it restarted without its
// --work-dir state).
struct rejoin_job {
  job_id_t job = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rejoin_job& x) {
  return f(caf::meta::type_name("rejoin_job"), x.job);
}

using dispatcher_actor =
  job_report_actor::extend<caf::replies_to<rejoin_job>::with<job_info>,
                           caf::replies_to<client_hello>::with<dispatcher_hello>,
                           caf::replies_to<register_dataset>::with<dataset_registered>,
                           caf::replies_to<get_or_create_job>::with<job_info>,
                           caf::replies_to<get_element_spec>::with<element_spec_reply>,
                           caf::replies_to<register_worker>::with<worker_registered>,
                           caf::replies_to<worker_heartbeat>::with<heartbeat_ack>,
                           caf::replies_to<get_status>::with<cluster_status>,
                           caf::replies_to<start_snapshot>::with<snapshot_started>,
                           caf::replies_to<get_snapshot_splits>::with<snapshot_splits>>;

} // namespace conveyor::msg
