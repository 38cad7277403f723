// Bounded, seeded fuzzing of the decoders: 20 000 mutated, truncated, spliced and random buffers.
// Every one must either decode or return data_loss / version_mismatch — never crash, hang or read
// out of bounds (run this binary under ASan+UBSan to check the last part). Anything that does decode
// must be a well-formed value: re-encoding it gives a buffer that decodes to the same elements.
#include <doctest/doctest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "test/unit/codec/codec_support.hpp"

using namespace conveyor;
using conveyor::test::all_dtypes;
using conveyor::test::sample_tensor;

namespace {

struct Seed {
  std::string bytes;
  bool is_batch; // decode with decode_batch, else decode_element
};

std::vector<Element> seed_elements() {
  std::vector<Element> v;
  for (DType d : all_dtypes()) {
    v.emplace_back(sample_tensor(d, {}));
    v.emplace_back(sample_tensor(d, {3}));
    v.emplace_back(sample_tensor(d, {2, 0}));
  }
  v.emplace_back(
    Element{{sample_tensor(DType::string, {2, 2}), sample_tensor(DType::boolean, {4})}});
  v.emplace_back(Element{});
  return v;
}

std::vector<Seed> make_seeds() {
  std::vector<Seed> seeds;
  const auto elements = seed_elements();
  std::vector<Element> scalars;
  for (int64_t i = 0; i < 60; ++i)
    scalars.emplace_back(Tensor::scalar(i * 3));
  for (Compression c : {Compression::none, Compression::lz4}) {
    seeds.push_back({encode_batch(elements, c), true});
    seeds.push_back({encode_batch(scalars, c), true});
  }
  seeds.push_back(
    {encode_batch({Element{Tensor{DType::float64, {600}}}}, Compression::automatic), true});
  for (const auto& e : elements) {
    std::string s;
    encode_element(e, s);
    seeds.push_back({s, false});
  }
  return seeds;
}

std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s)
    c = static_cast<char>(rng());
  return s;
}

// Values that sit on the edges of the checks: zero, small, 2^k around lz4 and int limits.
uint64_t interesting_u64(std::mt19937_64& rng) {
  static const uint64_t values[] = {0,
                                    1,
                                    2,
                                    255,
                                    0x7fffffff,
                                    0x80000000,
                                    0xffffffff,
                                    0x7e000000,
                                    uint64_t{1} << 40,
                                    ~uint64_t{0},
                                    ~uint64_t{0} >> 1,
                                    uint64_t{1} << 63};
  return (rng() % 2) ? values[rng() % (sizeof values / sizeof values[0])] : rng() % 4096;
}

std::string mutate(const std::string& base, std::mt19937_64& rng) {
  std::string s = base;
  auto pos = [&](std::size_t size) {
    return size == 0 ? 0 : static_cast<std::size_t>(rng() % size);
  };
  switch (rng() % 8) {
    case 0: // flip a few bytes
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0 && !s.empty(); --k)
        s[pos(s.size())] = static_cast<char>(rng());
      break;
    case 1: // truncate
      s.resize(pos(s.size() + 1));
      break;
    case 2: // insert random bytes
      s.insert(pos(s.size() + 1), random_bytes(rng, 1 + rng() % 16));
      break;
    case 3: // delete a range
      if (!s.empty()) {
        const std::size_t at = pos(s.size());
        s.erase(at, 1 + rng() % 16);
      }
      break;
    case 4: // overwrite a header integer (count or raw size) with an edge value
      if (s.size() >= 22) {
        const uint64_t v = interesting_u64(rng);
        const std::size_t field = (rng() % 2) ? 6 : 14;
        for (int i = 0; i < 8; ++i)
          s[field + i] = static_cast<char>(v >> (8 * i));
      }
      break;
    case 5: // a valid-looking header (format version 1 or 2) over random bytes
      s = std::string("CVEB") + static_cast<char>(1 + rng() % 2) + static_cast<char>(rng() % 3) +
          random_bytes(rng, 16 + rng() % 64);
      break;
    case 6: // fully random
      s = random_bytes(rng, rng() % 128);
      break;
    case 7: // splice: a prefix of this buffer, then random bytes with high bits set (varint continuation)
      s.resize(pos(s.size() + 1));
      for (std::size_t k = rng() % 16; k > 0; --k)
        s += static_cast<char>(rng() | 0x80);
      break;
  }
  return s;
}

} // namespace

TEST_CASE("fuzz: mutated, truncated and random buffers decode or fail cleanly") {
  const std::vector<Seed> seeds = make_seeds();
  // Sanity: every seed decodes before it is mutated.
  for (const Seed& seed : seeds) {
    std::vector<Element> out;
    REQUIRE(
      (seed.is_batch ? decode_batch(seed.bytes, out) : decode_element(seed.bytes).status()).ok());
  }

  constexpr int kIterations = 20000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::mt19937_64 rng{0xC0FFEE};
  int decoded = 0, rejected = 0, iterations = 0, bad = 0;
  for (; iterations < kIterations && std::chrono::steady_clock::now() < deadline; ++iterations) {
    const Seed& seed = seeds[rng() % seeds.size()];
    const std::string input = mutate(seed.bytes, rng);
    std::vector<Element> out;
    Status st = seed.is_batch ? decode_batch(input, out) : Status::OK();
    if (!seed.is_batch) {
      auto e = decode_element(input);
      st = e.status();
      if (e.ok())
        out.push_back(std::move(*e));
    }
    if (!st.ok()) {
      ++rejected;
      const bool expected_code =
        st.code() == ErrorCode::data_loss || st.code() == ErrorCode::version_mismatch;
      if (!expected_code || st.message().empty() || !out.empty()) {
        if (++bad <= 5)
          FAIL_CHECK("iteration " << iterations << ": unexpected failure " << st.to_string());
      }
      continue;
    }
    ++decoded;
    std::vector<Element> again;
    Status re = decode_batch(encode_batch(out, Compression::automatic), again);
    if (!re.ok() || again != out) {
      if (++bad <= 5)
        FAIL_CHECK("iteration " << iterations
                                << ": decoded value does not re-encode: " << re.to_string());
    }
  }
  MESSAGE(iterations << " inputs: " << decoded << " decoded, " << rejected << " rejected");
  CHECK(bad == 0);
  CHECK(iterations == kIterations); // the time bound is a safety net, not the normal end
  // Both paths were exercised.
  CHECK(decoded > 100);
  CHECK(rejected > 1000);
}
