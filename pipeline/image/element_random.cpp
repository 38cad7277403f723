#include "pipeline/image/element_random.hpp"

#include <cstring>

namespace conveyor::image {

namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// 32 bytes at a time in four independent lanes (their multiplies overlap), then eight at a
// time: hashing must stay cheap next to a decode.
uint64_t hash_bytes(uint64_t h, const unsigned char* p, std::size_t n) {
  uint64_t lane[4] = {h, h ^ 0x452821E638D01377ULL, h ^ 0xBE5466CF34E90C6CULL,
                      h ^ 0xC0AC29B7C97C50DDULL};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * kMul;
      lane[l] ^= lane[l] >> 29;
    }
  h = mix(lane[0]) ^ mix(lane[1] + 1) ^ mix(lane[2] + 2) ^ mix(lane[3] + 3);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (n > i)
    std::memcpy(&tail, p + i, n - i);
  return mix(h ^ tail ^ (static_cast<uint64_t>(n) << 56));
}

} // namespace

uint64_t element_hash(const Element& e) {
  uint64_t h = 0x243F6A8885A308D3ULL;
  for (const Tensor& t : e.components) {
    h = mix(h ^ static_cast<uint64_t>(t.dtype()));
    for (int64_t d : t.shape())
      h = mix(h ^ static_cast<uint64_t>(d));
    if (t.dtype() == DType::string) {
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const std::string_view s = t.string_at(i);
        h = hash_bytes(h, reinterpret_cast<const unsigned char*>(s.data()), s.size());
      }
    } else {
      h = hash_bytes(h, t.bytes().data(), t.bytes().size());
    }
  }
  return h;
}

ElementRandom::ElementRandom(int64_t seed, std::string_view op, const Element& e) {
  uint64_t h = mix(static_cast<uint64_t>(seed) + kMul);
  h = hash_bytes(h, reinterpret_cast<const unsigned char*>(op.data()), op.size());
  state_ = mix(h ^ element_hash(e));
}

uint64_t ElementRandom::next() { // splitmix64
  return mix(state_ += kMul);
}

double ElementRandom::uniform(double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(next() >> 11) * 0x1.0p-53);
}

int64_t ElementRandom::integer(int64_t lo, int64_t hi) {
  const auto span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span); // bias below 2^-40 for image sizes
}

} // namespace conveyor::image
