// The consumer actor's local interface (conveyor/async.hpp): for code in the consumer's own
// process, never sent over the network.
//
// The consumer actor pushes stream_batch messages to a sink actor; the sink returns credits with
// (ack_atom, n) to the batch's `source` once it has taken n elements, so at most max_outstanding_requests elements are
// requested from workers or waiting in the sink at any time. The last batch carries
// end_of_sequence or a non-OK status; nothing follows it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "conveyor/messages/type_ids.hpp"
#include "conveyor/element.hpp"
#include "conveyor/status.hpp"

namespace conveyor::msg {

struct stream_stats {
  int64_t elements = 0;
  int64_t bytes = 0;    // encoded bytes received
  int64_t messages = 0; // element batches received
  std::map<std::string, int64_t> per_worker;
  // Where the reader's waiting went (consumer/wait_stats.hpp), nanoseconds.
  int64_t wait_worker_ns = 0;
  int64_t wait_network_ns = 0;
  int64_t wait_split_ns = 0;
  int64_t wait_credit_ns = 0;
  int64_t elapsed_ns = 0;
  uint64_t job = 0;               // the job (repetition) the stream reads
  int64_t duplicates_dropped = 0; // repeats of re-issued splits the consumer dropped
  int64_t lost_tasks = 0;         // OFF tasks lost before their end, read on without (continue)
  uint64_t pushed_task = 0;       // on a push: the task whose batch it carries (0 otherwise)
  // On a push: which actor served that task ("id@node"; a restarted dispatcher's job has its
  // tasks re-created under their old ids). Empty when not known.
  std::string pushed_incarnation;
};

// The consumer actor.
using stream_actor =
  caf::typed_actor<caf::reacts_to<ack_atom, uint64_t>,
                   caf::replies_to<stats_atom>::with<stream_stats>, caf::reacts_to<cancel_atom>>;

struct stream_batch {
  std::vector<Element> elements;
  bool end_of_sequence = false;
  Status status;       // non-OK: the stream failed; final
  stream_actor source; // where to send (ack_atom, n)
};

// What the consumer pushes to.
using stream_sink_actor = caf::typed_actor<caf::reacts_to<stream_batch>>;

} // namespace conveyor::msg

// Local-only messages: never serialized (they hold Elements and a Status).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::msg::stream_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::msg::stream_stats)
