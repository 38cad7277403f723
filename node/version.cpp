#include "conveyor/version.hpp"

#include "messages/protocol.hpp"

namespace conveyor {

const char* version() { return CONVEYOR_VERSION; }

uint32_t protocol_version() { return msg::kProtocolVersion; }

} // namespace conveyor
