// A seeded mutation loop for the fuzz targets (no libFuzzer): each input is a corpus seed with a
// few byte-level mutations (flips, interesting integers, inserts, deletes, duplicated ranges,
// splices of another seed, truncation). The same seed gives the same inputs, so a failure is
// reproduced by running the test again with the seed and iteration it reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace conveyor::fuzz {

class Mutator {
public:
  Mutator(uint64_t seed, std::vector<std::string> corpus)
    : rng_(seed), corpus_(std::move(corpus)) {}

  std::string next() {
    std::string s = corpus_.empty() ? std::string{} : corpus_[pick(corpus_.size())];
    const std::size_t rounds = 1 + pick(4);
    for (std::size_t r = 0; r < rounds; ++r)
      mutate(s);
    return s;
  }

private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }

  void put_int(std::string& s, std::size_t at, uint64_t v, std::size_t width) {
    for (std::size_t i = 0; i < width && at + i < s.size(); ++i)
      s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }

  void mutate(std::string& s) {
    static const uint64_t kInteresting[] = {0,
                                            1,
                                            2,
                                            7,
                                            8,
                                            16,
                                            127,
                                            128,
                                            255,
                                            256,
                                            0x7fff,
                                            0xffff,
                                            0x7fffffff,
                                            0x80000000ull,
                                            0xffffffffull,
                                            0x7fffffffffffffffull,
                                            0x8000000000000000ull,
                                            ~uint64_t{0},
                                            1ull << 31,
                                            1ull << 40};
    switch (pick(8)) {
      case 0: // flip a bit
        if (!s.empty())
          s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1: // a random byte
        if (!s.empty())
          s[pick(s.size())] = static_cast<char>(rng_());
        break;
      case 2: { // an interesting integer, 1/2/4/8 bytes wide (lengths and counts live there)
        if (s.empty())
          break;
        const std::size_t widths[] = {1, 2, 4, 8};
        put_int(s, pick(s.size()), kInteresting[pick(std::size(kInteresting))], widths[pick(4)]);
        break;
      }
      case 3: { // insert random bytes
        std::string add(1 + pick(16), '\0');
        for (auto& c : add)
          c = static_cast<char>(rng_());
        s.insert(pick(s.size() + 1), add);
        break;
      }
      case 4: // delete a range
        if (!s.empty()) {
          auto at = pick(s.size());
          s.erase(at, 1 + pick(std::min<std::size_t>(s.size() - at, 32)));
        }
        break;
      case 5: // duplicate a range
        if (!s.empty() && s.size() < (1u << 16)) {
          auto at = pick(s.size());
          auto len = 1 + pick(std::min<std::size_t>(s.size() - at, 64));
          s.insert(pick(s.size() + 1), s.substr(at, len));
        }
        break;
      case 6: // splice: this seed's head, another's tail
        if (!corpus_.empty()) {
          const auto& other = corpus_[pick(corpus_.size())];
          s = s.substr(0, pick(s.size() + 1)) + other.substr(pick(other.size() + 1));
        }
        break;
      default: // truncate
        s.resize(pick(s.size() + 1));
        break;
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> corpus_;
};

} // namespace conveyor::fuzz
