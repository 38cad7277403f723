// CRC-32C (Castagnoli), the checksum of TFRecord files, snapshot chunks and the dispatcher's
// journal. crc32c() runs the fastest implementation this CPU has, picked once at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor {

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc = 0);
// The same checksum without any CPU-specific instruction: for tests that compare the two.
uint32_t crc32c_portable(const void* data, std::size_t n, uint32_t crc = 0);
uint32_t mask_crc32c(uint32_t crc); // ((crc >> 15) | (crc << 17)) + 0xa282ead8
uint32_t unmask_crc32c(uint32_t masked);

// Every implementation this CPU can run, the portable one first and the one crc32c() uses last:
// for tests (each must agree with the portable one) and measurements.
struct Crc32cImpl {
  const char* name;
  uint32_t (*fn)(const void* data, std::size_t n, uint32_t crc);
};
std::vector<Crc32cImpl> crc32c_implementations();

} // namespace conveyor
