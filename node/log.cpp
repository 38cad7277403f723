#include "node/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace conveyor::log {

namespace {

Level initial_level() {
  if (const char* env = std::getenv("CONVEYOR_LOG_LEVEL"))
    if (auto l = level_from_string(env))
      return *l;
  return Level::info;
}

Format initial_format() {
  if (const char* env = std::getenv("CONVEYOR_LOG_FORMAT"))
    if (auto f = format_from_string(env))
      return *f;
  return Format::text;
}

std::atomic<Level>& current() {
  static std::atomic<Level> l{initial_level()};
  return l;
}

std::atomic<Format>& current_format() {
  static std::atomic<Format> f{initial_format()};
  return f;
}

std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

Sink& sink() { // guarded by output_mutex()
  static Sink s;
  return s;
}

std::string& node_name() { // guarded by output_mutex()
  static std::string n = "conveyor";
  return n;
}

spdlog::level::level_enum to_spd(Level l) {
  switch (l) {
    case Level::error: return spdlog::level::err;
    case Level::warning: return spdlog::level::warn;
    case Level::info: return spdlog::level::info;
    default: return spdlog::level::debug;
  }
}

// Timestamp, level and pid come from spdlog's pattern; node, component and message from us.
const char* pattern(Format f) {
  return f == Format::json ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","pid":%P,%v})"
                           : "%Y-%m-%dT%H:%M:%S.%eZ %-5l %v";
}

struct Logger {
  Logger() {
    auto s = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    logger = std::make_shared<spdlog::logger>("conveyor", std::move(s));
    logger->set_level(spdlog::level::trace); // our own level decides
    logger->flush_on(spdlog::level::trace);  // line by line: tests and collectors read live
    apply(current_format().load());
  }
  void apply(Format f) {
    logger->set_pattern(pattern(f), spdlog::pattern_time_type::utc);
    applied = f;
  }
  std::shared_ptr<spdlog::logger> logger;
  Format applied = Format::text;
};

Logger& logger() { // guarded by output_mutex()
  static Logger l;
  return l;
}

std::string payload(Format f, const std::string& node, std::string_view component,
                    std::string_view message) {
  std::string out;
  out.reserve(node.size() + component.size() + message.size() + 48);
  if (f == Format::json) {
    out += "\"node\":";
    append_json_string(out, node);
    out += ",\"component\":";
    append_json_string(out, component);
    out += ",\"msg\":";
    append_json_string(out, message);
  } else {
    out.append("node=").append(node).append(" pid=").append(std::to_string(::getpid()));
    out.push_back(' ');
    out.append(component).append(": ").append(message);
  }
  return out;
}

} // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void set_level(Level l) { current().store(l); }
Level level() { return current().load(std::memory_order_relaxed); }

void set_format(Format f) { current_format().store(f); }
Format format() { return current_format().load(); }

void set_node(std::string node) {
  std::lock_guard<std::mutex> guard{output_mutex()};
  node_name() = std::move(node);
}

void set_sink(Sink s) {
  std::lock_guard<std::mutex> guard{output_mutex()};
  sink() = std::move(s);
}

std::optional<Level> level_from_string(std::string_view name) {
  if (name == "error")
    return Level::error;
  if (name == "warning" || name == "warn")
    return Level::warning;
  if (name == "info")
    return Level::info;
  if (name == "debug")
    return Level::debug;
  return std::nullopt;
}

const char* to_string(Level l) {
  switch (l) {
    case Level::error: return "error";
    case Level::warning: return "warning";
    case Level::info: return "info";
    default: return "debug";
  }
}

std::optional<Format> format_from_string(std::string_view name) {
  if (name == "text")
    return Format::text;
  if (name == "json")
    return Format::json;
  return std::nullopt;
}

std::string format_line(Level l, std::string_view component, std::string_view message) {
  std::lock_guard<std::mutex> guard{output_mutex()};
  const auto f = current_format().load();
  spdlog::pattern_formatter formatter(pattern(f), spdlog::pattern_time_type::utc, "");
  const auto text = payload(f, node_name(), component, message);
  spdlog::details::log_msg msg("conveyor", to_spd(l),
                               spdlog::string_view_t(text.data(), text.size()));
  spdlog::memory_buf_t buf;
  formatter.format(msg, buf);
  return std::string(buf.data(), buf.size());
}

void write(Level l, std::string_view component, std::string_view message) {
  if (!enabled(l))
    return;
  std::lock_guard<std::mutex> guard{output_mutex()};
  if (sink()) {
    sink()(l, component, message);
    return;
  }
  auto& lg = logger();
  const auto f = current_format().load();
  if (lg.applied != f)
    lg.apply(f);
  const auto text = payload(f, node_name(), component, message);
  lg.logger->log(to_spd(l), spdlog::string_view_t(text.data(), text.size()));
}

std::string abbreviate(std::string_view text, std::size_t max) {
  if (text.size() <= max)
    return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}

} // namespace conveyor::log
