#include "pipeline/sharding/deterministic_split.hpp"

#include <algorithm>

#include "conveyor/dtype.hpp"

namespace conveyor {

std::optional<int64_t> static_element_bytes(const ElementSpec& spec) {
  if (spec.components.empty()) // an unknown spec
    return std::nullopt;
  int64_t total = 0;
  for (const TensorSpec& c : spec.components) {
    if (c.unknown_rank || c.dtype == DType::string)
      return std::nullopt;
    int64_t n = static_cast<int64_t>(dtype_size(c.dtype));
    for (int64_t d : c.shape) {
      if (d < 0) // kUnknownDim
        return std::nullopt;
      if (d > 0 && n > (int64_t{1} << 50) / d) // absurd sizes: treated as unknown
        return std::nullopt;
      n *= d;
    }
    total += n;
  }
  return total;
}

int64_t deterministic_split_cap(std::optional<int64_t> element_bytes, int64_t window,
                                int64_t hold_bytes) {
  if (!element_bytes)
    return kDeterministicDefaultSplit;
  const int64_t split_bytes = std::max<int64_t>(1, hold_bytes / std::max<int64_t>(1, window));
  // (zero-byte elements, e.g. shape (0,), count as one byte each)
  return std::clamp<int64_t>(split_bytes / std::max<int64_t>(1, *element_bytes), 1,
                             kDeterministicLargestSplit);
}

} // namespace conveyor
