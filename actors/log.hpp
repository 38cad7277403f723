// A small leveled logger for nodes: one line per event on stderr, "<component>: <message>",
// e.g. "dispatcher: listening on 127.0.0.1:5050". Thread-safe; the level is process-wide and
// defaults to info (or CONVEYOR_LOG_LEVEL=error|warning|info|debug).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::log {

enum class Level : unsigned char { error = 0, warning, info, debug };

void set_level(Level level);
Level level();
std::optional<Level> level_from_string(std::string_view name);

inline bool enabled(Level l) { return l <= level(); }

void write(Level level, std::string_view component, std::string_view message);

// Where lines go instead of stderr: the deterministic simulator (actors/sim) puts them into its
// trace. An empty function restores stderr. Process-wide, like the level.
using Sink = std::function<void(Level, std::string_view component, std::string_view message)>;
void set_sink(Sink sink);

inline void error(std::string_view component, std::string_view message) {
  write(Level::error, component, message);
}
inline void warning(std::string_view component, std::string_view message) {
  write(Level::warning, component, message);
}
inline void info(std::string_view component, std::string_view message) {
  write(Level::info, component, message);
}
inline void debug(std::string_view component, std::string_view message) {
  if (enabled(Level::debug))
    write(Level::debug, component, message);
}

} // namespace conveyor::log
