// CRC-32C three ways, the fastest this CPU runs picked at start-up:
//   tables   slicing-by-8 tables built at compile time (any CPU)
//   sse4.2   the crc32 instruction, 8 bytes at a time, in three interleaved lanes
//   fused    carry-less multiplication (VPCLMULQDQ, 2 x 16 bytes per instruction) folding one
//            part of each block while three crc32 lanes take the rest: the two run on different
//            execution units, so together they checksum more bytes per cycle than either alone;
//            inputs larger than the L2 cache are prefetched one block ahead (see kPrefetchFrom)
// The CRC is linear, which is what joins the parts: crc(A B) = crc(A) * x^(8|B|) + crc0(B) mod P,
// crc0 starting from a zero register; folding replaces a 128-bit block X by X * x^(8d) mod P
// added to the block d bytes later, keeping the remainder mod P the same.
#include "pipeline/io/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace conveyor {
namespace {

constexpr uint32_t kCastagnoliReversed = 0x82f63b78;
constexpr uint32_t kMaskDelta = 0xa282ead8;

using Crc32cTables = std::array<std::array<uint32_t, 256>, 8>;

// tables[k][b] is the CRC of byte b followed by k zero bytes, which lets the loop below fold
// eight input bytes per step.
constexpr Crc32cTables make_crc32c_tables() {
  Crc32cTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1) ? kCastagnoliReversed : 0);
    t[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (std::size_t k = 1; k < 8; ++k)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

constexpr Crc32cTables kTables = make_crc32c_tables();

uint32_t load_le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint32_t crc32c_tables(const void* data, std::size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = load_le32(p) ^ c;
    const uint32_t hi = load_le32(p + 4);
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; --n, ++p)
    c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xff];
  return ~c;
}

#if defined(__x86_64__)
// a(x) * b(x) mod P(x) in the reflected bit order of the CRC register (bit 31 = x^0).
constexpr uint32_t multmodp(uint32_t a, uint32_t b) {
  uint32_t m = uint32_t{1} << 31, product = 0;
  for (;;) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1)) == 0)
        break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kCastagnoliReversed : b >> 1;
  }
  return product;
}

// x^n mod P, in the register's bit order.
constexpr uint32_t x_to_the(uint64_t n) {
  uint32_t power = uint32_t{1} << 30;  // x^1, then x^2, x^4, ... (squared per bit of n)
  uint32_t result = uint32_t{1} << 31; // x^0
  for (; n != 0; n >>= 1) {
    if (n & 1)
      result = multmodp(power, result);
    power = multmodp(power, power);
  }
  return result;
}

// --- sse4.2

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_tail(uint64_t c, const unsigned char* p,
                                                             std::size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p)
    c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}

// The crc32 instruction has a latency of 3 cycles and a throughput of 1, so one dependent chain
// runs at a third of its speed: long inputs run as three lanes of kLane bytes.
constexpr std::size_t kLane = 8192;
constexpr uint32_t kLaneShift = x_to_the(8 * kLane);

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, std::size_t n,
                                                        uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 3 * kLane; n -= 3 * kLane, p += 3 * kLane) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < kLane; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);
      std::memcpy(&v1, p + kLane + i, 8);
      std::memcpy(&v2, p + 2 * kLane + i, 8);
      c0 = __builtin_ia32_crc32di(c0, v0);
      c1 = __builtin_ia32_crc32di(c1, v1);
      c2 = __builtin_ia32_crc32di(c2, v2);
    }
    c = multmodp(kLaneShift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c = multmodp(kLaneShift, c) ^ static_cast<uint32_t>(c2);
  }
  return ~crc32c_sse42_tail(c, p, n);
}

// --- fused: folding with carry-less multiplication, and crc32 lanes beside it

// The two multipliers that fold a 128-bit block d bytes on: for its low 64 bits (the earlier
// bytes, the higher powers: x^(64 + 8d)) and its high 64 bits (x^(8d)), each less 33: one for
// the bit order of the product, 32 for keeping the multiplier in a register's low half.
struct Fold {
  uint64_t low, high;
};
constexpr Fold fold_by(uint64_t bytes) {
  return {x_to_the(64 + 8 * bytes - 33), x_to_the(8 * bytes - 33)};
}
constexpr Fold kFold16 = fold_by(16), kFold32 = fold_by(32), kFold128 = fold_by(128);

#define CONVEYOR_LOAD128(p) _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
#define CONVEYOR_LOAD256(p) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))

__attribute__((target("pclmul,sse4.2"))) inline __m128i fold128(__m128i x, __m128i k,
                                                                __m128i next) {
  return _mm_xor_si128(
    _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2"))) inline __m256i
fold256(__m256i x, __m256i k, __m256i next) {
  return _mm256_xor_si256(
    _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)),
    next);
}

// The register a folded 128-bit remainder leaves: the crc32 instruction reduces it (as 16 bytes
// of input to a zero register, which is what folding made it equivalent to).
__attribute__((target("pclmul,sse4.2"))) inline uint32_t reduce128(__m128i x) {
  uint64_t c = __builtin_ia32_crc32di(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  return static_cast<uint32_t>(
    __builtin_ia32_crc32di(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1))));
}

// Four 32-byte lanes, 128 bytes a step, folded into one 128-bit remainder, then 16 bytes a step.
// `c` is the register so far (not inverted); the returned one is not inverted either.
__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2"))) uint32_t
fold_tail(uint32_t c, const unsigned char* p, std::size_t n) {
  if (n < 64)
    return crc32c_sse42_tail(c, p, n);
  const __m128i k16 =
    _mm_set_epi64x(static_cast<long long>(kFold16.high), static_cast<long long>(kFold16.low));
  __m128i a = _mm_xor_si128(CONVEYOR_LOAD128(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  p += 16;
  n -= 16;
  if (n >= 240) {
    const __m256i k128 = _mm256_set_epi64x(
      static_cast<long long>(kFold128.high), static_cast<long long>(kFold128.low),
      static_cast<long long>(kFold128.high), static_cast<long long>(kFold128.low));
    const __m256i k32 =
      _mm256_set_epi64x(static_cast<long long>(kFold32.high), static_cast<long long>(kFold32.low),
                        static_cast<long long>(kFold32.high), static_cast<long long>(kFold32.low));
    // The first 16 bytes, already in `a`, and the next 112 make the four lanes' first step.
    __m256i x0 = _mm256_inserti128_si256(_mm256_castsi128_si256(a), CONVEYOR_LOAD128(p), 1);
    __m256i x1 = CONVEYOR_LOAD256(p + 16), x2 = CONVEYOR_LOAD256(p + 48),
            x3 = CONVEYOR_LOAD256(p + 80);
    p += 112;
    n -= 112;
    for (; n >= 128; n -= 128, p += 128) {
      x0 = fold256(x0, k128, CONVEYOR_LOAD256(p));
      x1 = fold256(x1, k128, CONVEYOR_LOAD256(p + 32));
      x2 = fold256(x2, k128, CONVEYOR_LOAD256(p + 64));
      x3 = fold256(x3, k128, CONVEYOR_LOAD256(p + 96));
    }
    x0 = fold256(x0, k32, x1);
    x0 = fold256(x0, k32, x2);
    x0 = fold256(x0, k32, x3);
    a = fold128(_mm256_castsi256_si128(x0), k16, _mm256_extracti128_si256(x0, 1));
  }
  for (; n >= 16; n -= 16, p += 16)
    a = fold128(a, k16, CONVEYOR_LOAD128(p));
  return crc32c_sse42_tail(reduce128(a), p, n);
}

// A block: kFolded bytes folded, then three crc32 lanes of kFusedLane bytes, one step of each
// per loop turn (128 folded bytes and 3 x 32 lane bytes: the rates the two units run at).
constexpr std::size_t kFolded = 16384, kFusedLane = 4096;
constexpr std::size_t kFusedBlock = kFolded + 3 * kFusedLane;
static_assert(kFolded / 128 * 32 == kFusedLane, "the lanes end with the folding");
constexpr uint32_t kFusedLaneShift = x_to_the(8 * kFusedLane - 33);

// c * x^(8 * kFusedLane) mod P: a carry-less product the crc32 instruction reduces.
__attribute__((target("pclmul,sse4.2"))) inline uint32_t shift_lane(uint32_t c) {
  const __m128i product =
    _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(c)),
                         _mm_cvtsi32_si128(static_cast<int>(kFusedLaneShift)), 0x00);
  return static_cast<uint32_t>(
    __builtin_ia32_crc32di(0, static_cast<uint64_t>(_mm_cvtsi128_si64(product))));
}

// 32 bytes of each of the three lanes from offset `at`.
__attribute__((target("sse4.2"))) inline void lane_step(const unsigned char* lanes, std::size_t at,
                                                        uint64_t& c1, uint64_t& c2, uint64_t& c3) {
  for (std::size_t b = at; b < at + 32; b += 8) {
    uint64_t v1, v2, v3;
    std::memcpy(&v1, lanes + b, 8);
    std::memcpy(&v2, lanes + kFusedLane + b, 8);
    std::memcpy(&v3, lanes + 2 * kFusedLane + b, 8);
    c1 = __builtin_ia32_crc32di(c1, v1);
    c2 = __builtin_ia32_crc32di(c2, v2);
    c3 = __builtin_ia32_crc32di(c3, v3);
  }
}

// Inputs from this size are likely not in the L2 cache (1 MiB per core on the machines measured):
// a snapshot chunk mapped from the page cache. Reading four streams at once (the folded part and
// the three lanes, each lane one 4 KiB page) defeats the hardware prefetchers, which stop at page
// boundaries: over a cold 8 MiB mapping the plain loop ran 62-98 ns per KiB against 38 for a
// plain read of the same pages. Prefetching each stream's bytes one block (28 KiB) ahead into L2
// brings it to 38-41 ns per KiB; on warm data the prefetches cost ~15% (24 -> 28 ns per KiB), so
// smaller inputs go without (docs/BENCHMARKS.md, "The cold chunk checksum").
constexpr std::size_t kPrefetchFrom = 1 << 20;

// `offset` bytes on from p, into L2. Past the input's end is harmless: a prefetch never faults
// (the address is computed as an integer, not as a pointer past the end).
__attribute__((target("sse"))) inline void prefetch_l2(const unsigned char* p, std::size_t offset) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + offset), _MM_HINT_T1);
}

template <bool kPrefetch>
__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2"))) uint32_t
crc32c_fused_blocks(const void* data, std::size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  const __m256i k128 =
    _mm256_set_epi64x(static_cast<long long>(kFold128.high), static_cast<long long>(kFold128.low),
                      static_cast<long long>(kFold128.high), static_cast<long long>(kFold128.low));
  const __m256i k32 =
    _mm256_set_epi64x(static_cast<long long>(kFold32.high), static_cast<long long>(kFold32.low),
                      static_cast<long long>(kFold32.high), static_cast<long long>(kFold32.low));
  const __m128i k16 =
    _mm_set_epi64x(static_cast<long long>(kFold16.high), static_cast<long long>(kFold16.low));
  for (; n >= kFusedBlock; n -= kFusedBlock, p += kFusedBlock) {
    const unsigned char* lanes = p + kFolded;
    __m256i x0 = _mm256_xor_si256(CONVEYOR_LOAD256(p),
                                  _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(c))));
    __m256i x1 = CONVEYOR_LOAD256(p + 32), x2 = CONVEYOR_LOAD256(p + 64),
            x3 = CONVEYOR_LOAD256(p + 96);
    uint64_t c1 = 0, c2 = 0, c3 = 0;
    for (std::size_t f = 128, at = 0; f < kFolded; f += 128, at += 32) {
      x0 = fold256(x0, k128, CONVEYOR_LOAD256(p + f));
      x1 = fold256(x1, k128, CONVEYOR_LOAD256(p + f + 32));
      x2 = fold256(x2, k128, CONVEYOR_LOAD256(p + f + 64));
      x3 = fold256(x3, k128, CONVEYOR_LOAD256(p + f + 96));
      if constexpr (kPrefetch) { // the same bytes of the next block: 2 lines folded, 3 lanes'
        prefetch_l2(p, kFusedBlock + f);
        prefetch_l2(p, kFusedBlock + f + 64);
        if (at % 64 == 0)
          for (std::size_t lane = 0; lane < 3; ++lane)
            prefetch_l2(lanes, kFusedBlock + lane * kFusedLane + at);
      }
      lane_step(lanes, at, c1, c2, c3);
    }
    lane_step(lanes, kFusedLane - 32, c1, c2,
              c3); // the folding's first step was the loads before the loop
    x0 = fold256(x0, k32, x1);
    x0 = fold256(x0, k32, x2);
    x0 = fold256(x0, k32, x3);
    c = reduce128(fold128(_mm256_castsi256_si128(x0), k16, _mm256_extracti128_si256(x0, 1)));
    c = shift_lane(c) ^ static_cast<uint32_t>(c1);
    c = shift_lane(c) ^ static_cast<uint32_t>(c2);
    c = shift_lane(c) ^ static_cast<uint32_t>(c3);
  }
  return ~fold_tail(c, p, n);
}

__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2"))) uint32_t
crc32c_fused(const void* data, std::size_t n, uint32_t crc) {
  return n >= kPrefetchFrom ? crc32c_fused_blocks<true>(data, n, crc)
                            : crc32c_fused_blocks<false>(data, n, crc);
}
#undef CONVEYOR_LOAD128
#undef CONVEYOR_LOAD256
#endif

using Crc32cFn = uint32_t (*)(const void*, std::size_t, uint32_t);

std::vector<Crc32cImpl> available() {
  std::vector<Crc32cImpl> out{{"tables", crc32c_tables}};
#if defined(__x86_64__)
  __builtin_cpu_init(); // this may run as a static initializer, before libgcc's own
  if (__builtin_cpu_supports("sse4.2")) {
    out.push_back({"sse4.2", crc32c_sse42});
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("vpclmulqdq")) {
      // Both loops on any length, for tests and `conveyor bench chunk-read`; "fused" is the one
      // crc32c() runs (the plain loop under kPrefetchFrom, the prefetching one from it).
      out.push_back({"fused-plain", crc32c_fused_blocks<false>});
      out.push_back({"fused-prefetch", crc32c_fused_blocks<true>});
      out.push_back({"fused", crc32c_fused});
    }
  }
#endif
  return out;
}

const Crc32cFn kCrc32c = available().back().fn;

} // namespace

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc) { return kCrc32c(data, n, crc); }

uint32_t crc32c_portable(const void* data, std::size_t n, uint32_t crc) {
  return crc32c_tables(data, n, crc);
}

std::vector<Crc32cImpl> crc32c_implementations() { return available(); }

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

} // namespace conveyor
