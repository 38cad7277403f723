// bulk::StreamReader (net/bulk_stream_reader.hpp): the consumer's end of a bulk channel, unit by
// unit, as both the plain broker and the TLS session feed it.
#include <doctest/doctest.h>

#include <variant>
#include <vector>

#include "net/bulk_stream_reader.hpp"

using namespace conveyor::actors::bulk;

namespace {

std::vector<char> ack(uint64_t channel) {
  std::vector<char> unit(kAckBytes);
  write_ack(unit.data(), channel);
  return unit;
}

// The 40-byte header of a frame with `payload` bytes.
std::vector<char> header(const FrameHeader& h, std::size_t payload) {
  std::vector<char> frame(kFrameHeaderBytes + payload);
  write_frame_header(frame, h);
  frame.resize(kFrameHeaderBytes);
  return frame;
}

} // namespace

TEST_CASE("bulk stream reader: ack, then header and payload in turn, with the sizes to read") {
  StreamReader reader;
  CHECK(reader.next_size() == kAckBytes);
  auto ready = reader.apply(ack(7));
  REQUIRE(std::holds_alternative<StreamReader::Ready>(ready));
  CHECK(std::get<StreamReader::Ready>(ready).assigned == 7);
  for (uint32_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(reader.next_size() == kFrameHeaderBytes);
    CHECK_FALSE(reader.payload_next());
    const FrameHeader h{5, 11, i, 3, 0};
    CHECK(std::holds_alternative<std::monostate>(reader.apply(header(h, 1000 + i))));
    CHECK(reader.payload_next());
    CHECK(reader.next_size() == 1000 + i);
    auto payload = reader.apply(std::vector<char>(1000 + i, 'x'));
    REQUIRE(std::holds_alternative<StreamReader::Payload>(payload));
    const auto& got = std::get<StreamReader::Payload>(payload).header;
    CHECK(got.task == 5);
    CHECK(got.batch_seq == 11);
    CHECK(got.index == i);
    CHECK(got.count == 3);
    CHECK(got.length == 1000 + i);
  }
}

TEST_CASE("bulk stream reader: a bad ack or header breaks the channel, naming what was wrong") {
  SUBCASE("something other than an ack") {
    StreamReader reader;
    auto event = reader.apply(std::vector<char>(kAckBytes, 'A'));
    REQUIRE(std::holds_alternative<StreamReader::Broken>(event));
    CHECK(std::get<StreamReader::Broken>(event).why.find("bulk hello") != std::string::npos);
  }
  SUBCASE("a header claiming more than the frame limit") {
    StreamReader reader;
    reader.apply(ack(1));
    auto h = header(FrameHeader{1, 1, 0, 1, 0}, 8);
    detail::put(h.data() + 32, kMaxFrameBytes + 1, 8);
    auto event = reader.apply(h);
    REQUIRE(std::holds_alternative<StreamReader::Broken>(event));
    CHECK(std::get<StreamReader::Broken>(event).why.find("protocol error on the bulk stream") !=
          std::string::npos);
    CHECK(std::get<StreamReader::Broken>(event).why.find("payload bytes") != std::string::npos);
  }
  SUBCASE("an index outside its batch") {
    StreamReader reader;
    reader.apply(ack(1));
    auto event = reader.apply(header(FrameHeader{1, 1, 2, 2, 0}, 8));
    REQUIRE(std::holds_alternative<StreamReader::Broken>(event));
    CHECK(std::get<StreamReader::Broken>(event).why.find("frame 2 of a 2-frame batch") !=
          std::string::npos);
  }
}
