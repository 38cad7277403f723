// Which reads may have a reproducible order (`deterministic=True`, consumer/ordered_reads.hpp):
// one rule for the client's check of its options (early, naming the option) and the dispatcher's
// check of every request (other clients). Whether the pipeline is per-split only the dispatcher
// knows; it checks that on its own.
#pragma once

#include "conveyor/sharding.hpp"

namespace conveyor {

// Why such a read cannot be deterministic; nullptr when it can.
inline const char* deterministic_refusal(ShardingPolicy policy, bool named_job, bool coordinated,
                                         bool cross_trainer_cache) {
  if (policy != ShardingPolicy::dynamic)
    return "needs the DYNAMIC processing mode (distributed_epoch): only its elements name their "
           "split";
  if (named_job)
    return "needs a private job: `job_name` must not be set (a named job's elements are shared "
           "among its consumers, none sees the whole sequence)";
  if (coordinated)
    return "cannot be used with coordinated reads (`num_consumers`): their rounds have an order "
           "of their own";
  if (cross_trainer_cache)
    return "cannot be used with the cross-trainer cache";
  return nullptr;
}

} // namespace conveyor
