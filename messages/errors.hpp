// conveyor::Status <-> caf::error at the boundary of the actor layers. A Status travels as a
// caf::error of category "conveyor" whose code is the ErrorCode and whose context holds the
// message, so a peer's error arrives with its message intact. CAF's own errors (timeouts,
// connection failures, unexpected messages) map to the closest ErrorCode.
#pragma once

#include <string>

#include <caf/error.hpp>

#include "pipeline/runtime/status.hpp"

namespace caf {
class actor_system_config;
}

namespace conveyor::msg {

// The error category atom ("conveyor").
caf::atom_value error_category();

// OK -> caf::none.
caf::error to_error(const Status& status);
inline caf::error make_error(ErrorCode code, std::string message) {
  return to_error(Status{code, std::move(message)});
}

// caf::none -> OK. Errors of category "conveyor" come back exactly; CAF's errors get a code
// (request_timeout -> deadline_exceeded, cannot_connect_to_node -> unavailable, ...) and a
// message naming what happened. `context` (e.g. "requesting elements from worker h:p") is
// prefixed to messages of CAF's errors, which carry none of their own.
Status to_status(const caf::error& error, const std::string& context = "");

// Registers a renderer for the "conveyor" category, so actor_system::render shows
// "invalid_argument: <message>".
void add_error_category(caf::actor_system_config& cfg);

} // namespace conveyor::msg
