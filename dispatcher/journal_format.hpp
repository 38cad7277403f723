// The journal's on-disk primitives shared by replay and the writer: file and frame layout,
// little-endian fields, checksums, and whole-file writes that never leave a half-written file.
// Internal to dispatcher/ (journal.cpp, journal_codec.cpp); not an installed header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/io/durable_file.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors::journal_format {

inline constexpr char kSegmentMagic[8] = {'C', 'V', 'J', 'O', 'U', 'R', 'N', '1'};
inline constexpr char kSnapshotMagic[8] = {'C', 'V', 'S', 'N', 'A', 'P', 'S', '1'};
inline constexpr std::size_t kHeaderBytes = 32;       // magic, version, 0, seq, crc, 0
inline constexpr std::size_t kFrameBytes = 20;        // length, seq, header crc, payload crc
inline constexpr uint32_t kMaxRecordBytes = 1u << 30; // a snapshot is one frame

using durable::get_u32;
using durable::get_u64;
using durable::masked;
using durable::put_u32;
using durable::put_u64;

// A frame: length | seq | crc(length + seq) | crc(payload) | payload.
void append_frame(std::string& out, uint64_t seq, std::string_view payload);
// A file header: magic | version | 0 | seq | crc(the 24 bytes before) | 0.
std::string header(const char (&magic)[8], uint64_t seq);

using durable::errno_text;
using durable::read_file;
using durable::sync_dir;
using durable::write_all;
// Writes `path.tmp`, syncs it and renames it to `path`: `path` never exists half-written.
// The directory is synced only when `sync` (tests of the format skip every fsync).
Status write_whole_file(const std::string& dir, const std::string& path, std::string_view data,
                        bool sync);
bool all_zero(std::string_view s);
// Parses a "<prefix>-<20 digits><suffix>" name; false for anything else.
bool parse_generation(const std::string& name, const std::string& prefix, const std::string& suffix,
                      uint64_t& out);
std::string generation_name(const char* prefix, uint64_t g, const char* suffix);

} // namespace conveyor::actors::journal_format
