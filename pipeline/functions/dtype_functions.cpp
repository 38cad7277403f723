#include "pipeline/functions/dtype_functions.hpp"

#include <cstring>

#include "pipeline/tensor/dtype_convert.hpp"

namespace conveyor {

namespace {

// The `dtype` parameter: a numeric or bool dtype's name.
Expected<DType> target_dtype(const char* fn, const Params& p) {
  auto it = p.find("dtype");
  const std::string name = it != p.end() && std::holds_alternative<std::string>(it->second)
                             ? std::get<std::string>(it->second)
                             : "float32";
  const auto dtype = dtype_from_name(name);
  if (!dtype || *dtype == DType::string)
    return invalid_argument(std::string{fn} + ": `dtype` must name a numeric or bool dtype (" +
                            dtype_names() + ", but not string), got \"" + name + "\"");
  return *dtype;
}

Status refuse_string(const char* fn, std::size_t c, DType from, DType to) {
  return invalid_argument(std::string{fn} + ": component " + std::to_string(c) +
                          ": cannot convert " + dtype_name(from) + " to " + dtype_name(to) +
                          " (only numeric and bool dtypes convert)");
}

// bool has no bit patterns beyond 0 and 1 to reinterpret (tf.bitcast refuses it too).
Status check_bitcast(std::size_t c, DType from, DType to) {
  if (from == DType::string || from == DType::boolean || to == DType::boolean)
    return invalid_argument("bitcast: component " + std::to_string(c) + ": cannot bitcast " +
                            dtype_name(from) + " to " + dtype_name(to) +
                            " (bitcast reads the bytes of numeric dtypes, not bool or string)");
  return Status::OK();
}

// tf.bitcast's shape rule for `shape` of dtype `from` read as `to`; entries of the input's spec
// may be kUnknownDim.
Expected<std::vector<int64_t>> bitcast_shape(std::size_t c, std::vector<int64_t> shape, DType from,
                                             DType to) {
  const std::size_t in = dtype_size(from);
  const std::size_t out = dtype_size(to);
  if (out < in) {
    shape.push_back(static_cast<int64_t>(in / out));
  } else if (out > in) {
    const auto ratio = static_cast<int64_t>(out / in);
    if (shape.empty() || (shape.back() != ratio && shape.back() != kUnknownDim))
      return invalid_argument(
        "bitcast: component " + std::to_string(c) + ": a " + dtype_name(from) + " tensor read as " +
        dtype_name(to) + " needs a last dimension of " + std::to_string(ratio) + ", got " +
        (shape.empty() ? std::string{"a scalar"}
                       : "a last dimension of " + std::to_string(shape.back())));
    shape.pop_back();
  }
  return shape;
}

} // namespace

FunctionDef cast_function() {
  FunctionDef d;
  d.name = "cast";
  d.kind = FunctionKind::map;
  d.params = {{"dtype", std::string{"float32"}}};
  d.doc = "every numeric or bool component converted to `dtype`, as tf.cast";
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    auto to = target_dtype("cast", p);
    if (!to.ok())
      return to.status();
    Element out;
    for (std::size_t c = 0; c < e.size(); ++c) {
      if (e[c].dtype() == DType::string)
        return refuse_string("cast", c, e[c].dtype(), *to);
      auto t = cast_tensor(e[c], *to, "cast: component " + std::to_string(c));
      if (!t.ok())
        return t.status();
      out.components.push_back(std::move(*t));
    }
    return out;
  };
  d.output_spec = [](const ElementSpec& in, const Params& p) -> Expected<ElementSpec> {
    auto to = target_dtype("cast", p);
    if (!to.ok())
      return to.status();
    ElementSpec out = in;
    for (std::size_t c = 0; c < out.components.size(); ++c) {
      if (out.components[c].dtype == DType::string)
        return refuse_string("cast", c, DType::string, *to);
      out.components[c].dtype = *to;
    }
    return out;
  };
  return d;
}

FunctionDef bitcast_function() {
  FunctionDef d;
  d.name = "bitcast";
  d.kind = FunctionKind::map;
  d.params = {{"dtype", std::string{"float32"}}};
  d.doc = "every numeric or bool component's bytes read as `dtype`, as tf.bitcast";
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    auto to = target_dtype("bitcast", p);
    if (!to.ok())
      return to.status();
    Element out;
    for (std::size_t c = 0; c < e.size(); ++c) {
      const Tensor& t = e[c];
      CONVEYOR_RETURN_IF_ERROR(check_bitcast(c, t.dtype(), *to));
      auto shape = bitcast_shape(c, t.shape(), t.dtype(), *to);
      if (!shape.ok())
        return shape.status();
      Tensor r{*to, std::move(*shape)};
      if (!t.bytes().empty())
        std::memcpy(r.mutable_bytes().data(), t.bytes().data(), t.bytes().size());
      out.components.push_back(std::move(r));
    }
    return out;
  };
  d.output_spec = [](const ElementSpec& in, const Params& p) -> Expected<ElementSpec> {
    auto to = target_dtype("bitcast", p);
    if (!to.ok())
      return to.status();
    ElementSpec out = in;
    for (std::size_t c = 0; c < out.components.size(); ++c) {
      TensorSpec& spec = out.components[c];
      CONVEYOR_RETURN_IF_ERROR(check_bitcast(c, spec.dtype, *to));
      if (!spec.unknown_rank) {
        auto shape = bitcast_shape(c, spec.shape, spec.dtype, *to);
        if (!shape.ok())
          return shape.status();
        spec.shape = std::move(*shape);
      }
      spec.dtype = *to;
    }
    return out;
  };
  return d;
}

} // namespace conveyor
