// `conveyor read --checkpoint-to FILE` / `--resume-from FILE`: the read cursor
// (ElementStream::checkpoint) on disk, replaced atomically so that a reader killed at any moment
// leaves either the previous cursor or the new one.
#pragma once

#include <string>

#include "conveyor/status.hpp"

namespace conveyor::apps {

// The cursor stored in `path`; not_found / io_error naming `flag` and the file.
Expected<std::string> load_cursor_file(const std::string& flag, const std::string& path);

// Writes `blob` to `path` + ".tmp", flushes it to disk and renames it over `path`.
Status save_cursor_file(const std::string& path, const std::string& blob);

} // namespace conveyor::apps
