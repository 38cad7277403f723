// What the journal tests know of the files on disk (dispatcher/journal.hpp's format): the header
// and frame sizes, where a record starts, and whole-file reads and writes for damaging them.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dispatcher/journal.hpp"

namespace conveyor::testing {

inline constexpr int64_t kHeader = 32; // file header
inline constexpr int64_t kFrame = 20;  // record header

// Byte offset of record `index` (0-based) in a segment holding `records` from its start.
inline int64_t offset_of(const std::vector<msg::Update>& records, std::size_t index) {
  int64_t offset = kHeader;
  for (std::size_t i = 0; i < index; ++i)
    offset += kFrame + static_cast<int64_t>(actors::Journal::encode(records[i]).size());
  return offset;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

} // namespace conveyor::testing
