#include "pipeline/graph/padding.hpp"

namespace conveyor {

Expected<PaddingConfig> padding_config(const Node& n) {
  PaddingConfig config;
  const Element& shapes = n.element_attr("padded_shapes");
  for (std::size_t c = 0; c < shapes.size(); ++c) {
    const Tensor& t = shapes[c];
    const std::string what = "padded_batch: `padded_shapes` component " + std::to_string(c);
    if (t.rank() != 1)
      return invalid_argument(what +
                              " must be a list of dimensions like [-1, 3] ([] for a scalar), got " +
                              t.to_string());
    PartialShape shape;
    if (t.num_elements() > 0) {
      if (t.dtype() != DType::int64 && t.dtype() != DType::int32)
        return invalid_argument(what + " must hold ints, got " + t.to_string());
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const int64_t d = t.dtype() == DType::int64 ? t.at<int64_t>(i) : t.at<int32_t>(i);
        if (d < kUnknownDim)
          return invalid_argument(
            what + " has dimension " + std::to_string(d) +
            "; dimensions are >= 0, or -1 to pad to the longest in the batch");
        shape.push_back(d);
      }
    }
    config.shapes.push_back(std::move(shape));
  }
  const Element& values = n.element_attr("padding_values");
  for (std::size_t c = 0; c < values.size(); ++c) {
    if (values[c].rank() != 0)
      return invalid_argument("padded_batch: `padding_values` component " + std::to_string(c) +
                              " must be a scalar, got " + values[c].to_string());
    config.values.push_back(values[c]);
  }
  if (!config.shapes.empty() && !config.values.empty() &&
      config.shapes.size() != config.values.size())
    return invalid_argument(
      "padded_batch: `padded_shapes` has " + std::to_string(config.shapes.size()) +
      " component(s) but `padding_values` has " + std::to_string(config.values.size()));
  return config;
}

Element padded_shapes_element(const std::vector<PartialShape>& shapes) {
  std::vector<Tensor> parts;
  for (const PartialShape& s : shapes)
    parts.push_back(Tensor::vector<int64_t>(s));
  return Element{std::move(parts)};
}

Element canonical_padded_shapes(Element given) {
  for (Tensor& t : given.components) {
    if (t.rank() != 1)
      continue;
    if (t.num_elements() == 0 && t.dtype() != DType::string)
      t = Tensor(DType::int64, Shape{0});
    else if (t.dtype() == DType::int32) {
      std::vector<int64_t> dims;
      for (int64_t i = 0; i < t.num_elements(); ++i)
        dims.push_back(t.at<int32_t>(i));
      t = Tensor::vector<int64_t>(dims);
    }
  }
  return given;
}

std::string padded_shapes_text(const Element& shapes) {
  std::vector<std::string> parts;
  for (const Tensor& t : shapes.components) {
    if (t.rank() != 1 || t.dtype() != DType::int64) {
      parts.push_back(t.to_string()); // not a shape; validate() says so
      continue;
    }
    std::string s = "[";
    for (int64_t i = 0; i < t.num_elements(); ++i)
      s += (i ? ", " : "") + std::to_string(t.at<int64_t>(i));
    parts.push_back(s + "]");
  }
  if (parts.size() == 1)
    return parts[0];
  std::string out = "(";
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i ? ", " : "") + parts[i];
  return out + ")";
}

} // namespace conveyor
