// What a reader has read and where its waiting went: one struct from the consumer's accounting
// (consumer/wait_stats.hpp) through the job (msg::consumer_progress on the wire, summed per job
// for `conveyor status` and metrics) to the user (StreamStats, the Python iterator's stats).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace conveyor {

struct ReadProgress {
  int64_t elements = 0;
  int64_t bytes = 0; // encoded bytes received
  // "Why is my trainer waiting": time the reader was blocked with nothing to take, by cause
  // (nanoseconds): tasks held the request with nothing ready (worker compute), a split hand-out
  // (reserved: reported by workers), replies with data in transit (network), no request could be
  // sent (every credit in use). elapsed_ns: since the reader joined its job.
  int64_t wait_worker_ns = 0;
  int64_t wait_network_ns = 0;
  int64_t wait_split_ns = 0;
  int64_t wait_credit_ns = 0;
  int64_t elapsed_ns = 0;
  // OFF, on_worker_loss "continue": tasks whose worker left before their end — the read went on
  // without the rest of their copy of the dataset (each also logged as a warning).
  int64_t lost_tasks = 0;

  // Sums (a job's consumers).
  ReadProgress& operator+=(const ReadProgress& o) {
    elements += o.elements;
    bytes += o.bytes;
    wait_worker_ns += o.wait_worker_ns;
    wait_network_ns += o.wait_network_ns;
    wait_split_ns += o.wait_split_ns;
    wait_credit_ns += o.wait_credit_ns;
    elapsed_ns += o.elapsed_ns;
    lost_tasks += o.lost_tasks;
    return *this;
  }
};

// What a stream has read so far: its progress, plus what only the reader itself knows.
struct StreamStats : ReadProgress {
  int64_t messages = 0;                      // element batches received
  std::map<std::string, int64_t> per_worker; // worker address -> elements read from it
  // Deterministic reads: the most elements (and their bytes) the reorder held at once, waiting
  // for an earlier one (DistributeOptions::deterministic).
  int64_t order_held_peak = 0;
  int64_t order_held_peak_bytes = 0;
};

} // namespace conveyor
