// CRC-32C against published vectors (RFC 3720 B.4, TensorFlow's crc32c_test) and a bit-at-a-time
// reference, plus the TFRecord mask.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pipeline/io/tfrecord.hpp"

using namespace conveyor;

namespace {

// The textbook definition, one bit at a time: independent of the table-driven implementation.
uint32_t crc32c_bitwise(const std::string& data) {
  uint32_t crc = 0xffffffff;
  for (unsigned char b : data) {
    crc ^= b;
    for (int i = 0; i < 8; ++i)
      crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0u);
  }
  return ~crc;
}

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

} // namespace

TEST_CASE("crc32c matches the standard check value and RFC 3720 vectors") {
  CHECK(crc_of("123456789") == 0xE3069283u);
  CHECK(crc_of(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc_of(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  CHECK(crc_of(ascending) == 0x46DD794Eu);
  CHECK(crc_of(descending) == 0x113FDB5Cu);
  CHECK(crc_of("") == 0u);
}

TEST_CASE("crc32c agrees with a bitwise reference for every length and alignment") {
  std::mt19937 rng{7};
  std::string buf(300, '\0');
  for (char& c : buf)
    c = static_cast<char>(rng());
  for (std::size_t start = 0; start < 9; ++start)
    for (std::size_t len = 0; start + len <= buf.size(); len += 7) {
      const std::string part = buf.substr(start, len);
      REQUIRE_MESSAGE(crc_of(part) == crc32c_bitwise(part), "start " << start << " len " << len);
    }
}

TEST_CASE("crc32c extends: crc(a + b) == crc(b, crc(a))") {
  const std::string a = "hello ", b = "world, this is longer than eight bytes";
  CHECK(crc32c(b.data(), b.size(), crc_of(a)) == crc_of(a + b));
}

TEST_CASE("mask and unmask are inverses and the mask changes the value") {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x12345678u}) {
    CHECK(mask_crc32c(crc) != crc);
    CHECK(unmask_crc32c(mask_crc32c(crc)) == crc);
  }
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8
  CHECK(mask_crc32c(0) == 0xa282ead8u);
  CHECK(mask_crc32c(crc_of("abc")) == 0x21f1576eu);
}

TEST_CASE("crc32c: the CPU's crc32 instruction (where crc32c uses it) and the tables agree") {
  std::mt19937 rng{11};
  std::string buf(4099, '\0');
  for (char& c : buf)
    c = static_cast<char>(rng());
  for (std::size_t start = 0; start < 9; ++start)
    for (std::size_t len = 0; start + len <= buf.size(); len += 61) {
      const char* p = buf.data() + start;
      REQUIRE_MESSAGE(crc32c(p, len) == crc32c_portable(p, len),
                      "start " << start << " len " << len);
      REQUIRE(crc32c(p, len, 0x12345678u) == crc32c_portable(p, len, 0x12345678u));
    }
  CHECK(crc32c_portable("123456789", 9) == 0xE3069283u);
}
