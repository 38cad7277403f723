// interleave with num_parallel_calls > 1 (kernels/parallel_interleave.cpp).
#pragma once

#include "pipeline/kernels/dataset_function.hpp"

namespace conveyor::kernels {

// The sequential interleave's order (deterministic) while up to `parallelism` blocks of
// `block_length` elements are read ahead on the executor, at most one per open dataset of the
// cycle (an inner iterator is used by one thread at a time). Opening a slot (fn of the next input
// element) stays on the caller's thread, in input order, as do input errors. deterministic=false:
// at a block boundary a slot whose block is ready goes before one still being read (tf.data:
// "allowed to yield elements out of order").
IteratorPtr make_parallel_interleave(IteratorPtr input, DatasetFunction fn, int64_t cycle_length,
                                     int64_t block_length, int64_t parallelism, bool deterministic,
                                     std::shared_ptr<ExecutorGroup> group, StopCheck stop);

// A restored interleave's current slot (sequential or parallel): data_loss when outside the cycle.
inline Status check_cycle_slot(int64_t index, std::size_t cycle) {
  if (index < 0 || index >= static_cast<int64_t>(cycle))
    return data_loss("pipeline state: `interleave` slot " + std::to_string(index) +
                     " is outside its cycle of " + std::to_string(cycle));
  return Status::OK();
}

} // namespace conveyor::kernels
