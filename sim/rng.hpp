// The simulator's only source of randomness: xoshiro256** seeded through splitmix64.
// Written out by hand because the std distributions are implementation-defined — the same
// seed must give the same run on every machine and standard library.
#pragma once

#include <cstdint>

namespace conveyor::sim {

class Rng {
public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_)
      s = splitmix64(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); 0 when n == 0. Rejection sampling keeps it unbiased.
  uint64_t below(uint64_t n) {
    if (n == 0)
      return 0;
    const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
    for (;;) {
      uint64_t x = next();
      if (x < limit)
        return x % n;
    }
  }

  // Uniform in [lo, hi] (inclusive); lo when hi < lo.
  int64_t between(int64_t lo, int64_t hi) {
    if (hi <= lo)
      return lo;
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool chance(double p) { return unit() < p; }

  // An independent generator for one concern (scheduling, latencies, faults...), so that
  // drawing more numbers for one concern does not shift the others.
  Rng fork(uint64_t stream) {
    uint64_t x = next() ^ (stream * 0x9E3779B97F4A7C15ull);
    return Rng{splitmix64(x)};
  }

  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

} // namespace conveyor::sim
