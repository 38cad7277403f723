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
#include "conveyor/stats.hpp"
#include "conveyor/status.hpp"

namespace conveyor::msg {

// StreamStats plus what the consumer knows of its own pushes. Local only (never serialized).
struct stream_stats : StreamStats {
  uint64_t job = 0;               // the job (repetition) the stream reads
  int64_t duplicates_dropped = 0; // repeats of re-issued splits the consumer dropped
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
