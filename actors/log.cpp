#include "actors/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace conveyor::log {

namespace {

Level initial_level() {
  if (const char* env = std::getenv("CONVEYOR_LOG_LEVEL"))
    if (auto l = level_from_string(env))
      return *l;
  return Level::info;
}

std::atomic<Level>& current() {
  static std::atomic<Level> l{initial_level()};
  return l;
}

std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

Sink& sink() { // guarded by output_mutex()
  static Sink s;
  return s;
}

const char* prefix(Level l) {
  switch (l) {
  case Level::error: return "error: ";
  case Level::warning: return "warning: ";
  default: return "";
  }
}

} // namespace

void set_level(Level l) { current().store(l); }

void set_sink(Sink s) {
  std::lock_guard<std::mutex> guard{output_mutex()};
  sink() = std::move(s);
}
Level level() { return current().load(std::memory_order_relaxed); }

std::optional<Level> level_from_string(std::string_view name) {
  if (name == "error") return Level::error;
  if (name == "warning" || name == "warn") return Level::warning;
  if (name == "info") return Level::info;
  if (name == "debug") return Level::debug;
  return std::nullopt;
}

void write(Level l, std::string_view component, std::string_view message) {
  if (!enabled(l))
    return;
  {
    std::lock_guard<std::mutex> guard{output_mutex()};
    if (sink()) {
      sink()(l, component, message);
      return;
    }
  }
  std::string line;
  line.reserve(component.size() + message.size() + 16);
  line.append(component).append(": ").append(prefix(l)).append(message).push_back('\n');
  std::lock_guard<std::mutex> guard{output_mutex()};
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

} // namespace conveyor::log
