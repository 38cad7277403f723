// Dataset::element_spec: the dtypes and partial shapes of a dataset's elements, op by op.
//
// Unknown specs: an ElementSpec with no components means "unknown" (as FunctionDef::source_spec
// does). It is what flat_map/interleave report when their function declares no output_spec, and
// what a source reports when its function declares no source_spec; it propagates through the ops
// above (validate() rejects zero-component elements, so the two never clash). A map
// function without output_spec keeps its input's component count and dtypes but reports unknown
// rank for every component, as functions.hpp promises.
#include "pipeline/graph/dataset.hpp"
#include "pipeline/io/csv.hpp"
#include "pipeline/io/webdataset.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/functions/file_source_functions.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/padding.hpp"
#include "pipeline/graph/spec_rules.hpp"

namespace conveyor {

namespace {

TensorSpec scalar(DType d) { return TensorSpec{d, {}, false}; }

bool is_unknown(const ElementSpec& s) { return s.components.empty(); }

Expected<ElementSpec> drop_leading_dim(const ElementSpec& in, const std::string& op);

// Sets `structure` on `spec`, kept as nullopt when it is the flat default (so that specs compare
// and print as they always have).
ElementSpec with_structure(ElementSpec spec, Structure structure) {
  if (structure.is_flat() && structure.flat_size() == spec.components.size())
    spec.structure.reset();
  else
    spec.structure = std::move(structure);
  return spec;
}

// from_tensors / from_tensor_slices: the element's spec nested by the `structure` attribute.
Expected<ElementSpec> literal_spec(const Node& n) {
  ElementSpec spec = spec_of(n.element_attr("element"));
  const std::string& text = n.string_attr("structure");
  if (!text.empty()) {
    auto structure = Structure::parse(text);
    if (!structure.ok())
      return structure.status().with_context(n.op + ": `structure`");
    spec = with_structure(std::move(spec), std::move(*structure));
  }
  if (n.op == "from_tensor_slices")
    return drop_leading_dim(spec, n.op);
  return spec;
}

// The spec of one row of a batch: dimension 0 dropped.
Expected<ElementSpec> drop_leading_dim(const ElementSpec& in, const std::string& op) {
  ElementSpec out = in;
  for (std::size_t i = 0; i < out.components.size(); ++i) {
    TensorSpec& c = out.components[i];
    if (c.unknown_rank)
      continue;
    if (c.shape.empty())
      return invalid_argument(op + ": component " + std::to_string(i) +
                              " is a scalar; it needs rank >= 1 to be split along dimension 0");
    c.shape.erase(c.shape.begin());
  }
  return out;
}

ElementSpec prepend_dim(const ElementSpec& in, int64_t dim) {
  ElementSpec out = in;
  for (TensorSpec& c : out.components)
    if (!c.unknown_rank)
      c.shape.insert(c.shape.begin(), dim);
  return out;
}

// map, flat_map and interleave: the function's declared output spec.
Expected<ElementSpec> function_spec(const Node& n, const ElementSpec& input,
                                    const FunctionRegistry& functions) {
  const FunctionRef& ref = n.function_attr("fn");
  if (n.op != "map" && is_file_source_function(ref.name)) // lines or records: string scalars
    return ElementSpec{{scalar(DType::string)}};
  const FunctionDef* def = functions.find(ref.name);
  if (def == nullptr)
    return not_found(n.op + ": unknown function `" + ref.name + "`");
  if (def->output_spec) {
    auto spec = def->output_spec(input, functions.resolve_params(ref));
    if (!spec.ok())
      return spec.status().with_context(n.op + "(" + ref.name + ")");
    return spec;
  }
  if (n.op != "map")
    return ElementSpec{}; // unknown: nothing says what the returned datasets hold
  ElementSpec out = input;
  out.structure.reset(); // a function that declares no output spec returns a flat tuple
  for (TensorSpec& c : out.components) {
    c.unknown_rank = true;
    c.shape.clear();
  }
  return out;
}

// padded_batch: the padded shapes (-1 = None), or every input dimension None; then the batch dim.
Expected<ElementSpec> padded_batch_spec(const Node& n, const ElementSpec& input) {
  auto config = padding_config(n);
  if (!config.ok())
    return config.status();
  ElementSpec out = input;
  if (!config->shapes.empty() && config->shapes.size() != input.components.size())
    return invalid_argument(
      "padded_batch: `padded_shapes` has " + std::to_string(config->shapes.size()) +
      " component(s), the input's elements have " + std::to_string(input.components.size()));
  if (!config->values.empty() && config->values.size() != input.components.size())
    return invalid_argument(
      "padded_batch: `padding_values` has " + std::to_string(config->values.size()) +
      " component(s), the input's elements have " + std::to_string(input.components.size()));
  for (std::size_t c = 0; c < out.components.size(); ++c) {
    TensorSpec& spec = out.components[c];
    if (!config->values.empty() &&
        (config->values[c].dtype() == DType::string) != (spec.dtype == DType::string))
      return invalid_argument("padded_batch: component " + std::to_string(c) + " of dtype " +
                              dtype_name(spec.dtype) + " cannot be padded with a " +
                              dtype_name(config->values[c].dtype()) + " value");
    if (config->shapes.empty()) {
      for (int64_t& d : spec.shape)
        d = kUnknownDim;
      continue;
    }
    const PartialShape& padded = config->shapes[c];
    if (!spec.unknown_rank && spec.shape.size() != padded.size())
      return invalid_argument("padded_batch: component " + std::to_string(c) + " has rank " +
                              std::to_string(spec.shape.size()) +
                              " but its padded shape has rank " + std::to_string(padded.size()));
    for (std::size_t d = 0; d < padded.size() && !spec.unknown_rank; ++d)
      if (padded[d] != kUnknownDim && spec.shape[d] != kUnknownDim && spec.shape[d] > padded[d])
        return invalid_argument("padded_batch: component " + std::to_string(c) + " dimension " +
                                std::to_string(d) + " is " + std::to_string(spec.shape[d]) +
                                ", larger than its padded size " + std::to_string(padded[d]));
    spec.shape = padded;
    spec.unknown_rank = false;
  }
  return prepend_dim(out, n.bool_attr("drop_remainder") ? n.int_attr("batch_size") : kUnknownDim);
}

Expected<ElementSpec> node_spec(const Node& n, const FunctionRegistry& functions) {
  const std::string& op = n.op;
  if (op == "range")
    return ElementSpec{{scalar(DType::int64)}};
  if (op == "from_tensors" || op == "from_tensor_slices")
    return literal_spec(n);
  if (op == "list_files" || op == "text_lines" || op == "tfrecord")
    return ElementSpec{{scalar(DType::string)}};
  if (op == "load") // the spec the snapshot recorded, when the builder could read it
    return snapshot::parse_spec_components(n.string_attr("element_spec"));
  if (op == "csv") {
    ElementSpec spec;
    for (const std::string& type : n.strings_attr("column_types")) {
      auto dtype = csv_column_type(type, "csv: `column_types` entry");
      if (!dtype.ok())
        return dtype.status();
      spec.components.push_back(scalar(*dtype));
    }
    return spec;
  }
  if (op == "random")
    return ElementSpec{{scalar(DType::int64)}};
  if (op == "webdataset") {
    auto structure = webdataset_structure(n.strings_attr("keys"));
    if (!structure.ok())
      return structure.status();
    ElementSpec spec;
    spec.components.assign(structure->flat_size(), scalar(DType::string));
    return with_structure(std::move(spec), std::move(*structure));
  }
  if (op == "source") {
    const FunctionDef* def = functions.find(n.function_attr("fn").name);
    if (def == nullptr)
      return not_found("source: unknown function `" + n.function_attr("fn").name + "`");
    return def->source_spec;
  }

  std::vector<ElementSpec> inputs;
  for (const NodePtr& in : n.inputs) {
    auto spec = node_spec(*in, functions);
    if (!spec.ok())
      return spec.status();
    inputs.push_back(std::move(spec).value());
  }
  if (op == "zip") { // as tf.data: a tuple of the inputs' elements, each keeping its structure
    ElementSpec out;
    std::vector<Structure> items;
    for (const ElementSpec& s : inputs) {
      if (is_unknown(s))
        return ElementSpec{};
      out.components.insert(out.components.end(), s.components.begin(), s.components.end());
      items.push_back(s.structure_or_flat());
    }
    return with_structure(std::move(out), Structure::tuple(std::move(items)));
  }
  if (op == "concatenate")
    return concatenate_spec(inputs.at(0), inputs.at(1));
  const ElementSpec& input = inputs.at(0);
  if (op == "filter" || op == "shuffle" || op == "repeat" || op == "take" || op == "skip" ||
      op == "shard" || op == "prefetch" || op == "cache" || op == "ignore_errors")
    return input;
  if (op == "parse_example") {
    auto spec = FeatureSpec::parse(n.string_attr("features"));
    if (!spec.ok())
      return spec.status();
    return spec->element_spec();
  }
  if (op == "map" || op == "flat_map" || op == "interleave")
    return function_spec(n, input, functions);
  if (is_unknown(input))
    return input;
  if (op == "batch")
    return prepend_dim(input,
                       n.bool_attr("drop_remainder") ? n.int_attr("batch_size") : kUnknownDim);
  if (op == "unbatch")
    return drop_leading_dim(input, op);
  if (op == "padded_batch")
    return padded_batch_spec(n, input);
  if (op == "enumerate") { // (index, element), the element keeping its structure
    ElementSpec out = input;
    out.components.insert(out.components.begin(), scalar(DType::int64));
    return with_structure(std::move(out),
                          Structure::tuple({Structure::leaf(), input.structure_or_flat()}));
  }
  return unimplemented("element_spec: op `" + op + "` has no spec rule");
}

} // namespace

Expected<ElementSpec> concatenate_spec(const ElementSpec& a, const ElementSpec& b) {
  if (is_unknown(a) || is_unknown(b))
    return ElementSpec{};
  auto incompatible = [&] {
    return invalid_argument("Incompatible dataset elements:\n  " + a.to_string() + " vs.   " +
                            b.to_string());
  };
  if (a.components.size() != b.components.size())
    return incompatible();
  ElementSpec out = a;
  for (std::size_t i = 0; i < out.components.size(); ++i) {
    TensorSpec& c = out.components[i];
    const TensorSpec& other = b.components[i];
    if (c.dtype != other.dtype)
      return incompatible();
    if (c.unknown_rank || other.unknown_rank || c.shape.size() != other.shape.size()) {
      c.shape.clear();
      c.unknown_rank = true;
      continue;
    }
    for (std::size_t d = 0; d < c.shape.size(); ++d)
      if (c.shape[d] != other.shape[d])
        c.shape[d] = kUnknownDim;
  }
  return out;
}

Expected<ElementSpec> Dataset::element_spec(const FunctionRegistry* functions) const {
  const FunctionRegistry& registry = functions != nullptr ? *functions : FunctionRegistry::global();
  // A valid graph guarantees every attribute and input the rules below read.
  CONVEYOR_RETURN_IF_ERROR(validate(&registry));
  return node_spec(*node_, registry);
}

} // namespace conveyor
