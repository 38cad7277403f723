// Consumer <-> task (the task actor lives in a worker process): element delivery.
//
// The consumer pulls: get_elements asks a task for up to `max_elements` elements and about
// `max_bytes` bytes. The task answers with ONE element_batch: many elements encoded together
// (pipeline/tensor/codec.hpp encode_batch, compressed per the dataset's setting), because a remote
// round trip costs ~0.3 ms and per-element messages would cap throughput. A batch whose encoding
// exceeds kMaxChunkBytes travels as several chunks, one per reply; the task sends the remaining
// chunks of a batch to the same consumer's next requests before anything else. When nothing is
// ready the task holds the request (up to its hold limit) instead of answering empty at once.
//
// Bulk path (net/bulk.hpp): large elements are encoded once when the task produces them and
// travel as frames on a per-worker TCP stream beside these messages. The reply still carries
// all per-batch metadata (counts, seq, end_of_sequence); `bulk_frames` says that the payload
// comes as frames of (task, batch_seq) on the request's `bulk_channel`. Every reply names the
// worker's `bulk_port`, so a consumer learns where to open its channel from its first reply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/protocol.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::msg {

// Where a run of consecutive elements of a batch came from: `count` elements of split
// (epoch, index), sequence numbers first_seq, first_seq + 1, ... within the split's output.
// Only per-split pipelines (DYNAMIC) tag their elements; the consumer uses the tags to drop
// what it already received of a re-issued split.
struct origin_run {
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t first_seq = 0;
  uint32_t count = 0;
  // The run's last element is the split's last (the task had finished producing the split):
  // the consumer's read cursor then knows the split complete. A run of count 0 with split_end
  // is an *end mark*: the split had `first_seq` elements, all sent before (its last went out
  // before the worker's pipeline moved past it); it tags no element of the batch.
  bool split_end = false;
  // The splittable source the split belongs to (a per-split concatenation reads several; the
  // consumer drops repeats per (source, epoch, index, sequence)).
  int64_t source = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, origin_run& x) {
  return f(caf::meta::type_name("origin_run"), x.epoch, x.index, x.first_seq, x.count, x.split_end,
           x.source);
}

// consumer -> task
struct get_elements {
  consumer_id_t consumer = 0;
  // 0 = only the pending chunks of a batch already started for this consumer.
  uint32_t max_elements = 0;
  uint64_t max_bytes = kMaxChunkBytes; // soft bound: at least one element is always sent
  // How long the task may hold the request when nothing is ready (nanoseconds); then it
  // answers with an empty batch and the consumer asks again.
  int64_t hold_ns = 0;
  // Acknowledges the batches (batch_seq) this consumer received from the task since its last
  // request: their elements are safe, so the task may report their splits finished.
  std::vector<uint64_t> acks;
  // The consumer lost its connection to this worker and reconnected: whatever it was sent and
  // did not acknowledge may be lost; the task hands those splits back to the job.
  bool reconnected = false;
  // The consumer's open bulk channel to this task's worker (net/bulk_frame.hpp), 0 = none:
  // then every payload comes inline in the element_batch.
  uint64_t bulk_channel = 0;
  // A job read with the cross-trainer cache: the trainer this consumer reads for (consumers of
  // one trainer id share its position; different trainers each get every cached element).
  std::string trainer_id = {};
  // Coordinated reads (coordinated/round_robin.hpp; consumer_index >= 0): this consumer's elements
  // of the task's local rounds [round_first, round_first + round_count), one per round. A round
  // waits until all num_consumers asked for it, at most round_timeout_ns (then an error).
  int64_t round_first = -1;
  uint32_t round_count = 0;
  int64_t consumer_index = -1;
  int64_t round_timeout_ns = 0;
  // Coordinated reads: a consumer that (re)started asks where it stands first. With round_count
  // 0 the task answers at once, naming in element_batch::round_next the next local round it
  // owes this consumer_index (0 for a consumer new to the task). With round_count > 0 the
  // consumer rejoins at round_first (>= that round): the rounds before it that were kept for
  // its index are dropped (its earlier process is gone) and rounds it never asked for no longer
  // wait for it.
  bool round_resume = false;
  // Coordinated reads, round_count 0 without round_resume (a *confirm*): the consumer has every
  // local round below round_first; the task answers once its committed rounds
  // (element_batch::round_committed) pass round_committed_known, or when the hold ends. A
  // request for rounds with round_committed_known >= 0 is answered then too (without elements
  // if its rounds are not complete): the consumer holds rounds it waits to hand out.
  int64_t round_committed_known = -1;
  // Admission (net/admission.hpp): the token of the consumer's NetworkConfig. A worker
  // started with a token refuses a request without it (permission_denied). Never logged.
  std::string auth_token = {};
  // The consumer received the task's `retired` mark (element_batch::retired; protocol 30). The
  // request asks for nothing; it is answered at once. A draining worker leaves only once every
  // consumer of its retired tasks said so (or is gone): its stop closes the connection, and a
  // consumer that saw the connection drop before the mark counted the task as lost.
  bool retired_ack = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_elements& x) {
  return f(caf::meta::type_name("get_elements"), x.consumer, x.max_elements, x.max_bytes, x.hold_ns,
           x.acks, x.reconnected, x.bulk_channel, x.trainer_id, x.round_first, x.round_count,
           x.consumer_index, x.round_timeout_ns, x.round_resume, x.round_committed_known,
           x.auth_token, x.retired_ack);
}

// task -> consumer
struct element_batch {
  // encode_batch output, or chunk `chunk_index` of it.
  std::string payload;
  // Elements in the whole batch (0 for an empty reply).
  uint32_t num_elements = 0;
  // Numbers this task's batches for this consumer (chunks of a batch share it).
  uint64_t batch_seq = 0;
  uint32_t chunk_index = 0;
  uint32_t num_chunks = 0; // 0 = no batch in this reply
  // The task has nothing more for anyone: its pipeline ended and its buffer is empty.
  bool end_of_sequence = false;
  // Per-split pipelines: where the batch's elements came from, in order (runs add up to
  // num_elements; empty = untagged). Sent with the batch's first chunk.
  std::vector<origin_run> origins;
  // > 0: the batch's elements travel as this many frames (one element each) on the request's
  // bulk channel, referenced by (task, batch_seq); `payload` is then empty.
  uint32_t bulk_frames = 0;
  // The port of the worker's bulk server (on the worker address's host), 0 = it has none.
  uint16_t bulk_port = 0;
  // Coordinated reads, the answer to a round_resume probe: the next local round the task owes
  // the consumer_index (-1 otherwise).
  int64_t round_next = -1;
  // Coordinated reads: every consumer has this task's local rounds below this (-1 = not said).
  // A consumer hands no round of the task at or above it to its reader: should the task be lost,
  // only rounds every consumer received are kept (coordinated/round_robin.hpp).
  int64_t round_committed = -1;
  // The task serves this consumer nothing more, and the consumer acknowledged every batch it
  // was sent: an endless OFF task whose worker drains (TaskRunner::retire). Its leaving is then
  // no loss. The consumer acknowledges it (get_elements::retired_ack).
  bool retired = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, element_batch& x) {
  return f(caf::meta::type_name("element_batch"), x.payload, x.num_elements, x.batch_seq,
           x.chunk_index, x.num_chunks, x.end_of_sequence, x.origins, x.bulk_frames, x.bulk_port,
           x.round_next, x.round_committed, x.retired);
}

// The task actor, as consumers see it.
using task_actor = caf::typed_actor<caf::replies_to<get_elements>::with<element_batch>>;

} // namespace conveyor::msg
