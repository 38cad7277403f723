// The one logging facade of conveyor's nodes (spdlog underneath, kept out of this header). Every
// line carries a UTC timestamp, the level, the node and the process id:
//
//   text (default):  2026-11-23T11:52:00.123Z info  node=worker pid=4242 worker: ready: ...
//   json:            {"ts":"2026-11-23T11:52:00.123Z","level":"info","node":"worker","pid":4242,
//                     "component":"worker","msg":"ready: ..."}
//
// Lines go to stderr (one line per event; the JSON form is one object per line for collectors).
// The level is process-wide: CONVEYOR_LOG_LEVEL=error|warning|info|debug, overridden by a
// command's `--log-level`; the format likewise: CONVEYOR_LOG_FORMAT=text|json or `--log-format`.
// The node is a short name set once by the command ("dispatcher", "worker", "read", ...).
// Datasets are logged by id and fingerprint, never by their text form (which can be megabytes).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::log {

enum class Level : unsigned char { error = 0, warning, info, debug };
enum class Format : unsigned char { text = 0, json };

void set_level(Level level);
Level level();
std::optional<Level> level_from_string(std::string_view name);
const char* to_string(Level level);

void set_format(Format format);
Format format();
std::optional<Format> format_from_string(std::string_view name);

// The node name shown on every line (default: "conveyor").
void set_node(std::string node);

inline bool enabled(Level l) { return l <= level(); }

void write(Level level, std::string_view component, std::string_view message);

// The formatted line (without the newline) for `level`, `component` and `message` as write()
// prints it now; for tests of the format.
std::string format_line(Level level, std::string_view component, std::string_view message);

// Where lines go instead of stderr: the deterministic simulator (sim) puts them into its
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

// A short, bounded form of a possibly long text for a log line: at most `max` characters, with
// "... (N bytes)" when cut.
std::string abbreviate(std::string_view text, std::size_t max = 200);

// `s` as a JSON string literal (quotes and escapes added), appended to `out`: the json log
// format and `conveyor status --json` both write strings this way.
void append_json_string(std::string& out, std::string_view s);

} // namespace conveyor::log
