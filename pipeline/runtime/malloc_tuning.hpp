// glibc malloc thresholds for a process that moves batches (the `conveyor` binary, and a Python
// process once it reads a stream or starts a server): see malloc_tuning.cpp for why.
#pragma once

#include <optional>

namespace conveyor {

enum class MallocTuning {
  applied,     // this call set the thresholds
  environment, // GLIBC_TUNABLES / MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ is set: it wins
  earlier,     // an earlier call in this process did (or left it to the environment)
};

// Sets glibc's mmap and trim thresholds once per process, unless the environment sets them.
// Thread-safe; later calls do nothing and say so.
MallocTuning tune_malloc_for_data_plane();

// What the first call did (applied or environment); none before the first call.
std::optional<MallocTuning> malloc_tuning_made();

} // namespace conveyor
