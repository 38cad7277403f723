#include "net/local_sender.hpp"

#include <caf/local_actor.hpp>
#include <caf/node_id.hpp>

#include "node/log.hpp"

namespace conveyor::actors {

bool from_this_node(caf::local_actor* self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

Status check_local_sender(caf::local_actor* self, const char* log_name, const std::string& what,
                          const std::string& owner) {
  if (from_this_node(self))
    return Status::OK();
  const auto& sender = self->current_sender();
  Status refused{ErrorCode::permission_denied, "only " + owner + " may send " + what};
  log::warning(log_name, "refused " + what +
                           (sender ? " from node " + caf::to_string(sender->node())
                                   : std::string{" from no actor"}) +
                           ": " + refused.message());
  return refused;
}

} // namespace conveyor::actors
