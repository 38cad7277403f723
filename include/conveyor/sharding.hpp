// Sharding policies of tf.data service (reference 003: ShardingPolicy) as pure graph rewrites.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "conveyor/dataset.hpp"

namespace conveyor {

enum class ShardingPolicy : unsigned char {
  off,          // every worker produces the whole dataset (parallel_epochs)
  dynamic,      // the dispatcher hands out splits (distributed_epoch); no rewrite
  file,         // shard the files: worker i reads files i, i+n, ...
  data,         // shard the elements: worker i keeps elements i, i+n, ...
  file_or_data, // FILE if the dataset has a file source, DATA otherwise
  hint,         // fill shard(SHARD_HINT, SHARD_HINT) placeholders with (n, i)
};

const char* to_string(ShardingPolicy policy); // "OFF", "DYNAMIC", ...
// Accepts the reference's names, case-insensitively ("off", "DYNAMIC", "file_or_data").
std::optional<ShardingPolicy> sharding_policy_from_string(std::string_view name);

// The dataset worker `worker_index` of `num_workers` runs under `policy`. OFF and DYNAMIC return
// the dataset unchanged. FILE on a dataset without a file source is an error, as in tf.data.
// num_workers must be > 0 and 0 <= worker_index < num_workers. FILE expands file patterns; on a
// worker, `paths` (its --allow-path roots) must allow listing where each pattern starts.
class PathPolicy;
Expected<Dataset> apply_sharding(const Dataset& dataset, ShardingPolicy policy, int64_t num_workers,
                                 int64_t worker_index, const PathPolicy* paths = nullptr);

} // namespace conveyor
