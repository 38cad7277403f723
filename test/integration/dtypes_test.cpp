// Every dtype crosses the service bit-exact: `conveyor read` over real TCP (OFF and DYNAMIC) gives
// the same element digests (size + crc32c of the encoding: NaN payloads, -0.0 and half-float bit
// patterns included) and the same text as reading the dataset in this process.
#include <cstdio>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "pipeline/tensor/codec.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Six elements of 16 components, one per dtype. The float dtypes are made from integer bit
// patterns with bitcast, since NaN payloads have no literal: float16 1, -0, max, smallest
// subnormal, inf, NaN with payload, signalling NaN; bfloat16 the same; float32 -0, smallest
// subnormal, inf, NaN payload, signalling NaN, 1.5; float64 -0, subnormal, -inf, NaN payload,
// 1e300; complex64 (1.5, -2), (-0, NaN payload); complex128 (1e300, -1e-300), (NaN, -0).
const char* const kEveryDtype =
  "zip(from_tensor_slices(int64([0, 1, 2, 3, 4, 5])),"
  " from_tensors(uint16([15360, 32768, 31743, 1, 31744, 32257, 64513]))"
  "   .map(bitcast(dtype=\"float16\")).repeat(),"
  " from_tensors(uint16([16256, 32768, 32639, 1, 65408, 32705, 32641]))"
  "   .map(bitcast(dtype=\"bfloat16\")).repeat(),"
  " from_tensors(uint32([2147483648, 1, 2139095040, 2143363909, 2139095041, 1069547520]))"
  "   .map(bitcast(dtype=\"float32\")).repeat(),"
  " from_tensors(uint64([9223372036854775808, 1, 18442240474082181120, 18442240474093440495,"
  "   9094988921128908188])).map(bitcast(dtype=\"float64\")).repeat(),"
  " from_tensors(uint32([[1069547520, 3221225472], [2147483648, 2143363909]]))"
  "   .map(bitcast(dtype=\"complex64\")).repeat(),"
  " from_tensors(uint64([[9094988921128908188, 9341994084744098649],"
  "   [18442240474093440495, 9223372036854775808]])).map(bitcast(dtype=\"complex128\")).repeat(),"
  " from_tensors((bool([true, false]), int8([-128, 127]), int16([-32768, 32767]),"
  "   int32([-2147483648, 7]), uint8([0, 255]), uint16([0, 65535]), uint32([0, 4294967295]),"
  "   uint64([0, 18446744073709551615]), \"a\\x00b\")).repeat())";

std::string digest(const Element& e) {
  std::string encoded;
  encode_element(e, encoded);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu %08x", e.byte_size(), crc32c(encoded.data(), encoded.size()));
  return buf;
}

// The digests of reading the dataset in this process (no service), each `copies` times.
std::vector<std::string> local_digests(const std::string& dataset, int copies) {
  auto parsed = parse_dataset(dataset);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  auto elements = parsed->collect();
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  REQUIRE(elements->size() == 6);
  REQUIRE((*elements)[0].size() == 16);
  std::vector<std::string> out;
  for (int c = 0; c < copies; ++c)
    for (const Element& e : *elements)
      out.push_back(digest(e));
  return sorted(std::move(out));
}

} // namespace

TEST_CASE("every dtype arrives bit-exact through OFF and DYNAMIC reads over TCP") {
  Cluster cluster(2);
  for (const char* compression : {"NONE", "AUTO"}) {
    CAPTURE(compression);
    // OFF: each of the two workers produces the whole dataset.
    auto off = cluster.read(kEveryDtype,
                            {"--mode", "off", "--print", "digest", "--compression", compression});
    REQUIRE_MESSAGE(off.exit_code == 0, off.describe);
    CHECK(sorted(off.lines) == local_digests(kEveryDtype, 2));
    // DYNAMIC: the slices are split between the workers, each element read once.
    auto dynamic = cluster.read(
      kEveryDtype, {"--mode", "dynamic", "--print", "digest", "--compression", compression});
    REQUIRE_MESSAGE(dynamic.exit_code == 0, dynamic.describe);
    CHECK(sorted(dynamic.lines) == local_digests(kEveryDtype, 1));
  }
  // The text form the reader prints names every dtype (what `conveyor read` users see).
  auto text = cluster.read(kEveryDtype, {"--mode", "dynamic"});
  REQUIRE_MESSAGE(text.exit_code == 0, text.describe);
  CHECK(sorted(text.lines) == expected_sorted_lines(kEveryDtype));
  REQUIRE_FALSE(text.lines.empty());
  for (const char* name :
       {"float16(", "bfloat16(", "complex64(", "complex128(", "uint64(", "int8("})
    CHECK_MESSAGE(text.lines[0].find(name) != std::string::npos, name, " in ", text.lines[0]);
}
