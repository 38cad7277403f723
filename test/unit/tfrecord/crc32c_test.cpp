// CRC-32C against published vectors (RFC 3720 B.4, TensorFlow's crc32c_test) and a bit-at-a-time
// reference, every implementation this CPU runs (tables, crc32 lanes, folding fused with lanes)
// against the tables, plus the TFRecord mask.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pipeline/io/crc32c.hpp"
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

TEST_CASE("crc32c: inputs long enough for the interleaved lanes agree with the tables") {
  std::mt19937 rng{13};
  std::string buf(3 * 3 * 8192 + 100, '\0');
  for (char& c : buf)
    c = static_cast<char>(rng());
  for (std::size_t start : {0, 1, 5}) // lanes start unaligned too
    for (std::size_t len :
         {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 7, 2 * 3 * 8192 + 13, 50000, 3 * 3 * 8192 + 95}) {
      const char* p = buf.data() + start;
      REQUIRE_MESSAGE(crc32c(p, len) == crc32c_portable(p, len),
                      "start " << start << " len " << len);
      REQUIRE(crc32c(p, len, 0x9abcdef0u) == crc32c_portable(p, len, 0x9abcdef0u));
    }
  CHECK(crc32c(std::string(100000, '\0').data(), 100000) ==
        crc32c_portable(std::string(100000, '\0').data(), 100000));
}

TEST_CASE("crc32c: every implementation this CPU runs gives the published vectors") {
  const auto impls = crc32c_implementations();
  REQUIRE(!impls.empty());
  CHECK(std::string(impls.front().name) == "tables");
  for (const auto& impl : impls) {
    INFO("implementation " << impl.name);
    CHECK(impl.fn("123456789", 9, 0) == 0xE3069283u);
    const std::string zeros(32, '\0'), ones(32, '\xff');
    CHECK(impl.fn(zeros.data(), zeros.size(), 0) == 0x8A9136AAu);
    CHECK(impl.fn(ones.data(), ones.size(), 0) == 0x62A8AB43u);
    CHECK(impl.fn("", 0, 0) == 0u);
    CHECK(impl.fn("", 0, 0x12345678u) == 0x12345678u);
  }
  // crc32c() runs the last (fastest) one.
  const std::string text = "the quick brown fox jumps over the lazy dog, twice over the lazy dog";
  CHECK(crc32c(text.data(), text.size()) == impls.back().fn(text.data(), text.size(), 0));
}

TEST_CASE("crc32c: every implementation agrees with the tables for lengths 0..300 at every "
          "alignment, and across the fused blocks' boundaries") {
  std::mt19937 rng{17};
  std::string buf(3 * 28672 + 4096, '\0');
  for (char& c : buf)
    c = static_cast<char>(rng());
  for (const auto& impl : crc32c_implementations()) {
    INFO("implementation " << impl.name);
    for (std::size_t start = 0; start < 16; ++start)
      for (std::size_t len = 0; len <= 300; ++len) {
        const char* p = buf.data() + start;
        REQUIRE_MESSAGE(impl.fn(p, len, 0) == crc32c_portable(p, len, 0),
                        "start " << start << " len " << len);
        REQUIRE(impl.fn(p, len, 0xdeadbeefu) == crc32c_portable(p, len, 0xdeadbeefu));
      }
    // Block (28 KiB), lane (8 KiB) and folding (128, 256 bytes) boundaries, and around them.
    for (std::size_t start : {0, 3, 8, 13})
      for (std::size_t base : {255, 256, 383, 4096, 8192, 3 * 8192, 28672, 2 * 28672, 3 * 28672})
        for (std::size_t delta : {0, 1, 15, 16, 17, 127, 128, 129}) {
          const std::size_t len = base + delta;
          if (start + len > buf.size())
            continue;
          const char* p = buf.data() + start;
          REQUIRE_MESSAGE(impl.fn(p, len, 0x31u) == crc32c_portable(p, len, 0x31u),
                          "start " << start << " len " << len);
        }
  }
}

TEST_CASE("crc32c: random buffers split anywhere extend to the same checksum in every "
          "implementation") {
  std::mt19937 rng{19};
  for (int round = 0; round < 20; ++round) {
    std::string buf(static_cast<std::size_t>(rng() % 200000), '\0');
    for (char& c : buf)
      c = static_cast<char>(rng());
    const uint32_t whole = crc32c_portable(buf.data(), buf.size());
    const std::size_t cut = buf.empty() ? 0 : rng() % buf.size();
    for (const auto& impl : crc32c_implementations()) {
      INFO("implementation " << impl.name << ", " << buf.size() << " bytes cut at " << cut);
      CHECK(impl.fn(buf.data(), buf.size(), 0) == whole);
      CHECK(impl.fn(buf.data() + cut, buf.size() - cut, impl.fn(buf.data(), cut, 0)) == whole);
    }
  }
}

TEST_CASE("crc32c: inputs of 1 MiB and more (the prefetching loop) agree with the tables at odd "
          "lengths and offsets") {
  std::mt19937 rng{23};
  std::string buf((1 << 20) + 3 * 28672 + 64, '\0');
  for (char& c : buf)
    c = static_cast<char>(rng());
  for (std::size_t start : {0, 1, 7, 61})
    for (std::size_t len : {std::size_t{1} << 20, (std::size_t{1} << 20) + 1,
                            (std::size_t{1} << 20) + 28672 - 3, (std::size_t{1} << 20) + 40001}) {
      const char* p = buf.data() + start;
      const uint32_t expected = crc32c_portable(p, len, 0x5eedu);
      REQUIRE_MESSAGE(crc32c(p, len, 0x5eedu) == expected, "start " << start << " len " << len);
      // Just under the threshold (no prefetching) continued over the rest.
      const std::size_t cut = (std::size_t{1} << 20) - 1 - start;
      CHECK(crc32c(p + cut, len - cut, crc32c(p, cut, 0x5eedu)) == expected);
    }
}
