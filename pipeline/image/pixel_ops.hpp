// The image ops that move or rescale pixels without resampling, on [height, width, channels]
// tensors of any numeric dtype (normalize: uint8 or float32).
#pragma once

#include <string>
#include <vector>

#include "conveyor/tensor.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::image {

// A rank-3 numeric tensor, or an error naming `fn` and what it got.
Status require_hwc(const char* fn, const Tensor& t);

// The rectangle [top, top+height) x [left, left+width), which must lie inside the image.
Expected<Tensor> crop(const char* fn, const Tensor& in, int64_t top, int64_t left, int64_t height,
                      int64_t width);
Tensor flip_left_right(const Tensor& in);
Tensor to_chw(const Tensor& in);

// "0.485,0.456,0.406" -> {0.485, 0.456, 0.406}; one value or one per channel.
Expected<std::vector<double>> parse_floats(const char* fn, const char* param,
                                           const std::string& text);
// (x * scale - mean[c]) / std[c] per channel, as float32 or float16.
Expected<Tensor> normalize(const Tensor& in, const std::vector<double>& mean,
                           const std::vector<double>& stddev, double scale, DType out);

} // namespace conveyor::image
