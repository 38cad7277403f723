// Streaming copies (pipeline/runtime/streaming_copy.hpp): exact bytes at odd sizes and unaligned
// starts on both sides, nothing written outside the destination range.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "pipeline/runtime/streaming_copy.hpp"

using namespace conveyor;

namespace {

std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<unsigned char>(i * 131 + (i >> 8) * 7 + 1);
  return out;
}

// Copies src[src_at, src_at + n) to dst[dst_at, ...) of a buffer filled with 0xEE around it.
void check_copy(std::size_t n, std::size_t src_at, std::size_t dst_at) {
  CAPTURE(n);
  CAPTURE(src_at);
  CAPTURE(dst_at);
  const auto src = pattern(n + src_at);
  std::vector<unsigned char> dst(n + dst_at + 256, 0xEE);
  if (!streaming_copy(dst.data() + dst_at, src.data() + src_at, n))
    return;  // this CPU has no streaming path
  if (n > 0) // (an empty source's data() is null, which memcmp must not get)
    CHECK(std::memcmp(dst.data() + dst_at, src.data() + src_at, n) == 0);
  for (std::size_t i = 0; i < dst_at; ++i)
    REQUIRE(dst[i] == 0xEE);
  for (std::size_t i = dst_at + n; i < dst.size(); ++i)
    REQUIRE(dst[i] == 0xEE);
}

} // namespace

TEST_CASE("streaming copy: exact bytes at odd sizes and unaligned starts") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{32},
                        std::size_t{33}, std::size_t{127}, std::size_t{128}, std::size_t{129},
                        std::size_t{255}, std::size_t{4097}, std::size_t{65535}})
    for (std::size_t src_at : {0, 1, 7, 32})
      for (std::size_t dst_at : {0, 1, 13, 31, 64})
        check_copy(n, src_at, dst_at);
}
