#include "net/node_key.hpp"

#include <caf/binary_serializer.hpp>
#include <caf/local_actor.hpp>
#include <caf/node_id.hpp>

#include "net/admitted_peers.hpp"

namespace conveyor::actors {

std::string node_key(const caf::node_id& node) {
  caf::binary_serializer::container_type buf;
  caf::binary_serializer sink{nullptr, buf};
  if (auto err = sink(node)) // only an allocation failure; an empty key is never admitted
    return {};
  return std::string{buf.begin(), buf.end()};
}

void admit_sender_node(caf::local_actor* self) {
  const auto& sender = self->current_sender();
  if (!sender || sender->node() == self->node())
    return;
  // The last node this thread admitted, valid while nothing was forgotten since.
  thread_local caf::node_id last;
  thread_local uint64_t last_generation = ~uint64_t{0};
  const auto generation = admitted_peers::generation();
  if (sender->node() == last && generation == last_generation)
    return;
  admitted_peers::admit(node_key(sender->node()));
  last = sender->node();
  last_generation = generation;
}

} // namespace conveyor::actors
