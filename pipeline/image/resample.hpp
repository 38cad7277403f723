// tf.image.resize on [height, width, channels] tensors (half-pixel centers): separable weights
// per axis, computed in float.
//   bilinear  the triangle filter; with antialias, widened by the scale when downsizing (what
//             tf.image.resize(antialias=True) and PIL's BILINEAR do), else plain interpolation
//   area      each output pixel averages the input pixels its box covers (tf's "area")
//   nearest   the input pixel under the output pixel's center
// antialias changes only bilinear, as in tf.image.resize.
#pragma once

#include <string>

#include "conveyor/tensor.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::image {

enum class ResizeMethod { bilinear, area, nearest };
Expected<ResizeMethod> resize_method(const char* fn, const std::string& name);

// Output dtype: float32, or uint8 (rounded to nearest and clamped).
Expected<DType> resize_dtype(const char* fn, const std::string& name);

// `region` selects the input rectangle (top, left, height, width) to resize, so a crop and its
// resize are one pass; the whole image when height == 0.
struct Region {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// `in`: uint8 or float32 of rank 3.
Expected<Tensor> resize(const char* fn, const Tensor& in, int64_t height, int64_t width,
                        ResizeMethod method, bool antialias, DType out_dtype, Region region = {});

} // namespace conveyor::image
