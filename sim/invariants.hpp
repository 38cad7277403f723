// The invariants a simulated run must hold, as pure checks over what the harness recorded
// (no actors): each failure is one readable sentence naming the consumer, worker or element.
//
// The checks stay on when faults fire: the delivery guarantee (README, fault tolerance) is
// checked exactly, with or without faults.
//   OFF      per worker incarnation (a restarted worker serves under a new address): its
//            elements in dataset order (deterministic pipelines), none more often than the
//            dataset holds it; a stream that ended OK has every incarnation's whole dataset,
//            except those its consumers counted as lost (on_worker_loss "continue": the lost
//            task's remaining copy; at most as many short incarnations as counted losses, each
//            read by a consumer that counted one); without faults, from every worker, and no
//            loss counted.
//   DYNAMIC  per-split pipelines: a stream that ended OK holds exactly the dataset (exactly-once,
//            also under worker crashes and partitions); a failed one no element twice.
//            Other split-transparent pipelines: an OK stream holds every element at least as
//            often as the dataset (at-least-once), exactly as often without faults. Splits:
//            without faults each handed out exactly once (one a task handed back unstarted,
//            beyond its read-ahead window, counts once less); an OK run every split at least once.
//   cache    cross-trainer cache reads (each stream a trainer that stops after `take`): per
//            task, every trainer reads the task's sequence in order (DYNAMIC with faults: in
//            the same order as the others; without faults, no split made twice); with nothing
//            evicted, the whole of it from the start (DYNAMIC: without faults; a reader whose
//            connection broke lost its batches in flight, whose splits are made again later). Not checked per task for DYNAMIC after
//            a dispatcher restart (task incarnations share a label). Whole-epoch sharing (a
//            finite dataset): each trainer's stream, checked on its own, as OFF or DYNAMIC
//            above (every trainer reads the whole epoch).
//   always   every stream ended before the time limit; without faults, with OK; consumer
//            memory (elements delivered but not yet taken) within the credits; no job, task or
//            consumer actor left once the job ended; nothing the network could not carry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "pipeline/tensor/element.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::sim {

struct ObservedStream {
  std::string consumer; // "consumer-0"
  std::vector<Element> elements;
  std::vector<std::string> sources; // worker address (+ "/task<id>": incarnation) per element
  Status status;
  bool ended = false;
  bool crashed = false; // its node crashed: the stream ends there
  int64_t max_unacked = 0;
  uint64_t job = 0; // the job (repetition) it read; 0 = unknown (it received nothing)
  // OFF tasks the consumer read on without (on_worker_loss "continue"), as it counted them.
  int64_t lost_tasks = 0;
};

struct Observation {
  ShardingPolicy policy = ShardingPolicy::off;
  int workers = 0;
  // Workers started while the consumers read (names, e.g. "worker-2"). One whose task came
  // after the job's every task ended (a fast pipeline) serves only consumers still reading, maybe
  // none (docs/ARCHITECTURE.md): OFF expects every other worker's stream, a late one's whole or
  // not at all.
  std::vector<std::string> late_workers;
  std::vector<Element> reference; // the dataset, collected locally
  bool reference_ordered = true;  // the pipeline gives the same order every time
  bool faults = false;            // any fault fired
  int64_t credits = 0;            // max_outstanding_requests
  std::vector<ObservedStream> streams;
  // DYNAMIC: whether the pipeline's output, as a multiset, does not depend on how splits are
  // spread over workers (only map, filter, flat_map, interleave, unbatch, shuffle, prefetch,
  // repeat, cache above the source). Otherwise only the split-level checks apply: a batch or a
  // take runs per worker in DYNAMIC, as in tf.data.
  bool split_transparent = true;
  // DYNAMIC: the pipeline is per-split (dispatcher/job_core.hpp is_per_split, or
  // is_per_split_concatenation for several sources): exactly-once.
  bool per_split = false;
  // DYNAMIC: how often each split (source, epoch, index) reached a task; and how many the job
  // should hand out in all (-1 = unknown).
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> splits_delivered;
  int64_t expected_splits = -1;
  std::vector<std::string> leaks;      // live protocol actors after the job ended
  std::vector<std::string> violations; // the simulator's own findings (serialization...)
  bool timed_out = false;
  std::string time_limit; // for the liveness message
  // Coordinated reads (num_consumers = coordinated > 0): each stream stops after `take` rounds
  // (cancelled by the harness); round r of every stream must be one group of consecutive ints.
  int64_t coordinated = 0;
  int64_t take = 0;
  // Endless OFF reads (take > 0, no coordination, no cache): the N of range(N).repeat().
  int64_t endless_period = 0;
  // Cross-trainer cache reads: each stream (a trainer of its own) stops after `take` elements;
  // per task, a trainer reads the task's output in order, the whole of it unless the cache
  // window could evict (cache_evicts: then a trainer that fell behind skips ahead).
  bool cross_trainer_cache = false;
  bool cache_evicts = false;
  // Whole-epoch sharing (a finite dataset): each trainer's stream must hold what a lone
  // consumer of the job would read; the job's other checks (splits) are shared.
  bool cache_whole_epoch = false;
  // Every consumer read one iteration of one named job (tf.data's key: name and iteration): a
  // consumer in another job read the data again (issue 32's duplicates).
  bool one_iteration = false;
};

std::vector<std::string> check_invariants(const Observation& o);

} // namespace conveyor::sim
