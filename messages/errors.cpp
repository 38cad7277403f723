#include "messages/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace conveyor::msg {

namespace {

constexpr caf::atom_value kCategory = caf::atom("conveyor");

ErrorCode code_of(caf::sec s) {
  switch (s) {
    case caf::sec::request_timeout:
    case caf::sec::connection_timeout: return ErrorCode::deadline_exceeded;
    case caf::sec::cannot_connect_to_node:
    case caf::sec::disconnect_during_handshake:
    case caf::sec::request_receiver_down:
    case caf::sec::remote_linking_failed:
    case caf::sec::no_route_to_receiving_node: return ErrorCode::unavailable;
    case caf::sec::unexpected_actor_messaging_interface:
    case caf::sec::incompatible_versions:
    case caf::sec::incompatible_application_ids: return ErrorCode::version_mismatch;
    case caf::sec::invalid_argument: return ErrorCode::invalid_argument;
    case caf::sec::cannot_open_port:
    case caf::sec::cannot_publish_invalid_actor:
    case caf::sec::network_syscall_failed: return ErrorCode::io_error;
    case caf::sec::unexpected_message:
    case caf::sec::unexpected_response: return ErrorCode::internal;
    default: return ErrorCode::unavailable;
  }
}

} // namespace

caf::atom_value error_category() { return kCategory; }

caf::error to_error(const Status& status) {
  if (status.ok())
    return caf::none;
  return caf::error{static_cast<uint8_t>(status.code()), kCategory,
                    caf::make_message(status.message())};
}

Status to_status(const caf::error& error, const std::string& context) {
  if (!error)
    return Status::OK();
  if (error.category() == kCategory) {
    std::string message;
    if (error.context().match_elements<std::string>())
      message = error.context().get_as<std::string>(0);
    return Status{static_cast<ErrorCode>(error.code()), message};
  }
  std::string what;
  if (error.category() == caf::atom("system")) {
    auto s = static_cast<caf::sec>(error.code());
    what = caf::to_string(s);
    if (!error.context().empty())
      what += " " + caf::deep_to_string(error.context());
    std::string message = context.empty() ? what : context + ": " + what;
    return Status{code_of(s), message};
  }
  what = caf::to_string(error);
  return Status{ErrorCode::unavailable, context.empty() ? what : context + ": " + what};
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(kCategory, [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    std::string result = to_string(static_cast<ErrorCode>(code));
    result += ": ";
    if (ctx.match_elements<std::string>())
      result += ctx.get_as<std::string>(0);
    return result;
  });
}

} // namespace conveyor::msg
