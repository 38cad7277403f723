// Coordinated reads: the element_batch payload of one consumer's elements of a round reply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

// Encodes / decodes one consumer's elements of a coordinated reply (the element_batch payload).
std::string encode_round_elements(const std::vector<Element>& elements, Compression compression);
Status decode_round_elements(std::string_view payload, uint32_t count, std::vector<Element>& out);

} // namespace conveyor::actors
