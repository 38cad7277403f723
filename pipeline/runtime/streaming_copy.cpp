// Streaming copies (see the header). AVX2 is chosen at run time, so the build needs no -mavx2.
#include "pipeline/runtime/streaming_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CONVEYOR_STREAMING_COPY 1
#endif

namespace conveyor {

#ifdef CONVEYOR_STREAMING_COPY
namespace {

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// memcpy up to the destination's next 32-byte boundary, 128 bytes per step with unaligned loads
// and aligned streaming stores, memcpy for the tail; then the fence (streaming stores are weakly
// ordered).
__attribute__((target("avx2"))) void stream_avx2(unsigned char* d, const unsigned char* s,
                                                 std::size_t n) {
  std::size_t head = (32 - (reinterpret_cast<std::uintptr_t>(d) & 31)) & 31;
  if (head > n)
    head = n;
  if (head > 0) // (memcpy's pointers must not be null even for no bytes)
    std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  if (n > 0)
    std::memcpy(d, s, n);
  _mm_sfence();
}

} // namespace

bool streaming_copy(void* dst, const void* src, std::size_t n) {
  if (!has_avx2())
    return false;
  stream_avx2(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), n);
  return true;
}
#else
bool streaming_copy(void*, const void*, std::size_t) { return false; }
#endif

} // namespace conveyor
