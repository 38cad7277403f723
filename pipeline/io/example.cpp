// Feature specs and tf.train.Example parsing (example.hpp), on the protobuf messages generated
// from pipeline/io/proto/*.proto (TensorFlow's field numbers).
#include "pipeline/io/example.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "pipeline/io/proto/example.pb.h"
#include "pipeline/graph/text_value.hpp"
#include "pipeline/tensor/dtype_convert.hpp"

namespace conveyor {

namespace {

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t product(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

// int64, float32 or string, with TensorFlow's proto names (float, bytes) as synonyms.
std::optional<DType> feature_dtype(std::string_view name) {
  if (name == "int64")
    return DType::int64;
  if (name == "float32" || name == "float")
    return DType::float32;
  if (name == "string" || name == "bytes")
    return DType::string;
  return std::nullopt;
}

const char* list_name(DType d) {
  switch (d) {
    case DType::int64: return "an int64_list";
    case DType::float32: return "a float_list";
    default: return "a bytes_list";
  }
}

std::string feature_kind(const FeatureConfig& f) {
  return f.var_len
           ? std::string("var(") + dtype_name(f.dtype) + ")"
           : std::string(dtype_name(f.dtype)) + (f.shape.empty() ? "" : shape_text(f.shape));
}

// Splits at `;` outside string literals.
std::vector<std::pair<std::size_t, std::string_view>> split_features(std::string_view text) {
  std::vector<std::pair<std::size_t, std::string_view>> parts;
  std::size_t start = 0;
  char quote = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && quote != 0) {
      if (text[i] == '\\')
        ++i;
      else if (text[i] == quote)
        quote = 0;
      continue;
    }
    if (i < text.size() && (text[i] == '"' || text[i] == '\'')) {
      quote = text[i];
      continue;
    }
    if (i == text.size() || text[i] == ';') {
      parts.emplace_back(start, text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// The default as a tensor of the feature's dtype: a scalar, or of exactly the feature's shape.
Expected<Tensor> canonical_default(const FeatureConfig& f, const Tensor& given) {
  const std::string what = "feature `" + f.name + "`: default_value";
  const int64_t want = product(f.shape);
  Shape shape;
  if (given.num_elements() == 1 && given.rank() == 0)
    shape = {};
  else if (given.num_elements() == want)
    shape = f.shape;
  else
    return invalid_argument(what + " has " + std::to_string(given.num_elements()) +
                            " value(s) of shape " + shape_text(given.shape()) +
                            "; the feature's shape " + shape_text(f.shape) + " needs " +
                            std::to_string(want) + " (or one scalar)");
  if (f.dtype == DType::string) {
    if (given.dtype() != DType::string)
      return invalid_argument(what + " must be a string for a string feature, got " +
                              dtype_name(given.dtype()));
    return Tensor::from_values<std::string>(shape, given.strings());
  }
  if (given.dtype() == DType::string)
    return invalid_argument(what + " must be a number for a " + dtype_name(f.dtype) +
                            " feature, got a string");
  // A number of any dtype converts as tf.cast would (the feature is int64 or float32).
  auto converted = cast_tensor(given, f.dtype, what);
  if (!converted.ok())
    return converted.status();
  Tensor out{f.dtype, shape};
  if (out.num_elements() > 0)
    std::memcpy(out.mutable_bytes().data(), converted->bytes().data(), out.bytes().size());
  return out;
}

Status spec_error(std::size_t offset, const std::string& message) {
  return invalid_argument("feature spec, character " + std::to_string(offset + 1) + ": " + message);
}

Expected<FeatureConfig> parse_feature(std::size_t offset, std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return spec_error(offset, "expected `NAME: DTYPE...`, found `" + trim(text) + "` (no `:`)");
  FeatureConfig f;
  f.name = trim(text.substr(0, colon));
  if (f.name.empty())
    return spec_error(offset, "a feature needs a name before `:`");
  std::string rest = trim(text.substr(colon + 1));
  const std::string where = "feature `" + f.name + "`: ";
  auto bad_dtype = [&](const std::string& found) {
    return invalid_argument(where + "expected a dtype (int64, float32 or string), found `" + found +
                            "`");
  };
  if (rest.rfind("var(", 0) == 0 || rest.rfind("var (", 0) == 0) {
    const std::size_t open = rest.find('(');
    const std::size_t close = rest.find(')');
    if (close == std::string::npos || trim(rest.substr(close + 1)) != "")
      return invalid_argument(where + "expected `var(DTYPE)` and nothing after it, found `" + rest +
                              "`");
    const std::string dtype = trim(rest.substr(open + 1, close - open - 1));
    auto d = feature_dtype(dtype);
    if (!d)
      return bad_dtype(dtype);
    f.dtype = *d;
    f.var_len = true;
    return f;
  }
  std::size_t i = 0;
  while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '_'))
    ++i;
  auto d = feature_dtype(rest.substr(0, i));
  if (!d)
    return bad_dtype(rest.substr(0, i).empty() ? rest : rest.substr(0, i));
  f.dtype = *d;
  std::string after = trim(rest.substr(i));
  if (!after.empty() && after[0] == '[') {
    const std::size_t close = after.find(']');
    if (close == std::string::npos)
      return invalid_argument(where + "shape `" + after + "` has no closing `]`");
    std::string dims = after.substr(1, close - 1);
    std::size_t pos = 0;
    while (!trim(dims).empty() && pos <= dims.size()) {
      std::size_t comma = dims.find(',', pos);
      std::string dim =
        trim(dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
      char* end = nullptr;
      errno = 0;
      const long long v = dim.empty() ? -1 : std::strtoll(dim.c_str(), &end, 10);
      if (dim.empty() || errno != 0 || *end != '\0' || v < 0)
        return invalid_argument(where + "shape dimensions must be non-negative ints, found `" +
                                dim + "` in `[" + dims + "]`");
      f.shape.push_back(v);
      if (comma == std::string::npos)
        break;
      pos = comma + 1;
    }
    after = trim(after.substr(close + 1));
  }
  if (!after.empty()) {
    if (after[0] != '=')
      return invalid_argument(where + "expected `= DEFAULT` or the end of the feature, found `" +
                              after + "`");
    const std::string literal = trim(after.substr(1));
    auto value = text::parse_text_value(literal);
    if (!value.ok())
      return value.status().with_context(where + "default_value `" + literal + "`");
    auto tensor = text::tensor_from_value(*value);
    if (!tensor.ok())
      return tensor.status().with_context(where + "default_value `" + literal + "`");
    f.default_value = std::move(*tensor);
  }
  return f;
}

// --- reading Examples

template <class T, class Repeated>
Tensor numeric_tensor(DType dtype, Shape shape, const Repeated& values) {
  Tensor t(dtype, std::move(shape));
  if (!values.empty())
    std::memcpy(t.mutable_bytes().data(), values.data(),
                static_cast<std::size_t>(values.size()) * sizeof(T));
  return t;
}

// The values of `feature` as a tensor of `shape`, when it holds the list of f.dtype.
Tensor values_tensor(const FeatureConfig& f, const tf::Feature& feature, Shape shape) {
  switch (f.dtype) {
    case DType::int64:
      return numeric_tensor<int64_t>(DType::int64, std::move(shape), feature.int64_list().value());
    case DType::float32:
      return numeric_tensor<float>(DType::float32, std::move(shape), feature.float_list().value());
    default: {
      Tensor t(DType::string, std::move(shape));
      const auto& values = feature.bytes_list().value();
      auto& out = t.mutable_strings();
      for (int i = 0; i < values.size(); ++i)
        out[static_cast<std::size_t>(i)] = values.Get(i);
      return t;
    }
  }
}

// Number of values in `feature`, or an error when it holds another list type. A feature with no
// list set counts as an empty list.
Expected<int64_t> count_values(const FeatureConfig& f, const tf::Feature& feature) {
  using K = tf::Feature::KindCase;
  const K want = f.dtype == DType::int64     ? K::kInt64List
                 : f.dtype == DType::float32 ? K::kFloatList
                                             : K::kBytesList;
  const K got = feature.kind_case();
  if (got == K::KIND_NOT_SET)
    return int64_t{0};
  if (got != want) {
    const char* found = got == K::kInt64List   ? "an int64_list"
                        : got == K::kFloatList ? "a float_list"
                                               : "a bytes_list";
    return invalid_argument("parse_example: feature `" + f.name + "` (" + feature_kind(f) +
                            ") expects " + list_name(f.dtype) + ", the record has " + found);
  }
  switch (want) {
    case K::kInt64List: return int64_t{feature.int64_list().value_size()};
    case K::kFloatList: return int64_t{feature.float_list().value_size()};
    default: return int64_t{feature.bytes_list().value_size()};
  }
}

Tensor broadcast_default(const FeatureConfig& f) {
  const Tensor& d = *f.default_value;
  if (d.shape() == f.shape)
    return d;
  const int64_t n = product(f.shape);
  if (f.dtype == DType::string)
    return std::move(
             Tensor::from_values<std::string>(f.shape, std::vector<std::string>(n, d.strings()[0])))
      .value();
  Tensor t(f.dtype, f.shape);
  const std::size_t width = dtype_size(f.dtype);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(t.mutable_bytes().data() + i * width, d.bytes().data(), width);
  return t;
}

} // namespace

// --- FeatureSpec

FeatureSpec& FeatureSpec::fixed(std::string name, DType dtype, Shape shape) {
  FeatureConfig f;
  f.name = std::move(name);
  f.dtype = dtype;
  f.shape = std::move(shape);
  features_.push_back(std::move(f));
  return *this;
}

FeatureSpec& FeatureSpec::fixed(std::string name, DType dtype, Shape shape, Tensor default_value) {
  fixed(std::move(name), dtype, std::move(shape));
  features_.back().default_value = std::move(default_value);
  return *this;
}

FeatureSpec& FeatureSpec::var_len(std::string name, DType dtype) {
  FeatureConfig f;
  f.name = std::move(name);
  f.dtype = dtype;
  f.var_len = true;
  features_.push_back(std::move(f));
  return *this;
}

Expected<FeatureSpec> FeatureSpec::parse(std::string_view text) {
  FeatureSpec spec;
  for (const auto& [offset, part] : split_features(text)) {
    if (trim(part).empty())
      continue; // a trailing `;`, or an empty spec
    auto f = parse_feature(offset, part);
    if (!f.ok())
      return f.status().with_context("parse_example");
    spec.features_.push_back(std::move(*f));
  }
  CONVEYOR_RETURN_IF_ERROR(spec.check());
  return spec;
}

Status FeatureSpec::check() {
  if (features_.empty())
    return invalid_argument("parse_example: the feature spec lists no features");
  std::set<std::string> names;
  for (FeatureConfig& f : features_) {
    const std::string where = "parse_example: feature `" + f.name + "`";
    if (trim(f.name).empty() || trim(f.name) != f.name ||
        f.name.find_first_of(":;") != std::string::npos)
      return invalid_argument(
        where + ": a name must be non-empty, without `:` or `;` and without surrounding spaces");
    if (!names.insert(f.name).second)
      return invalid_argument(where + " is listed twice");
    if (f.dtype != DType::int64 && f.dtype != DType::float32 && f.dtype != DType::string)
      return invalid_argument(where + ": dtype must be int64, float32 or string, got " +
                              dtype_name(f.dtype));
    if (f.var_len) {
      if (!f.shape.empty() || f.default_value)
        return invalid_argument(where + ": a variable-length feature has no shape and no default");
      continue;
    }
    for (int64_t d : f.shape)
      if (d < 0)
        return invalid_argument(where + ": shape " + shape_text(f.shape) +
                                " has a negative dimension");
    if (f.default_value) {
      auto canonical = canonical_default(f, *f.default_value);
      if (!canonical.ok())
        return canonical.status().with_context("parse_example");
      f.default_value = std::move(*canonical);
    }
  }
  return Status::OK();
}

std::string FeatureSpec::to_string() const {
  std::string out;
  for (const FeatureConfig& f : features_) {
    out += (out.empty() ? "" : "; ") + f.name + ": " + feature_kind(f);
    if (f.default_value)
      out += " = " + f.default_value->to_string();
  }
  return out;
}

ElementSpec FeatureSpec::element_spec() const {
  ElementSpec spec;
  std::vector<std::pair<std::string, Structure>> entries;
  bool sorted = true;
  for (const FeatureConfig& f : features_) {
    spec.components.push_back(
      TensorSpec{f.dtype, f.var_len ? PartialShape{kUnknownDim} : PartialShape(f.shape), false});
    sorted = sorted && (entries.empty() || entries.back().first < f.name);
    entries.emplace_back(f.name, Structure::leaf());
  }
  // A dict keyed by feature name, as tf.io.parse_example returns; a dict's leaves come in sorted
  // key order, so a spec listing its features in another order keeps that order as a tuple.
  if (sorted && !entries.empty()) {
    auto dict = Structure::dict(std::move(entries));
    if (dict.ok())
      spec.structure = std::move(*dict);
  }
  return spec;
}

// --- Examples

Expected<Element> parse_example(std::string_view serialized, const FeatureSpec& spec) {
  tf::Example example;
  if (!example.ParseFromArray(serialized.data(), static_cast<int>(serialized.size())))
    return data_loss("parse_example: a record of " + std::to_string(serialized.size()) +
                     " bytes is not a serialized tf.train.Example");
  const auto& map = example.features().feature();
  std::vector<Tensor> out;
  out.reserve(spec.features().size());
  for (const FeatureConfig& f : spec.features()) {
    auto it = map.find(f.name);
    int64_t count = 0;
    if (it != map.end()) {
      auto n = count_values(f, it->second);
      if (!n.ok())
        return n.status();
      count = *n;
    }
    if (f.var_len) {
      out.push_back(count == 0 ? Tensor(f.dtype, Shape{0})
                               : values_tensor(f, it->second, Shape{count}));
      continue;
    }
    if (count == 0 && f.default_value) {
      out.push_back(broadcast_default(f));
      continue;
    }
    if (it == map.end())
      return invalid_argument("parse_example: feature `" + f.name + "` (" + feature_kind(f) +
                              ") is required (it has no default) but the record does not have it");
    const int64_t want = product(f.shape);
    if (count != want)
      return invalid_argument("parse_example: feature `" + f.name + "` (" + feature_kind(f) +
                              ") needs " + std::to_string(want) + " value(s) for shape " +
                              shape_text(f.shape) + ", the record has " + std::to_string(count));
    out.push_back(values_tensor(f, it->second, f.shape));
  }
  return Element{std::move(out)};
}

Expected<std::string>
serialize_example(const std::vector<std::pair<std::string, Tensor>>& features) {
  tf::Example example;
  auto& map = *example.mutable_features()->mutable_feature();
  for (const auto& [name, t] : features) {
    tf::Feature& feature = map[name];
    switch (t.dtype()) {
      case DType::int64: {
        auto* list = feature.mutable_int64_list()->mutable_value();
        list->Resize(static_cast<int>(t.num_elements()), 0);
        if (t.num_elements() > 0)
          std::memcpy(list->mutable_data(), t.bytes().data(), t.bytes().size());
        break;
      }
      case DType::float32: {
        auto* list = feature.mutable_float_list()->mutable_value();
        list->Resize(static_cast<int>(t.num_elements()), 0.0f);
        if (t.num_elements() > 0)
          std::memcpy(list->mutable_data(), t.bytes().data(), t.bytes().size());
        break;
      }
      case DType::string: {
        auto* list = feature.mutable_bytes_list();
        for (const std::string& s : t.strings()) // an empty list still marks the kind
          list->add_value(s);
        break;
      }
      default:
        return invalid_argument(std::string("serialize_example: feature `") + name +
                                "` has dtype " + dtype_name(t.dtype()) +
                                "; tf.train.Example holds int64, float32 or string");
    }
  }
  std::string out;
  if (!example.SerializeToString(&out))
    return internal_error("serialize_example: protobuf could not serialize the example");
  return out;
}

} // namespace conveyor
