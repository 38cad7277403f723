// The image map functions (decode_image, resize, center_crop, random_crop, random_resized_crop,
// random_flip_left_right, normalize, to_chw): docs/USER_GUIDE.md "Image ops". Built with
// -DCONVEYOR_IMAGE_OPS=ON (the default); the codecs and resampling are in pipeline/image/.
#pragma once

#include "conveyor/functions.hpp"

namespace conveyor {

Status register_image_functions(FunctionRegistry& registry);

// Which component an image op acts on: `key="jpg"` (a dict element's entry), `index=N` (a tuple's
// component N), or the element's only component. `structure`: the input's, when known (the spec
// rules pass it; at run time the map kernel has already turned `key` into `index`, see
// resolve_component_key in include/conveyor/functions.hpp).
Expected<std::size_t> image_target(const char* fn, std::size_t components, const Params& params,
                                   const Structure* structure = nullptr);

} // namespace conveyor
