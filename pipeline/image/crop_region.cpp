#include "pipeline/image/crop_region.hpp"

#include <cmath>

namespace conveyor::image {

Region resized_crop_region(int64_t H, int64_t W, const ResizedCropRange& r, ElementRandom& rng) {
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double log_lo = std::log(r.ratio_min), log_hi = std::log(r.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(r.scale_min, r.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (0 < w && w <= W && 0 < h && h <= H) {
      const int64_t top = rng.integer(0, H - h);
      return {top, rng.integer(0, W - w), h, w};
    }
  }
  const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
  int64_t w = W, h = H;
  if (in_ratio < r.ratio_min)
    h = std::lround(static_cast<double>(w) / r.ratio_min);
  else if (in_ratio > r.ratio_max)
    w = std::lround(static_cast<double>(h) * r.ratio_max);
  return {(H - h) / 2, (W - w) / 2, h, w};
}

} // namespace conveyor::image
