// The bulk data path's wire format (CAF-free). Element bytes travel on a per-worker TCP stream
// beside the CAF control messages; a consumer opens one channel per worker:
//
//   consumer -> worker   hello   : "CVBH" | version u8 | 3 reserved | join u64             (16 B)
//   worker   -> consumer ack     : "CVBA" | version u8 | 3 reserved | channel u64          (16 B)
//     (the worker's bulk server names its channels with unguessable ids, unique per worker;
//     requests name the channel in get_elements.bulk_channel. A hello with join 0 opens a
//     channel; one naming a channel adds its connection to it: the worker spreads the channel's
//     frames over its connections in turn, so that TLS channels encrypt and decrypt on several
//     threads. The consumer uses a channel once every connection of it was acknowledged.)
//   worker   -> consumer frame   : header (40 B) | payload (length bytes)
//     header: "CVBF" | version u8 | 3 reserved | task u64 | batch_seq u64 | index u32 |
//             count u32 | length u64            (integers little-endian)
//   With TLS the hello and the ack are TLS records, and each frame's header and payload are a
//   sealed record each (net/bulk_seal.hpp).
//
// A frame's payload is one encode_batch buffer holding ONE element (pipeline/tensor/codec.hpp), so the
// consumer decodes it in place and the received buffer becomes that element's storage. The
// element_batch reply (CAF) of batch `batch_seq` says `bulk_frames` = count; frames 0..count-1
// of (task, batch_seq) complete it. The task encodes a frame once, as a GatherBuffer whose own
// bytes start with kFrameHeaderBytes of room for the header and whose large tensors are views
// of their storage; the worker's bulk writer sends its pieces with gather writes (no copy).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/tensor/gather_buffer.hpp"

namespace conveyor::actors::bulk {

inline constexpr uint8_t kVersion = 1;
inline constexpr std::size_t kHelloBytes = 16;
inline constexpr std::size_t kAckBytes = 16;
inline constexpr std::size_t kFrameHeaderBytes = 40;
// A frame claiming more than this is a protocol error (the reader never allocates it).
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 31;

struct FrameHeader {
  uint64_t task = 0;
  uint64_t batch_seq = 0;
  uint32_t index = 0;
  uint32_t count = 0;
  uint64_t length = 0;
};

namespace detail {
inline void put(char* at, uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint64_t get(const char* at, std::size_t n) {
  uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    v |= uint64_t{static_cast<unsigned char>(at[i])} << (8 * i);
  return v;
}
inline void magic(char* at, const char* m) {
  std::memcpy(at, m, 4);
  at[4] = static_cast<char>(kVersion);
  at[5] = at[6] = at[7] = 0;
}
inline bool has_magic(const char* at, const char* m) {
  return std::memcmp(at, m, 4) == 0 && static_cast<uint8_t>(at[4]) == kVersion;
}
} // namespace detail

inline void write_hello(char* at, uint64_t join = 0) {
  detail::magic(at, "CVBH");
  detail::put(at + 8, join, 8);
}
// The channel a hello joins (0: a new one), or nullopt for anything else.
inline std::optional<uint64_t> read_hello(const char* at, std::size_t n) {
  if (n != kHelloBytes || !detail::has_magic(at, "CVBH"))
    return std::nullopt;
  return detail::get(at + 8, 8);
}
inline void write_ack(char* at, uint64_t channel) {
  detail::magic(at, "CVBA");
  detail::put(at + 8, channel, 8);
}
// The channel an ack assigns, or nullopt for anything else.
inline std::optional<uint64_t> read_ack(const char* at, std::size_t n) {
  if (n != kAckBytes || !detail::has_magic(at, "CVBA"))
    return std::nullopt;
  return detail::get(at + 8, 8);
}

// Writes a header at `at` for `frame_size` bytes of frame (header included; h.length ignored).
inline void write_frame_header(char* at, std::size_t frame_size, const FrameHeader& h) {
  detail::magic(at, "CVBF");
  detail::put(at + 8, h.task, 8);
  detail::put(at + 16, h.batch_seq, 8);
  detail::put(at + 24, h.index, 4);
  detail::put(at + 28, h.count, 4);
  detail::put(at + 32, frame_size - kFrameHeaderBytes, 8);
}
// Fills the first kFrameHeaderBytes of `frame` (whose payload follows them).
inline void write_frame_header(std::vector<char>& frame, const FrameHeader& h) {
  write_frame_header(frame.data(), frame.size(), h);
}
inline void write_frame_header(GatherBuffer& frame, const FrameHeader& h) {
  write_frame_header(frame.own.data(), frame.size(), h);
}

// Parses a header; the error names what is wrong (nullopt = ok).
inline std::optional<std::string> read_frame_header(const char* at, std::size_t n, FrameHeader& h) {
  if (n != kFrameHeaderBytes)
    return "a frame header of " + std::to_string(n) + " bytes, expected " +
           std::to_string(kFrameHeaderBytes);
  if (!detail::has_magic(at, "CVBF"))
    return std::string{"a frame header without the \"CVBF\" magic of version 1"};
  h.task = detail::get(at + 8, 8);
  h.batch_seq = detail::get(at + 16, 8);
  h.index = static_cast<uint32_t>(detail::get(at + 24, 4));
  h.count = static_cast<uint32_t>(detail::get(at + 28, 4));
  h.length = detail::get(at + 32, 8);
  if (h.length == 0 || h.length > kMaxFrameBytes)
    return "a frame claiming " + std::to_string(h.length) + " payload bytes (allowed: 1.." +
           std::to_string(kMaxFrameBytes) + ")";
  if (h.count == 0 || h.index >= h.count)
    return "frame " + std::to_string(h.index) + " of a " + std::to_string(h.count) + "-frame batch";
  return std::nullopt;
}

} // namespace conveyor::actors::bulk
