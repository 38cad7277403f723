// Image ops for Dataset::map, run on the workers (docs/USER_GUIDE.md "Image ops"):
//   ds.map(image::decode(3)).map(image::random_resized_crop(224, /*seed=*/1))
//     .map(image::random_flip_left_right(2)).map(image::normalize("0.485,0.456,0.406",
//     "0.229,0.224,0.225", 1.0 / 255)).map(image::to_chw())
// Each helper names a registered function with its parameters; `.on(N)` picks component N of a
// tuple element (the default is the element's only component).
#pragma once

#include <optional>
#include <string>

#include "conveyor/graph.hpp"

namespace conveyor::image {

// `ref` acting on component `index` of a tuple element.
inline FunctionRef on(FunctionRef ref, int64_t index) {
  ref.params["index"] = index;
  return ref;
}

inline FunctionRef decode(int64_t channels = 0) {
  return FunctionRef{"decode_image", {{"channels", channels}}};
}

// method: "bilinear", "area" or "nearest"; dtype: "float32" or "uint8". antialias: unset = what
// the method does (bilinear: on; area: always on; nearest: off); a contradicting value is refused.
inline FunctionRef resize(int64_t height, int64_t width, std::string method = "bilinear",
                          std::optional<bool> antialias = std::nullopt,
                          std::string dtype = "float32") {
  const bool aa = antialias.value_or(method != "nearest");
  return FunctionRef{"resize",
                     {{"height", height},
                      {"width", width},
                      {"method", std::move(method)},
                      {"antialias", aa},
                      {"dtype", std::move(dtype)}}};
}

inline FunctionRef center_crop(int64_t height, int64_t width) {
  return FunctionRef{"center_crop", {{"height", height}, {"width", width}}};
}

inline FunctionRef random_crop(int64_t height, int64_t width, int64_t seed = 0) {
  return FunctionRef{"random_crop", {{"height", height}, {"width", width}, {"seed", seed}}};
}

inline FunctionRef random_resized_crop(int64_t size, int64_t seed = 0, double scale_min = 0.08,
                                       double scale_max = 1.0, double ratio_min = 3.0 / 4.0,
                                       double ratio_max = 4.0 / 3.0) {
  return FunctionRef{"random_resized_crop",
                     {{"size", size},
                      {"seed", seed},
                      {"scale_min", scale_min},
                      {"scale_max", scale_max},
                      {"ratio_min", ratio_min},
                      {"ratio_max", ratio_max}}};
}

inline FunctionRef random_flip_left_right(int64_t seed = 0) {
  return FunctionRef{"random_flip_left_right", {{"seed", seed}}};
}

// mean, std: one number or one per channel, comma-separated; dtype: "float32" or "float16".
inline FunctionRef normalize(std::string mean, std::string std, double scale = 1.0,
                             std::string dtype = "float32") {
  return FunctionRef{"normalize",
                     {{"mean", std::move(mean)},
                      {"std", std::move(std)},
                      {"scale", scale},
                      {"dtype", std::move(dtype)}}};
}

inline FunctionRef to_chw() { return FunctionRef{"to_chw"}; }

} // namespace conveyor::image
