#include "sim/proxy.hpp"

#include <caf/atom.hpp>
#include <caf/system_messages.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message_id.hpp>

#include "sim/network.hpp"

namespace conveyor::sim {

SimProxy::SimProxy(caf::actor_config& cfg, Network& network, std::size_t home_slot,
                   uint32_t home_incarnation)
  : caf::actor_proxy(cfg), network_(network), home_slot_(home_slot),
    home_incarnation_(home_incarnation) {}

void SimProxy::enqueue(caf::mailbox_element_ptr what, caf::execution_unit*) {
  // A killed proxy drops what it gets, as CAF's forwarding proxy does once its broker is gone:
  // in-flight and new requests to a lost peer fail only at their own timeout.
  if (getf(is_terminated_flag))
    return;
  auto& content = what->content();
  if (content.match_elements<caf::exit_msg>())
    unlink_from(content.get_as<caf::exit_msg>(0).source);
  network_.forward(*this, std::move(what));
}

bool SimProxy::add_backlink(caf::abstract_actor* x) {
  if (!monitorable_actor::add_backlink(x))
    return false;
  // Same convention as BASP: (link_atom, other) sent with sender == receiver.
  network_.forward(*this, caf::make_mailbox_element(ctrl(), caf::make_message_id(), {},
                                                    caf::link_atom::value, x->ctrl()));
  return true;
}

bool SimProxy::remove_backlink(caf::abstract_actor* x) {
  if (!monitorable_actor::remove_backlink(x))
    return false;
  network_.forward(*this, caf::make_mailbox_element(ctrl(), caf::make_message_id(), {},
                                                    caf::unlink_atom::value, x->ctrl()));
  return true;
}

void SimProxy::kill_proxy(caf::execution_unit* ctx, caf::error reason) {
  cleanup(std::move(reason), ctx);
}

} // namespace conveyor::sim
