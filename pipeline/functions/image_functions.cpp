#include "pipeline/functions/image_functions.hpp"

#include <cmath>

#include "pipeline/image/crop_region.hpp"
#include "pipeline/image/element_random.hpp"
#include "pipeline/image/image_decode.hpp"
#include "pipeline/image/pixel_ops.hpp"
#include "pipeline/image/resample.hpp"

namespace conveyor {

namespace {

using image::ElementRandom;

int64_t int_param(const Params& p, const char* name) {
  auto it = p.find(name);
  return it != p.end() && std::holds_alternative<int64_t>(it->second)
           ? std::get<int64_t>(it->second)
           : 0;
}
double float_param(const Params& p, const char* name) {
  auto it = p.find(name);
  if (it == p.end())
    return 0.0;
  if (std::holds_alternative<int64_t>(it->second))
    return static_cast<double>(std::get<int64_t>(it->second));
  return std::holds_alternative<double>(it->second) ? std::get<double>(it->second) : 0.0;
}
bool bool_param(const Params& p, const char* name) {
  auto it = p.find(name);
  return it != p.end() && std::holds_alternative<bool>(it->second) && std::get<bool>(it->second);
}
std::string string_param(const Params& p, const char* name) {
  auto it = p.find(name);
  return it != p.end() && std::holds_alternative<std::string>(it->second)
           ? std::get<std::string>(it->second)
           : std::string{};
}

// Every image op's last two parameters: which component it acts on.
std::vector<ParamSpec> with_target(std::vector<ParamSpec> params) {
  params.push_back({"key", std::string{}});
  params.push_back({"index", int64_t{-1}});
  return params;
}

// An op on the target tensor; `in` is the whole element (random ops hash it).
using TensorOp = std::function<Expected<Tensor>(const Tensor&, const Element& in, const Params&)>;
// The target's spec from its input spec.
using TensorSpecOp = std::function<Expected<TensorSpec>(const TensorSpec&, const Params&)>;

FunctionDef image_def(const char* name, std::vector<ParamSpec> params, std::string doc, TensorOp op,
                      TensorSpecOp spec) {
  FunctionDef d;
  d.name = name;
  d.kind = FunctionKind::map;
  d.params = with_target(std::move(params));
  d.doc = std::move(doc);
  d.map = [name, op](const Element& e, const Params& p) -> Expected<Element> {
    auto target = image_target(name, e.size(), p);
    if (!target.ok())
      return target.status();
    auto t = op(e[*target], e, p);
    if (!t.ok())
      return t.status();
    Element out = e;
    out[*target] = std::move(*t);
    return out;
  };
  d.output_spec = [name, spec](const ElementSpec& in, const Params& p) -> Expected<ElementSpec> {
    auto target =
      image_target(name, in.components.size(), p, in.structure ? &*in.structure : nullptr);
    if (!target.ok())
      return target.status();
    auto t = spec(in.components[*target], p);
    if (!t.ok())
      return t.status();
    ElementSpec out = in;
    out.components[*target] = std::move(*t);
    return out;
  };
  return d;
}

TensorSpec hwc_spec(DType dtype, int64_t h, int64_t w, int64_t c) {
  return TensorSpec{dtype, {h, w, c}, false};
}
int64_t spec_channels(const TensorSpec& s) {
  return !s.unknown_rank && s.shape.size() == 3 ? s.shape[2] : kUnknownDim;
}

Status positive_size(const char* fn, int64_t h, int64_t w) {
  if (h <= 0 || w <= 0)
    return invalid_argument(std::string{fn} +
                            ": `height` and `width` must be positive ints, got height=" +
                            std::to_string(h) + " width=" + std::to_string(w));
  return Status::OK();
}

Status require_string_scalar(const Tensor& t) {
  if (t.dtype() != DType::string || t.rank() != 0)
    return invalid_argument(std::string{"decode_image: expected the image's encoded bytes (a "
                                        "string scalar), got "} +
                            dtype_name(t.dtype()) + " of rank " + std::to_string(t.rank()));
  return Status::OK();
}

FunctionDef decode_fn() {
  return image_def(
    "decode_image", {{"channels", int64_t{0}}},
    "JPEG/PNG/WebP bytes -> uint8 [height, width, channels] (channels 0 = the image's own)",
    [](const Tensor& t, const Element&, const Params& p) -> Expected<Tensor> {
      CONVEYOR_RETURN_IF_ERROR(require_string_scalar(t));
      return image::decode_image(t.string_at(0), static_cast<int>(int_param(p, "channels")));
    },
    [](const TensorSpec&, const Params& p) -> Expected<TensorSpec> {
      const int64_t c = int_param(p, "channels");
      return hwc_spec(DType::uint8, kUnknownDim, kUnknownDim, c == 0 ? kUnknownDim : c);
    });
}

struct ResizeOptions {
  image::ResizeMethod method;
  bool antialias;
  DType dtype;
};
Expected<ResizeOptions> resize_options(const char* fn, const Params& p) {
  auto method = image::resize_method(fn, string_param(p, "method"));
  if (!method.ok())
    return method.status();
  auto dtype = image::resize_dtype(fn, string_param(p, "dtype"));
  if (!dtype.ok())
    return dtype.status();
  // tf.image.resize ignores `antialias` for area and nearest; here a value that would not
  // describe what the method does is refused instead.
  const bool antialias = bool_param(p, "antialias");
  if (*method == image::ResizeMethod::nearest && antialias)
    return invalid_argument(std::string{fn} +
                            ": `antialias=true` has no effect with method=\"nearest\" (it "
                            "takes one input pixel); pass antialias=false");
  if (*method == image::ResizeMethod::area && !antialias)
    return invalid_argument(std::string{fn} +
                            ": method=\"area\" always anti-aliases (it averages every input "
                            "pixel an output pixel covers); pass antialias=true, or "
                            "method=\"bilinear\" for a resize without anti-aliasing");
  return ResizeOptions{*method, antialias, *dtype};
}
std::vector<ParamSpec> resize_params(std::vector<ParamSpec> first) {
  first.push_back({"method", std::string{"bilinear"}});
  first.push_back({"antialias", true});
  first.push_back({"dtype", std::string{"float32"}});
  return first;
}

// resize's parameters, checked once for the run and the spec alike.
struct ResizeParams {
  int64_t height;
  int64_t width;
  ResizeOptions options;
};
Expected<ResizeParams> resize_params_of(const Params& p) {
  auto o = resize_options("resize", p);
  if (!o.ok())
    return o.status();
  return ResizeParams{int_param(p, "height"), int_param(p, "width"), *o};
}

FunctionDef resize_fn() {
  return image_def(
    "resize", resize_params({{"height", int64_t{0}}, {"width", int64_t{0}}}),
    "image -> [height, width, channels] as tf.image.resize (float32, or uint8 with dtype)",
    [](const Tensor& t, const Element&, const Params& p) -> Expected<Tensor> {
      auto r = resize_params_of(p);
      if (!r.ok())
        return r.status();
      return image::resize("resize", t, r->height, r->width, r->options.method,
                           r->options.antialias, r->options.dtype);
    },
    [](const TensorSpec& in, const Params& p) -> Expected<TensorSpec> {
      auto r = resize_params_of(p);
      if (!r.ok())
        return r.status();
      CONVEYOR_RETURN_IF_ERROR(positive_size("resize", r->height, r->width));
      return hwc_spec(r->options.dtype, r->height, r->width, spec_channels(in));
    });
}

// The window of center_crop and random_crop: positive, checked for the run and the spec alike.
struct CropSize {
  int64_t height;
  int64_t width;
};
Expected<CropSize> crop_size(const char* fn, const Params& p) {
  const CropSize size{int_param(p, "height"), int_param(p, "width")};
  CONVEYOR_RETURN_IF_ERROR(positive_size(fn, size.height, size.width));
  return size;
}

TensorSpecOp cropped_spec(const char* fn) {
  return [fn](const TensorSpec& in, const Params& p) -> Expected<TensorSpec> {
    auto size = crop_size(fn, p);
    if (!size.ok())
      return size.status();
    return hwc_spec(in.dtype, size->height, size->width, spec_channels(in));
  };
}

FunctionDef center_crop_fn() {
  return image_def(
    "center_crop", {{"height", int64_t{0}}, {"width", int64_t{0}}},
    "image -> its central [height, width] (offsets rounded as torchvision's CenterCrop)",
    [](const Tensor& t, const Element&, const Params& p) -> Expected<Tensor> {
      auto size = crop_size("center_crop", p);
      if (!size.ok())
        return size.status();
      CONVEYOR_RETURN_IF_ERROR(image::require_hwc("center_crop", t));
      const auto top = static_cast<int64_t>(std::lround((t.shape()[0] - size->height) / 2.0));
      const auto left = static_cast<int64_t>(std::lround((t.shape()[1] - size->width) / 2.0));
      return image::crop("center_crop", t, top, left, size->height, size->width);
    },
    cropped_spec("center_crop"));
}

FunctionDef random_crop_fn() {
  return image_def(
    "random_crop", {{"height", int64_t{0}}, {"width", int64_t{0}}, {"seed", int64_t{0}}},
    "image -> a [height, width] window at a random offset (per seed and element)",
    [](const Tensor& t, const Element& e, const Params& p) -> Expected<Tensor> {
      auto size = crop_size("random_crop", p);
      if (!size.ok())
        return size.status();
      const int64_t h = size->height, w = size->width;
      CONVEYOR_RETURN_IF_ERROR(image::require_hwc("random_crop", t));
      if (h > t.shape()[0] || w > t.shape()[1])
        return image::crop("random_crop", t, 0, 0, h, w); // its error names both sizes
      ElementRandom rng{int_param(p, "seed"), "random_crop", e};
      const int64_t top = rng.integer(0, t.shape()[0] - h);
      const int64_t left = rng.integer(0, t.shape()[1] - w);
      return image::crop("random_crop", t, top, left, h, w);
    },
    cropped_spec("random_crop"));
}

// random_resized_crop's parameters, checked once for the run and the spec alike.
struct RrcParams {
  int64_t size;
  image::ResizedCropRange range;
  ResizeOptions options;
};
Expected<RrcParams> rrc_params(const Params& p) {
  auto o = resize_options("random_resized_crop", p);
  if (!o.ok())
    return o.status();
  RrcParams r{int_param(p, "size"),
              {float_param(p, "scale_min"), float_param(p, "scale_max"),
               float_param(p, "ratio_min"), float_param(p, "ratio_max")},
              *o};
  const image::ResizedCropRange& g = r.range;
  if (r.size <= 0)
    return invalid_argument("random_resized_crop: `size` must be a positive int, got " +
                            std::to_string(r.size));
  if (!(g.scale_min > 0 && g.scale_min <= g.scale_max && g.scale_max <= 1.0))
    return invalid_argument("random_resized_crop: expected 0 < scale_min <= scale_max <= 1, got "
                            "scale_min=" +
                            std::to_string(g.scale_min) +
                            " scale_max=" + std::to_string(g.scale_max));
  if (!(g.ratio_min > 0 && g.ratio_min <= g.ratio_max))
    return invalid_argument("random_resized_crop: expected 0 < ratio_min <= ratio_max, got "
                            "ratio_min=" +
                            std::to_string(g.ratio_min) +
                            " ratio_max=" + std::to_string(g.ratio_max));
  return r;
}

FunctionDef random_resized_crop_fn() {
  return image_def(
    "random_resized_crop",
    resize_params({{"size", int64_t{224}},
                   {"scale_min", 0.08},
                   {"scale_max", 1.0},
                   {"ratio_min", 3.0 / 4.0},
                   {"ratio_max", 4.0 / 3.0},
                   {"seed", int64_t{0}}}),
    "image -> a random area/aspect crop resized to [size, size] (torchvision's RandomResizedCrop)",
    [](const Tensor& t, const Element& e, const Params& p) -> Expected<Tensor> {
      auto r = rrc_params(p);
      if (!r.ok())
        return r.status();
      CONVEYOR_RETURN_IF_ERROR(image::require_hwc("random_resized_crop", t));
      ElementRandom rng{int_param(p, "seed"), "random_resized_crop", e};
      const image::Region region =
        image::resized_crop_region(t.shape()[0], t.shape()[1], r->range, rng);
      return image::resize("random_resized_crop", t, r->size, r->size, r->options.method,
                           r->options.antialias, r->options.dtype, region);
    },
    [](const TensorSpec& in, const Params& p) -> Expected<TensorSpec> {
      auto r = rrc_params(p);
      if (!r.ok())
        return r.status();
      return hwc_spec(r->options.dtype, r->size, r->size, spec_channels(in));
    });
}

FunctionDef flip_fn() {
  return image_def(
    "random_flip_left_right", {{"seed", int64_t{0}}},
    "image -> mirrored left-right with probability 1/2 (per seed and element)",
    [](const Tensor& t, const Element& e, const Params& p) -> Expected<Tensor> {
      CONVEYOR_RETURN_IF_ERROR(image::require_hwc("random_flip_left_right", t));
      ElementRandom rng{int_param(p, "seed"), "random_flip_left_right", e};
      if ((rng.next() >> 63) == 0)
        return t;
      return image::flip_left_right(t);
    },
    [](const TensorSpec& in, const Params&) -> Expected<TensorSpec> { return in; });
}

// normalize's parameters, checked once for the run and the spec alike (so a bad `mean` is
// refused when the dataset is built, not at its first element).
struct NormalizeParams {
  DType dtype;
  std::vector<double> mean;
  std::vector<double> stddev;
  double scale;
};
Expected<NormalizeParams> normalize_params(const Params& p) {
  const std::string name = string_param(p, "dtype");
  if (name != "float32" && name != "float16")
    return invalid_argument("normalize: `dtype` must be \"float32\" or \"float16\", got \"" + name +
                            "\"");
  auto mean = image::parse_floats("normalize", "mean", string_param(p, "mean"));
  if (!mean.ok())
    return mean.status();
  auto stddev = image::parse_floats("normalize", "std", string_param(p, "std"));
  if (!stddev.ok())
    return stddev.status();
  return NormalizeParams{name == "float32" ? DType::float32 : DType::float16, std::move(*mean),
                         std::move(*stddev), float_param(p, "scale")};
}

FunctionDef normalize_fn() {
  return image_def(
    "normalize",
    {{"mean", std::string{"0"}},
     {"std", std::string{"1"}},
     {"scale", 1.0},
     {"dtype", std::string{"float32"}}},
    "image -> (x * scale - mean) / std per channel (mean, std: \"a,b,c\"), float32 or float16",
    [](const Tensor& t, const Element&, const Params& p) -> Expected<Tensor> {
      auto n = normalize_params(p);
      if (!n.ok())
        return n.status();
      return image::normalize(t, n->mean, n->stddev, n->scale, n->dtype);
    },
    [](const TensorSpec& in, const Params& p) -> Expected<TensorSpec> {
      auto n = normalize_params(p);
      if (!n.ok())
        return n.status();
      TensorSpec out = in;
      out.dtype = n->dtype;
      return out;
    });
}

FunctionDef to_chw_fn() {
  return image_def(
    "to_chw", {}, "image [height, width, channels] -> [channels, height, width]",
    [](const Tensor& t, const Element&, const Params&) -> Expected<Tensor> {
      CONVEYOR_RETURN_IF_ERROR(image::require_hwc("to_chw", t));
      return image::to_chw(t);
    },
    [](const TensorSpec& in, const Params&) -> Expected<TensorSpec> {
      if (in.unknown_rank || in.shape.size() != 3)
        return TensorSpec{in.dtype, {kUnknownDim, kUnknownDim, kUnknownDim}, false};
      return TensorSpec{in.dtype, {in.shape[2], in.shape[0], in.shape[1]}, false};
    });
}

} // namespace

Expected<std::size_t> image_target(const char* fn, std::size_t components, const Params& params,
                                   const Structure* structure) {
  const int64_t index = int_param(params, "index");
  if (const std::string key = string_param(params, "key"); !key.empty()) {
    if (index != -1)
      return invalid_argument(std::string{fn} + ": give `key` or `index`, not both");
    auto found = component_of_key(fn, key, structure);
    if (!found.ok())
      return found.status();
    return *found;
  }
  if (index >= 0) {
    if (static_cast<std::size_t>(index) >= components)
      return invalid_argument(std::string{fn} + ": index=" + std::to_string(index) +
                              " is out of range for an element of " + std::to_string(components) +
                              " components");
    return static_cast<std::size_t>(index);
  }
  if (index != -1)
    return invalid_argument(std::string{fn} + ": `index` must be >= 0, got " +
                            std::to_string(index));
  if (components != 1)
    return invalid_argument(std::string{fn} + ": the element has " + std::to_string(components) +
                            " components; say which is the image with index=N");
  return std::size_t{0};
}

Status register_image_functions(FunctionRegistry& registry) {
  FunctionDef defs[] = {
    decode_fn(), resize_fn(),    center_crop_fn(), random_crop_fn(), random_resized_crop_fn(),
    flip_fn(),   normalize_fn(), to_chw_fn()};
  for (FunctionDef& d : defs)
    CONVEYOR_RETURN_IF_ERROR(registry.add(std::move(d)));
  return Status::OK();
}

} // namespace conveyor
