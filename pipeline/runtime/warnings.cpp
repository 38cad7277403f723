#include "pipeline/runtime/warnings.hpp"

#include <cstdio>
#include <mutex>

namespace conveyor {

namespace {
std::mutex& handler_mutex() {
  static std::mutex mu;
  return mu;
}
WarningHandler& handler() {
  static WarningHandler h;
  return h;
}
} // namespace

void set_pipeline_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  handler() = std::move(h);
}

void pipeline_warning(const std::string& message) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  if (handler())
    handler()(message);
  else
    std::fprintf(stderr, "conveyor pipeline: warning: %s\n", message.c_str());
}

} // namespace conveyor
