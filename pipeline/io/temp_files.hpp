// Temporary files that name their writer, so that one a crashed process left behind can be told
// from one a live process is still writing, and removed.
//
// A temporary name carries a writer tag `PID.START.PIDNS.BOOT.HOST`: the writer's pid, its start
// time since boot (clock ticks, /proc/PID/stat field 22: a reused pid has another one), its pid
// namespace (another container's pids are not ours to look up), this boot's id and this host
// name's hash. A file is a dead writer's (and may be removed) when the tag names this host and
//   - another boot (the host rebooted since), or
//   - this boot and pid namespace, and the pid is gone, a zombie, or started at another time.
// Another host's file (a shared directory), another pid namespace's, or a name without a tag (an
// older build's `.tmp-PID-N`) is left alone: its writer may be alive.
#pragma once

#include <string>
#include <string_view>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

// This process's tag (computed once per process: a forked child gets its own).
std::string temp_writer_tag();

enum class TempWriter { alive, dead, unknown };
// What is known of the writer a tag names; unknown for a malformed tag.
TempWriter temp_writer_state(std::string_view tag);

// Removes the files of `dir` named `prefix` + TAG + ("-" anything) whose TAG names a dead writer.
// Returns how many it removed; io_error naming `dir` when it cannot be listed. A file that
// vanished meanwhile (another sweeper) is not an error.
Expected<int> remove_dead_writers_files(const std::string& dir, const std::string& prefix);

} // namespace conveyor
