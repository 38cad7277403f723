// decode_image's codecs: JPEG (libturbojpeg), PNG (libpng), WebP (libwebp) bytes to a uint8
// [height, width, channels] tensor, the format told by the bytes' signature as
// tf.io.decode_image does. channels: 0 = the image's own (JPEG 1 or 3, PNG 1 to 4, WebP 3 or 4),
// or 1, 3, 4 to convert.
#pragma once

#include <string_view>

#include "conveyor/tensor.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::image {

enum class ImageFormat { jpeg, png, webp, unknown };
const char* format_name(ImageFormat format);
ImageFormat sniff_format(std::string_view bytes);

// A corrupt or truncated image is an error naming the format and the codec's reason.
Expected<Tensor> decode_image(std::string_view bytes, int channels);

} // namespace conveyor::image
