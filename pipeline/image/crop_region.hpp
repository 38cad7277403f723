// Where random_resized_crop cuts: torchvision's RandomResizedCrop.get_params. Ten tries at a
// random fraction of the area in [scale_min, scale_max] and an aspect ratio log-uniform in
// [ratio_min, ratio_max]; when none fits, the central crop with the ratio clamped to the range.
#pragma once

#include <cstdint>

#include "pipeline/image/element_random.hpp"
#include "pipeline/image/resample.hpp"

namespace conveyor::image {

struct ResizedCropRange {
  double scale_min, scale_max, ratio_min, ratio_max;
};

Region resized_crop_region(int64_t height, int64_t width, const ResizedCropRange& range,
                           ElementRandom& rng);

} // namespace conveyor::image
