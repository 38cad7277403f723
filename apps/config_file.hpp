// Reading a `--config FILE` safely: only a regular file, at most kMaxConfigBytes. A config file is
// a few lines of `name = value`; anything else (/dev/zero, a FIFO, a huge file by mistake) is
// refused at once instead of being read without bound.
#pragma once

#include <cstddef>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::apps {

inline constexpr std::size_t kMaxConfigBytes = 1 << 20; // 1 MiB

// The whole file, or invalid_argument naming `path` and what was expected.
Expected<std::string> read_config_file(const std::string& path,
                                       std::size_t max_bytes = kMaxConfigBytes);

} // namespace conveyor::apps
