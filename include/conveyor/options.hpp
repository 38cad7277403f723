// Options of the consumer API: how a dataset is distributed and read (the reference's
// `distribute` / `from_dataset_id` arguments, 003_3cbebc871b174894.txt), and their validation.
// No CAF here: this header is included by every user of the service.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "conveyor/sharding.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

// The reference's processing modes map onto sharding policies:
//   "parallel_epochs"   = ShardingPolicy::off     (every worker produces the whole dataset)
//   "distributed_epoch" = ShardingPolicy::dynamic (each element of an epoch produced once)
// Accepts those two strings and the ShardingPolicy names ("OFF", "dynamic", ...).
// invalid_argument with the reference's wording otherwise.
Expected<ShardingPolicy> parse_processing_mode(std::string_view mode);

// Time limits of the middleman's connection monitoring. Every node of a cluster must enable
// heartbeats, otherwise an idle but healthy peer is declared dead after `connection_timeout`.
// A connection this node opens must finish its handshake before the middleman's next heartbeat
// tick (CAF 0.17.6 ends it there otherwise; the connect loop then tries again right after the
// tick), so the interval is also the time a slow peer has to answer a handshake.
struct NetworkConfig {
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds connection_timeout{5000};
  // Scheduler threads of the node's actor system (0 = CAF's default).
  std::size_t scheduler_threads = 0;

  // Security (README "Security"). Mutual TLS through CAF's openssl module: with all three set,
  // every connection this node opens or accepts is TLS and both ends present a certificate
  // signed by `tls_ca` (PEM files). All empty = plain TCP. A cluster is all-TLS or all-plain.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  // Admission: the shared secret a worker or consumer presents in its handshake, and the one the
  // dispatcher requires (empty on the dispatcher = no token needed). Never logged.
  std::string auth_token;

  bool tls() const { return !tls_cert.empty() || !tls_key.empty() || !tls_ca.empty(); }
};

// The TLS files: all three or none, each a readable file, the key matching the certificate and
// the certificate verifying against the CA file (errors name the field).
Status validate_security(const NetworkConfig& network);

// The reference's CrossTrainerCache (003_3cbebc871b174894.txt): trainers with distinct ids
// reading one named job of an infinite dataset share what its tasks produce.
struct CrossTrainerCacheOptions {
  std::string trainer_id; // must not be empty; readers of one id share its position
  // Beyond the reference: share one epoch of a FINITE dataset instead of an infinite stream.
  // Each trainer reads every element exactly once; the workers make each element once; the
  // cache evicts only what every trainer has read, so the slowest trainer paces the others
  // (none skips). All trainers must start before a worker's cache first fills (a later one
  // fails with an error saying so). The job's trainers must agree on it.
  bool finite_epoch = false;
};

// DistributeOptions::iteration: the named job's running iteration, else its next one.
inline constexpr int64_t kNextIteration = -1;

// DistributeOptions::deterministic_hold_bytes: the consumer's default byte credits.
inline constexpr int64_t kDefaultDeterministicHoldBytes = int64_t{64} << 20;

struct DistributeOptions {
  // Processing mode: OFF, DYNAMIC, or a static policy (FILE, DATA, FILE_OR_DATA, HINT), which
  // needs a dispatcher started with its fixed worker list (DispatcherConfig::worker_addresses).
  ShardingPolicy policy = ShardingPolicy::off;
  // Consumers naming the same job (on the same dataset) share it; unset = a private job.
  std::optional<std::string> job_name;
  // Coordinated (round-robin) reads: both or neither, and only with a job_name. In each round all
  // num_consumers consumers get their element from the same worker (README "Coordinated
  // reads"); the dataset must be infinite.
  std::optional<int64_t> consumer_index;
  std::optional<int64_t> num_consumers;
  // A named job's consumers that share each repetition (beyond the reference): the repetition
  // ends only once this many consumers joined it and read to its end, so that a consumer
  // starting after the others already read everything gets end of input at once (each element
  // went to one of them) instead of starting the name's next repetition and reading the data
  // again. ConveyorIterableDataset sets it to DataLoader's num_workers. Needs a job_name; not
  // with coordinated reads (num_consumers already says it). Unset = 1. If fewer ever join, the
  // repetition ends after the dispatcher's job GC timeout.
  std::optional<int64_t> expected_consumers;
  // Named jobs: this consumer's iteration index, tf.data's key of a named job together with its
  // name (a tf.data dataset counts its iterations; the Python DistributedDataset does so too).
  // Every consumer asking for iteration N of a name shares that iteration's job; one that asks
  // after the iteration ended reads end of sequence (until the dispatcher's job GC forgets it),
  // not the data again. The N-th re-reading of a name passes N. kNextIteration (beyond the
  // reference, for readers that cannot count, like DataLoader's loader processes with
  // expected_consumers): the name's running job, else its next iteration. Needs a job_name
  // unless 0.
  int64_t iteration = 0;
  // Beyond the reference (issue 38): the tenant whose share of the workers' executor threads
  // this job's tasks run in, and the tenant's weight. Across tenants a saturated worker's threads
  // go by weight (weights 3 and 1: three quarters and a quarter); within a tenant equally per
  // job. A name of 1 to 64 characters of [A-Za-z0-9_.-]; a weight of at least 1. Consumers of a
  // named job must agree on both, and the running jobs of one tenant on its weight.
  std::string tenant = "default";
  int64_t tenant_weight = 1;
  // How many elements may be requested (in flight or buffered, not yet handed to the caller)
  // at the same time. Unset = automatic (a large element count, bounded by `max_buffered_bytes`).
  std::optional<int64_t> max_outstanding_requests;
  // Bound on the bytes the consumer requests ahead (used with the automatic setting, and as a
  // second bound when max_outstanding_requests is set).
  int64_t max_buffered_bytes = 64 << 20;
  // How elements are compressed on the wire: "AUTO" (the service decides) or "NONE".
  // Used by distribute() when it registers the dataset.
  std::string compression = "AUTO";
  // Which workers to read from (the reference's target_workers): "ANY" every worker, always over
  // the network; "LOCAL" only workers running in this process (a WorkerServer started here),
  // with no socket and no serialization in between — an error when there is none; "AUTO" every
  // worker, those of this process in-process as LOCAL, but leaves workers tagged COLOCATED in
  // other processes to their own trainers. Consumers of a named job must agree on it.
  std::string target_workers = "AUTO";
  // Limit of every single request the consumer sends (to the dispatcher, the job or a task).
  std::chrono::milliseconds request_timeout{10000};
  // How long the job may hold a task-list poll before answering "no change" (a long poll: new
  // and removed tasks are noticed at once, and at least this often otherwise).
  std::chrono::milliseconds task_refresh_interval{500};
  // Share the job's elements with other trainers through a bounded cache on each worker
  // (WorkerConfig::cross_trainer_cache_size_bytes): each trainer id reads the sequence the tasks
  // produce; one that falls behind the cache's window skips ahead to its oldest element. Needs
  // a job_name and an infinite dataset; not with coordinated reads. Any processing mode (DYNAMIC:
  // each worker's cache holds what it made from its splits).
  std::optional<CrossTrainerCacheOptions> cross_trainer_cache;
  // Coordinated reads: how long a round may wait for the consumers that have not asked for it
  // yet; then the waiting consumers fail with an error naming the missing consumer indices.
  std::chrono::milliseconds round_timeout{60000};
  // What an OFF read does when a worker leaves before its task reached its end (killed,
  // preempted, restarted): "continue" (the default, as tf.data) reads on with the workers left —
  // that worker's copy of the dataset is short, never in silence: a warning names the worker and
  // task, and the loss is counted (StreamStats::lost_tasks, `conveyor read --stats`, the
  // dispatcher's conveyor_job_lost_tasks_total); "fail" ends the read with an error instead.
  // Only for OFF: DYNAMIC hands a lost worker's splits to the others (nothing is lost), and the
  // static policies (FILE, DATA, ...) always fail, since a lost shard's elements are in no other
  // copy. Unset = "continue" for OFF.
  std::optional<std::string> on_worker_loss;
  // How elements travel from the workers (the reference's data_transfer_protocol). conveyor has
  // two paths: CAF messages (control, and small elements inline) and its bulk channel (a
  // separate connection per worker that large elements take as frames, without a copy into a
  // message). "grpc" (the reference's default, which conveyor does not speak) and "bulk" both
  // mean conveyor's default: messages, and the bulk channel once a worker names its port; "caf"
  // keeps every element in CAF messages (no bulk channel: for networks that allow only the
  // workers' main port). Unset = the default. Anything else is refused, naming these values.
  std::optional<std::string> data_transfer_protocol;
  // What distribute() does when the dataset holds an op with external state (tf.data's
  // experimental_external_state_policy; in conveyor, `random`): "WARN" registers it and logs a
  // warning naming the op, "IGNORE" registers it silently, "FAIL" refuses it
  // (failed_precondition). Unset = "WARN", as the reference. Any case.
  std::optional<std::string> external_state_policy;
  // Beyond the reference (issue 36): continue a DYNAMIC read from a read cursor that
  // ElementStream::checkpoint() returned (stored by the trainer beside its model, maybe in an
  // earlier process or before the whole cluster restarted). The new private job hands out only
  // what the cursor does not cover: every element of the epoch is consumed once over all the
  // attempts (docs/SEMANTICS.md "Resumable reads"). Needs the DYNAMIC mode, no job_name, no
  // cross-trainer cache, and the cursor's own dataset (refused naming `resume_from` otherwise).
  // OFF reads resume too, and coordinated ones (num_consumers, with their job_name): each of
  // the N trainers resumes its own share from its latest cursor, in any order (the job starts
  // at the earliest once all N are there; those ahead drop what they had), with the same
  // num_consumers (another number is refused naming both).
  std::optional<std::string> resume_from;
  // Reproducible order (issue 36): the stream hands out the elements in their splits' order
  // (epoch, index) and each split's elements in order, whatever the number of workers, their
  // speed or failures — the order one worker gives. Split assignment stays dynamic; the consumer
  // reorders, the job producing at most kDeterministicWindow splits past the lowest unfinished
  // one (docs/SEMANTICS.md "Reproducible order"). Needs the DYNAMIC mode, a per-split pipeline,
  // a private job (no job_name), no coordinated reads and no cross-trainer cache (refused
  // naming `deterministic` otherwise). Works with resume_from.
  bool deterministic = false;
  // Deterministic reads: once the reorder holds more than this many bytes (elements that came
  // ahead of the one it waits for), the consumer asks only the task of the job's lowest
  // unfinished split for elements, so the hold stays about this budget (plus what requests in
  // flight bring), whatever the element size. At least 1.
  int64_t deterministic_hold_bytes = kDefaultDeterministicHoldBytes;
};
// How many splits past the lowest unfinished one a deterministic read's job hands out: what the
// consumer may hold ahead of the split it waits for (DistributeOptions::deterministic).
inline constexpr int64_t kDeterministicWindow = 16;

// "grpc", "bulk" or "caf" (case-sensitive); invalid_argument naming the allowed values otherwise.
Status validate_data_transfer_protocol(std::string_view protocol);
// Whether these options let large elements take the bulk channel (all but "caf").
bool uses_bulk_channel(const DistributeOptions& options);

// "continue" or "fail" (case-sensitive); invalid_argument naming the argument otherwise.
Status validate_on_worker_loss(std::string_view on_worker_loss);
// "WARN", "IGNORE" or "FAIL" (any case); invalid_argument naming the allowed values otherwise.
Status validate_external_state_policy(std::string_view policy);
// Whether an OFF read of these options fails when a worker leaves before its end.
bool fail_on_worker_loss(const DistributeOptions& options);

// Checks the arguments as the reference does (messages name the argument and what was
// expected): empty job_name; num_consumers without job_name; consumer_index without
// num_consumers or vice versa; consumer_index out of range; bad compression; bad
// target_workers; max_outstanding_requests <= 0; non-positive timeouts (round_timeout too);
// on_worker_loss not "continue"/"fail", or set with a processing mode other than OFF;
// data_transfer_protocol not one of "grpc", "bulk", "caf"; external_state_policy not one of
// "WARN", "IGNORE", "FAIL"; resume_from that is no read cursor, or with another mode than
// DYNAMIC, a job_name or the cross-trainer cache; deterministic with another mode than DYNAMIC,
// a job_name, coordinated reads or the cross-trainer cache; deterministic_hold_bytes < 1.
// Returns `unimplemented` ("not supported yet") for the parts later issues fill in.
Status validate(const DistributeOptions& options);

// The reference's `compression` values: "AUTO" or "NONE" (case-sensitive, as in the reference).
Status validate_compression(std::string_view compression);

// "host:port", "[::1]:port" or "conveyor://host:port" -> host and port.
// invalid_argument naming the bad part otherwise (empty, no port, port out of range, an
// unsupported protocol, several "://").
struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const; // "host:port" ("[h]:port" for IPv6 literals)
};
Expected<HostPort> parse_address(std::string_view address);

} // namespace conveyor
