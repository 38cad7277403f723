#include "pipeline/runtime/status.hpp"

namespace conveyor {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::already_exists: return "already_exists";
    case ErrorCode::out_of_range: return "out_of_range";
    case ErrorCode::data_loss: return "data_loss";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::failed_precondition: return "failed_precondition";
    case ErrorCode::unimplemented: return "unimplemented";
    case ErrorCode::internal: return "internal";
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::version_mismatch: return "version_mismatch";
    case ErrorCode::deadline_exceeded: return "deadline_exceeded";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::permission_denied: return "permission_denied";
    case ErrorCode::resource_exhausted: return "resource_exhausted";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok())
    return "ok";
  return std::string{conveyor::to_string(code_)} + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok())
    return *this;
  return Status{code_, context + ": " + message_};
}

} // namespace conveyor
