// Elements on their way from a consumer actor to whoever reads them (issue 11: decode lazily,
// where the consumer reads). A batch that came inline stays in its encoded buffer until the
// reader asks for its elements, one at a time (next), each decoded into the reader's Element:
// a reader that passes the same Element each time allocates nothing per small element, and
// what is allocated is allocated and freed on one thread (malloc's per-thread caches). Decoded
// on the consumer actor's thread and freed on the trainer's, 8-byte elements spent ~10% of a
// read's CPU in cross-thread frees. The consumer actor only moves buffers. Bulk frames arrive
// decoded: each is one element viewing its frame, which costs no allocation per element.
//
// Numeric tensors of an inline batch view the batch buffer too (zero copy: the codec aligns
// their payloads): an element kept after it was read keeps its whole batch buffer alive. That
// is bounded: while the buffers still held by elements a reader kept come to kMaxPinnedBytes,
// further batches are decoded into copies instead.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "consumer/split_run.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// A worker's end mark (msg::origin_run of count 0): split (epoch, index) had `count` elements.
struct SplitEnd {
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t count = 0;
  bool operator==(const SplitEnd& o) const {
    return epoch == o.epoch && index == o.index && count == o.count;
  }
};

class ReadyElements {
public:
  void add(Element element, DeliveredOrigin origin = {});
  void add(std::vector<Element> elements);
  // A batch buffer (pipeline/tensor/codec.hpp) announced to hold `count` elements, of which those whose
  // `keep` entry is false are dropped when it is decoded (empty `keep`: all are kept; otherwise
  // it has `count` entries). `source` names where it came from, for the error if it is corrupt.
  // `origins`: where the buffer's elements came from, in order (runs over all `count`; empty:
  // untagged).
  void add_encoded(std::string buffer, uint32_t count, std::vector<bool> keep, std::string source,
                   std::vector<msg::origin_run> origins = {});
  void append(ReadyElements&& more); // leaves `more` empty

  // Deterministic reads: splits the job saw finished (task_list::finished_splits). They travel
  // behind the elements pushed before them, so a reader that took every element before it
  // handles them has each finished split's elements in hand.
  void add_finished(const std::vector<std::pair<int64_t, int64_t>>& splits) {
    finished_.insert(finished_.end(), splits.begin(), splits.end());
  }
  bool has_finished() const { return !finished_.empty(); }
  std::vector<std::pair<int64_t, int64_t>> take_finished() { return std::exchange(finished_, {}); }

  // Deterministic and resumable reads: splits a worker said the size of (an end mark). The
  // reorder and the read cursor take them as they come: each still waits for the elements.
  void add_split_end(const SplitEnd& end) { split_ends_.push_back(end); }
  bool has_split_ends() const { return !split_ends_.empty(); }
  std::vector<SplitEnd> take_split_ends() { return std::exchange(split_ends_, {}); }
  // Anything for the reader: elements, finished splits or split ends.
  bool has_news() const { return size_ > 0 || !finished_.empty() || !split_ends_.empty(); }

  std::size_t size() const { return size_; } // elements, those to be dropped not counted
  bool empty() const { return size_ == 0; }

  // The next element into `out`, decoded there if it is still encoded (a reader that passes the
  // same Element each time reuses its memory: no allocation per small element); got = false when
  // none is left. data_loss for a corrupt buffer or one holding another number of elements than
  // announced: the elements before the bad one were handed out, none after it will be.
  // `origin` (optional) gets where the element came from.
  Status next(Element& out, bool& got, DeliveredOrigin* origin = nullptr);
  // Deterministic reads: the next elements as a run of one split with consecutive seqs (up to
  // the end of their origin run, a dropped element or the batch), still encoded, into `out`;
  // got = false when none is left. A run up to its batch's end takes the batch's reader (nothing
  // is stepped over twice). data_loss as next().
  Status next_run(SplitRun& out, bool& got);
  // Every element left, appended to `out` (next() until none is left).
  Status take(std::vector<Element>& out);

  // Decodes a batch buffer that must hold `count` elements onto the end of `out`; data_loss
  // naming `source` when it is corrupt or holds another number (`out` is then as it was).
  static Status decode(std::string_view buffer, uint32_t count, const std::string& source,
                       std::vector<Element>& out);

  // The bound on batch buffers that elements handed out (or still to be) hold by viewing them.
  static constexpr std::size_t kMaxPinnedBytes = std::size_t{64} << 20;
  // Smaller batches are copied: a copy costs less than the bookkeeping, and a reader that keeps
  // many tiny elements would hold an entry for each.
  static constexpr std::size_t kMinViewedBytes = 4096;
  // Bytes of those buffers now (tests).
  std::size_t pinned_bytes();

private:
  struct Run {
    std::vector<Element> decoded;
    // Empty, or one per `decoded`.
    std::vector<DeliveredOrigin> decoded_origins;
    std::size_t next = 0; // of `decoded`
    bool lazy = false;    // `batch` holds the run (even if empty: a corrupt batch), not `decoded`
    // Decoded lazily, by `reader` (which views it; shared with the SplitRuns cut from it).
    std::shared_ptr<const EncodedBatch> batch;
    std::optional<BatchReader> reader;
    uint32_t count = 0;
    std::vector<bool> keep;
    std::vector<msg::origin_run> origins; // of the encoded elements
    std::size_t origin_run = 0;           // the one holding position origin_base..
    uint32_t origin_base = 0;
  };
  Status fail(Status why); // drops everything left
  Status open(Run& run);   // its reader, on first use
  // Whether a batch buffer of `bytes` may be viewed by its elements (kMaxPinnedBytes); if so it
  // is counted from now on, while anything holds it.
  bool may_view(const std::shared_ptr<const EncodedBatch>& batch);
  struct Pinned {
    std::weak_ptr<const EncodedBatch> buffer;
    std::size_t bytes = 0;
  };
  std::vector<Pinned> pinned_;
  std::size_t pinned_total_ = 0; // of pinned_, expired ones included until a sweep
  std::size_t opened_since_sweep_ = 0;
  void sweep_pinned(); // drops the buffers nothing holds any more
  // A decoded run's next element (a bulk frame) into `out`, and where it came from.
  DeliveredOrigin take_decoded(Run& run, Element& out);
  static DeliveredOrigin origin_at(Run& run, uint32_t position);
  std::vector<Run> runs_;
  std::size_t front_ = 0; // runs before it were handed out
  std::size_t size_ = 0;
  std::vector<std::pair<int64_t, int64_t>> finished_;
  std::vector<SplitEnd> split_ends_;
};

} // namespace conveyor::actors
