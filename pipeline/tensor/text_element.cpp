// Element literals, function references and numbers read out of the text form's syntax tree.
// The literal rules (which dtype a bare literal gets, how casts and shape= work) are described
// in tensor_format.cpp, which prints them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>
#include <optional>
#include <string>

#include "pipeline/graph/serialize_checks.hpp"
#include "pipeline/graph/text_value.hpp"

namespace conveyor::text {

namespace {

using Kind = TextValue::Kind;

// `complex(re, im)`: one entry of a complex literal.
bool is_complex_leaf(const TextValue& v) { return v.kind == Kind::call && v.text == "complex"; }

bool is_leaf(const TextValue& v) {
  return v.kind == Kind::integer || v.kind == Kind::floating || v.kind == Kind::boolean ||
         v.kind == Kind::string || is_complex_leaf(v);
}

template <class F>
Expected<F> parse_floating(const TextValue& v, const char* dtype) {
  std::string_view s = v.text;
  bool negative = !s.empty() && s.front() == '-';
  std::string_view body = negative ? s.substr(1) : s;
  F value;
  if (body == "inf") {
    value = std::numeric_limits<F>::infinity();
  } else if (body == "nan") {
    value = std::numeric_limits<F>::quiet_NaN();
  } else {
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
    if (ec == std::errc::result_out_of_range)
      return syntax_error(v.column, "float literal `" + v.text + "` is out of range for " + dtype);
    if (ec != std::errc{} || end != body.data() + body.size())
      return syntax_error(v.column, "malformed number `" + v.text + "`");
  }
  return negative ? -value : value;
}

// An int literal into an integer dtype of any width and signedness, refusing what does not fit.
template <class I>
Status fill_integer(Tensor& t, int64_t i, const TextValue& leaf) {
  const char* b = leaf.text.data();
  const char* e = b + leaf.text.size();
  I value = 0;
  auto [end, ec] = std::from_chars(b, e, value);
  if (ec == std::errc::result_out_of_range ||
      (ec != std::errc{} && std::is_unsigned_v<I> && !leaf.text.empty() && leaf.text[0] == '-'))
    return syntax_error(leaf.column,
                        "int literal `" + leaf.text + "` does not fit in " + dtype_name(t.dtype()));
  if (ec != std::errc{} || end != e)
    return syntax_error(leaf.column, "malformed int `" + leaf.text + "`");
  t.mutable_data<I>()[i] = value;
  return Status::OK();
}

// A float literal rounded to a half float, refusing finite values beyond its range.
template <class H>
Status fill_half(Tensor& t, int64_t i, const TextValue& leaf) {
  auto v = parse_floating<float>(leaf, dtype_name(t.dtype()));
  if (!v.ok())
    return v.status();
  const H h = H::from_float(*v);
  if (std::isfinite(*v) && std::isinf(h.to_float()))
    return syntax_error(leaf.column, "float literal `" + leaf.text + "` is out of range for " +
                                       dtype_name(t.dtype()));
  std::memcpy(t.mutable_data<unsigned char>() + static_cast<std::size_t>(i) * sizeof(H), &h,
              sizeof(H));
  return Status::OK();
}

// A complex entry: complex(re, im) with numbers for both, or a plain number (imaginary part 0).
template <class F>
Status fill_complex(Tensor& t, int64_t i, const TextValue& leaf) {
  F parts[2] = {0, 0};
  if (is_complex_leaf(leaf)) {
    if (leaf.args.size() != 2 || !leaf.args[0].keyword.empty() || !leaf.args[1].keyword.empty())
      return syntax_error(leaf.column, "`complex(...)` takes two numbers, the real and the "
                                       "imaginary part, as in complex(1.0, -2.0)");
    for (int k = 0; k < 2; ++k) {
      const TextValue& p = leaf.args[static_cast<std::size_t>(k)].value;
      if (p.kind != Kind::integer && p.kind != Kind::floating)
        return syntax_error(p.column, "`complex(...)` takes two numbers, found " + describe(p));
      auto v = parse_floating<F>(p, dtype_name(t.dtype()));
      if (!v.ok())
        return v.status();
      parts[k] = *v;
    }
  } else {
    auto v = parse_floating<F>(leaf, dtype_name(t.dtype()));
    if (!v.ok())
      return v.status();
    parts[0] = *v;
  }
  const std::complex<F> c{parts[0], parts[1]};
  std::memcpy(t.mutable_data<unsigned char>() + static_cast<std::size_t>(i) * sizeof c, &c,
              sizeof c);
  return Status::OK();
}

Status fill_entry(Tensor& t, int64_t i, const TextValue& leaf) {
  switch (t.dtype()) {
    case DType::boolean:
      t.mutable_bytes()[static_cast<std::size_t>(i)] = leaf.boolean ? 1 : 0;
      return Status::OK();
    case DType::string:
      t.mutable_strings()[static_cast<std::size_t>(i)] = leaf.text;
      return Status::OK();
    case DType::int8: return fill_integer<int8_t>(t, i, leaf);
    case DType::int16: return fill_integer<int16_t>(t, i, leaf);
    case DType::int32: return fill_integer<int32_t>(t, i, leaf);
    case DType::int64: return fill_integer<int64_t>(t, i, leaf);
    case DType::uint8: return fill_integer<uint8_t>(t, i, leaf);
    case DType::uint16: return fill_integer<uint16_t>(t, i, leaf);
    case DType::uint32: return fill_integer<uint32_t>(t, i, leaf);
    case DType::uint64: return fill_integer<uint64_t>(t, i, leaf);
    case DType::float16: return fill_half<float16>(t, i, leaf);
    case DType::bfloat16: return fill_half<bfloat16>(t, i, leaf);
    case DType::float32: {
      auto v = parse_floating<float>(leaf, "float32");
      if (!v.ok())
        return v.status();
      t.mutable_data<float>()[i] = *v;
      return Status::OK();
    }
    case DType::float64: {
      auto v = parse_floating<double>(leaf, "float64");
      if (!v.ok())
        return v.status();
      t.mutable_data<double>()[i] = *v;
      return Status::OK();
    }
    case DType::complex64: return fill_complex<float>(t, i, leaf);
    case DType::complex128: return fill_complex<double>(t, i, leaf);
  }
  return internal_error("unknown dtype");
}

// Which leaf kinds a dtype accepts (ints widen to floats, as in tf.constant).
bool accepts(DType dtype, const TextValue& leaf) {
  const Kind k = leaf.kind;
  if (dtype == DType::boolean)
    return k == Kind::boolean;
  if (dtype == DType::string)
    return k == Kind::string;
  if (dtype_is_integer(dtype))
    return k == Kind::integer;
  if (dtype_is_complex(dtype))
    return k == Kind::integer || k == Kind::floating || is_complex_leaf(leaf);
  return k == Kind::integer || k == Kind::floating;
}

const char* leaf_kind_name(Kind k) {
  switch (k) {
    case Kind::boolean: return "a bool";
    case Kind::string: return "a string";
    case Kind::integer: return "an int";
    case Kind::call: return "a complex";
    default: return "a float";
  }
}

// Checks that `v` is a rectangular nest of lists of the given shape and collects its leaves in
// row-major order.
Status collect_leaves(const TextValue& v, std::size_t dim, const Shape& shape,
                      std::vector<const TextValue*>& leaves) {
  if (dim < shape.size()) {
    if (v.kind != Kind::list)
      return syntax_error(
        v.column, "ragged list: expected a list of " + std::to_string(shape[dim]) +
                    " entries here, like the first one at this depth, found " + describe(v));
    if (static_cast<int64_t>(v.items.size()) != shape[dim])
      return syntax_error(
        v.column, "ragged list: this list has length " + std::to_string(v.items.size()) +
                    ", the first one at this depth has length " + std::to_string(shape[dim]));
    for (const auto& item : v.items)
      CONVEYOR_RETURN_IF_ERROR(collect_leaves(item, dim + 1, shape, leaves));
    return Status::OK();
  }
  if (v.kind == Kind::list)
    return syntax_error(
      v.column,
      "ragged list: expected a scalar here, like the first entry at this depth, found a list");
  if (v.kind == Kind::call && dtype_from_name(v.text))
    return syntax_error(v.column,
                        "a dtype cast must wrap the whole tensor literal, as in int32([1, 2])");
  if (!is_leaf(v))
    return syntax_error(v.column, "expected a number, bool or string in a tensor literal, found " +
                                    describe(v));
  leaves.push_back(&v);
  return Status::OK();
}

// The dtype a literal without a cast gets: string, bool, complex128 if any entry is a complex,
// float32 if any entry is a float, else int64.
Expected<DType> infer_dtype(const std::vector<const TextValue*>& leaves) {
  if (leaves.empty())
    return DType::float32; // like tf.constant([])
  Kind first = leaves.front()->kind;
  bool any_float = false;
  bool any_complex = false;
  for (const TextValue* leaf : leaves) {
    bool numeric = leaf->kind == Kind::integer || leaf->kind == Kind::floating ||
                   leaf->kind == Kind::call; // complex(re, im), the only call that is a leaf
    bool first_numeric = first == Kind::integer || first == Kind::floating || first == Kind::call;
    if (leaf->kind != first && !(numeric && first_numeric))
      return syntax_error(
        leaf->column,
        std::string{"a tensor literal needs entries of one kind: the first entry is "} +
          leaf_kind_name(first) + ", this one is " + leaf_kind_name(leaf->kind));
    any_float = any_float || leaf->kind == Kind::floating;
    any_complex = any_complex || leaf->kind == Kind::call;
  }
  if (any_complex)
    return DType::complex128; // like tf.constant(1 + 2j): Python's complex is double
  if (first == Kind::string)
    return DType::string;
  if (first == Kind::boolean)
    return DType::boolean;
  return any_float ? DType::float32 : DType::int64;
}

// The `shape=[...]` of a cast.
Expected<Shape> shape_from_value(const TextValue& v) {
  if (v.kind != Kind::list)
    return syntax_error(v.column,
                        "`shape` expects a list of non-negative ints, found " + describe(v));
  Shape shape;
  for (const auto& item : v.items) {
    if (item.kind != Kind::integer)
      return syntax_error(item.column,
                          "`shape` expects a list of non-negative ints, found " + describe(item));
    auto d = int64_from_value(item);
    if (!d.ok())
      return d.status();
    if (*d < 0)
      return syntax_error(item.column,
                          "`shape` dimensions must be non-negative, found " + item.text);
    shape.push_back(*d);
  }
  return shape;
}

} // namespace

Expected<int64_t> int64_from_value(const TextValue& v) {
  int64_t value = 0;
  const char* b = v.text.data();
  const char* e = b + v.text.size();
  auto [end, ec] = std::from_chars(b, e, value);
  if (ec == std::errc::result_out_of_range)
    return syntax_error(v.column, "int literal `" + v.text + "` does not fit in int64");
  if (ec != std::errc{} || end != e)
    return syntax_error(v.column, "malformed int `" + v.text + "`");
  return value;
}

Expected<double> double_from_value(const TextValue& v) {
  return parse_floating<double>(v, "float64");
}

Expected<Tensor> tensor_from_value(const TextValue& v) {
  const TextValue* body = &v;
  std::optional<DType> cast;
  std::optional<Shape> reshape;
  if (v.kind == Kind::call && dtype_from_name(v.text)) {
    cast = dtype_from_name(v.text);
    body = nullptr;
    for (const auto& arg : v.args) {
      if (arg.keyword.empty()) {
        if (body != nullptr)
          return syntax_error(arg.value.column,
                              "`" + v.text + "(...)` takes one tensor literal, found a second one");
        body = &arg.value;
      } else if (arg.keyword == "shape") {
        if (reshape)
          return syntax_error(arg.keyword_column,
                              "`shape` of `" + v.text + "(...)` is given twice");
        auto s = shape_from_value(arg.value);
        if (!s.ok())
          return s.status();
        reshape = std::move(*s);
      } else {
        return syntax_error(arg.keyword_column,
                            "`" + v.text + "(...)` has no argument `" + arg.keyword +
                              "` (it takes a tensor literal and an optional shape=[...])");
      }
    }
    if (body == nullptr)
      return syntax_error(v.column, "`" + v.text + "(...)` needs a tensor literal, as in " +
                                      v.text + "([1, 2])");
  }

  Shape shape;
  for (const TextValue* p = body; p->kind == Kind::list; p = &p->items.front()) {
    shape.push_back(static_cast<int64_t>(p->items.size()));
    if (p->items.empty())
      break;
  }
  std::vector<const TextValue*> leaves;
  CONVEYOR_RETURN_IF_ERROR(collect_leaves(*body, 0, shape, leaves));

  DType dtype;
  if (cast) {
    dtype = *cast;
    for (const TextValue* leaf : leaves)
      if (!accepts(dtype, *leaf))
        return syntax_error(leaf->column, "`" + v.text + "(...)` cannot hold " + describe(*leaf));
  } else {
    auto inferred = infer_dtype(leaves);
    if (!inferred.ok())
      return inferred.status();
    dtype = *inferred;
  }

  if (reshape) {
    auto n = serial::entries_within(*reshape, static_cast<int64_t>(leaves.size()));
    if (!n || *n != static_cast<int64_t>(leaves.size()))
      return syntax_error(v.column, "the shape given to `" + v.text +
                                      "(...)` does not hold the literal's " +
                                      std::to_string(leaves.size()) + " entries");
    shape = std::move(*reshape);
  }

  Tensor t{dtype, shape};
  for (std::size_t i = 0; i < leaves.size(); ++i)
    CONVEYOR_RETURN_IF_ERROR(fill_entry(t, static_cast<int64_t>(i), *leaves[i]));
  return t;
}

Expected<Element> element_from_value(const TextValue& v) {
  if (v.kind != Kind::tuple) {
    auto t = tensor_from_value(v);
    if (!t.ok())
      return t.status();
    return Element{std::move(*t)};
  }
  Element e;
  for (const auto& item : v.items) {
    if (item.kind == Kind::tuple)
      return syntax_error(
        item.column, "tuples cannot be nested: each component of an element is one tensor literal");
    auto t = tensor_from_value(item);
    if (!t.ok())
      return t.status();
    e.components.push_back(std::move(*t));
  }
  return e;
}

namespace {

// Appends the leaves of `v` to `out` and returns its structure; `path` names `v` in errors
// (`["image"][1]`).
Expected<Structure> collect_nested(const TextValue& v, const std::string& path, int depth,
                                   Element& out) {
  if (depth > kMaxNesting)
    return syntax_error(v.column,
                        "element nested deeper than " + std::to_string(kMaxNesting) + " levels");
  if (v.kind == Kind::tuple) {
    std::vector<Structure> items;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      auto item = collect_nested(v.items[i], path + "[" + std::to_string(i) + "]", depth + 1, out);
      if (!item.ok())
        return item;
      items.push_back(std::move(*item));
    }
    return Structure::tuple(std::move(items));
  }
  if (v.kind == Kind::dict) {
    // tf.nest flattens a dict in sorted key order: collect each value on its own, then append
    // their leaves in that order.
    std::vector<std::pair<std::string, std::pair<Structure, Element>>> entries;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      Element leaves;
      auto item = collect_nested(v.items[i], path + "[" + quote_structure_key(v.keys[i]) + "]",
                                 depth + 1, leaves);
      if (!item.ok())
        return item;
      entries.push_back({v.keys[i], {std::move(*item), std::move(leaves)}});
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<std::string, Structure>> structure;
    for (auto& [key, entry] : entries) {
      structure.emplace_back(key, std::move(entry.first));
      for (Tensor& t : entry.second.components)
        out.components.push_back(std::move(t));
    }
    auto dict = Structure::dict(std::move(structure));
    if (!dict.ok())
      return syntax_error(v.column, "element" + path + ": " + dict.status().message());
    return dict;
  }
  auto t = tensor_from_value(v);
  if (!t.ok()) {
    if (path.empty())
      return t.status();
    return Status{t.status().code(), "element" + path + ": " + t.status().message()};
  }
  out.components.push_back(std::move(*t));
  return Structure::leaf();
}

} // namespace

Expected<NestedElement> nested_element_from_value(const TextValue& v) {
  NestedElement out;
  auto structure = collect_nested(v, "", 0, out.element);
  if (!structure.ok())
    return structure.status();
  out.structure = std::move(*structure);
  return out;
}

Expected<FunctionRef> function_from_value(const TextValue& v) {
  if (v.kind == Kind::identifier)
    return FunctionRef{v.text};
  if (v.kind != Kind::call)
    return syntax_error(v.column,
                        "expected a function such as `square` or `scale(factor=2.5)`, found " +
                          describe(v));
  FunctionRef ref{v.text};
  for (const auto& arg : v.args) {
    if (arg.keyword.empty())
      return syntax_error(arg.value.column,
                          "parameters of `" + v.text + "` must be given as name=value");
    if (ref.params.count(arg.keyword) != 0)
      return syntax_error(arg.keyword_column,
                          "parameter `" + arg.keyword + "` of `" + v.text + "` is given twice");
    const TextValue& p = arg.value;
    switch (p.kind) {
      case Kind::integer: {
        auto i = int64_from_value(p);
        if (!i.ok())
          return i.status();
        ref.params[arg.keyword] = *i;
        break;
      }
      case Kind::floating: {
        auto d = double_from_value(p);
        if (!d.ok())
          return d.status();
        ref.params[arg.keyword] = *d;
        break;
      }
      case Kind::boolean: ref.params[arg.keyword] = p.boolean; break;
      case Kind::string: ref.params[arg.keyword] = p.text; break;
      default:
        return syntax_error(p.column, "parameter `" + arg.keyword + "` of `" + v.text +
                                        "` must be an int, float, bool or string, found " +
                                        describe(p));
    }
  }
  return ref;
}

} // namespace conveyor::text
