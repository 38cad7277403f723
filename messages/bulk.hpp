// The bulk data path's frame payload (net/bulk.hpp): (bulk_send_atom, channel, GatherBuffer)
// from a task to its node's bulk server, and on to a TLS session. Local to one node: never
// serialized (the views hold tensors' storage).
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>

#include "pipeline/tensor/gather_buffer.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::GatherBuffer)
