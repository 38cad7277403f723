// Elements of one split with consecutive sequence numbers, in order, as a deterministic read
// takes them from ReadyElements (next_run) and its reorder holds them (consumer/ordered_reads.hpp):
// still encoded in the batch buffer they came in, decoded one at a time into the reader's Element
// when the order reaches them, or one bulk frame's element (already decoded, viewing its frame).
// One held entry per run instead of one decoded Element per element: at 8-byte elements the
// reader decoded, moved and recycled an Element for about half of them (the other worker's
// splits) and did the reorder's bookkeeping per element (issue 36).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

// Where a DYNAMIC element came from (msg::origin_run, one element of it): what the stream's
// read cursor records when the element is handed out. seq < 0: not tagged.
struct DeliveredOrigin {
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t seq = -1;
  bool split_end = false; // the split's last element
  bool tagged() const { return seq >= 0; }
};

// A batch buffer as it came, shared by the runs cut from it (a batch may hold the end of one
// split and the start of the next); `source` names where it came from, for errors.
struct EncodedBatch {
  std::string bytes;
  std::string source;
};

struct SplitRun {
  // Its first element's origin; split_end: its last element is the split's last.
  DeliveredOrigin first;
  uint32_t count = 0; // elements
  uint32_t taken = 0; // handed out
  // What holding it costs: its share of the batch buffer (encoded bytes), or the decoded
  // element's bytes.
  int64_t bytes = 0;
  std::shared_ptr<const EncodedBatch> batch; // what `reader` views (null: `decoded`)
  std::optional<BatchReader> reader;         // at its next element
  Element decoded;

  bool done() const { return taken >= count; }
  // The next element into `out` (decoded there: its memory is reused) and where it came from;
  // data_loss naming the batch's source when it is corrupt.
  Status next(Element& out, DeliveredOrigin& origin);
};

} // namespace conveyor::actors
