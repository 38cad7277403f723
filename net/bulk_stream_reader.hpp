// The consumer's end of one bulk channel as a sequence of units (net/bulk_frame.hpp): the
// worker's ack, then a frame header and its payload, header and payload, ... Plain logic, no
// actors or sockets: the plain TCP broker (CAF reads exactly one unit per message) and the TLS
// session (which decrypts into units) both feed it, so they cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "net/bulk_frame.hpp"

namespace conveyor::actors::bulk {

class StreamReader {
public:
  struct Ready { // the ack: the worker's number for this channel
    uint64_t assigned = 0;
  };
  struct Payload { // a frame's payload: the unit holds its bytes
    FrameHeader header;
  };
  struct Broken { // the channel must close: why
    std::string why;
  };
  using Event = std::variant<std::monostate /* a header */, Ready, Payload, Broken>;

  // How many bytes the next unit has.
  std::size_t next_size() const {
    switch (phase_) {
      case Phase::ack: return kAckBytes;
      case Phase::header: return kFrameHeaderBytes;
      case Phase::payload: return static_cast<std::size_t>(header_.length);
    }
    return 0;
  }
  // A payload is next (its buffer becomes the elements' storage: the caller takes it from the pool).
  bool payload_next() const { return phase_ == Phase::payload; }

  // One complete unit of next_size() bytes. After Broken the caller closes the channel.
  Event apply(const std::vector<char>& unit) {
    switch (phase_) {
      case Phase::ack: {
        auto assigned = read_ack(unit.data(), unit.size());
        if (!assigned)
          return Broken{"the worker answered the bulk hello with something else"};
        phase_ = Phase::header;
        return Ready{*assigned};
      }
      case Phase::header:
        if (auto bad = read_frame_header(unit.data(), unit.size(), header_))
          return Broken{"protocol error on the bulk stream: " + *bad};
        phase_ = Phase::payload;
        return std::monostate{};
      case Phase::payload: phase_ = Phase::header; return Payload{header_};
    }
    return Broken{"bulk stream reader in an unknown phase"};
  }

private:
  enum class Phase { ack, header, payload } phase_ = Phase::ack;
  FrameHeader header_;
};

} // namespace conveyor::actors::bulk
