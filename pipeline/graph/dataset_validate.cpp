// Dataset::validate: every node against its schema, every argument value against what tf.data
// accepts, and every function reference against the registry — so a bad definition fails when
// it is defined or registered, never halfway through a job.
#include <set>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/functions/file_source_functions.hpp"
#include "pipeline/io/csv.hpp"
#include "pipeline/io/webdataset.hpp"
#include "pipeline/io/files.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/padding.hpp"
#include "pipeline/graph/spec_rules.hpp"

namespace conveyor {

namespace {

// "<op>: `<attr>` must be <expected>, got <value>" — the shape of tf.data's ValueErrors.
Status bad_arg(const Node& n, const char* attr, const std::string& expected, int64_t got) {
  return invalid_argument(n.op + ": `" + attr + "` must be " + expected + ", got " +
                          std::to_string(got));
}

Status check_at_least(const Node& n, const char* attr, int64_t min, const std::string& expected) {
  const int64_t v = n.int_attr(attr);
  return v >= min ? Status::OK() : bad_arg(n, attr, expected, v);
}

// AUTOTUNE (-1) or a value >= min.
Status check_autotune_or_at_least(const Node& n, const char* attr, int64_t min) {
  const int64_t v = n.int_attr(attr);
  if (v == kAutotune || v >= min)
    return Status::OK();
  return bad_arg(n, attr, ">= " + std::to_string(min) + " or AUTOTUNE", v);
}

Status check_function(const Node& n, FunctionKind kind, const FunctionRegistry& functions) {
  const FunctionRef& ref = n.function_attr("fn");
  if (kind == FunctionKind::dataset && is_file_source_function(ref.name))
    return check_file_source_function(n.op, ref);
  return functions.check(ref, kind).with_context(n.op);
}

Status check_compression(const Node& n) {
  auto c = compression_from_name(n.string_attr("compression_type"), n.op + ": `compression_type`");
  return c.ok() ? Status::OK() : c.status();
}

Status check_slices(const Node& n) {
  const Element& e = n.element_attr("element");
  if (e.size() == 0)
    return invalid_argument(n.op + ": `element` needs at least one component, got ()");
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e[i].rank() < 1)
      return invalid_argument(n.op + ": component " + std::to_string(i) +
                              " of `element` must have rank >= 1 to be sliced, got a scalar");
    if (e[i].shape()[0] != e[0].shape()[0])
      return invalid_argument(
        n.op +
        ": all components of `element` must have the same size in dimension 0; "
        "component " +
        std::to_string(i) + " has " + std::to_string(e[i].shape()[0]) + ", component 0 has " +
        std::to_string(e[0].shape()[0]));
  }
  return Status::OK();
}

// from_tensors/from_tensor_slices: `structure` ("" = flat) must nest exactly the components.
Status check_structure(const Node& n) {
  const std::string& text = n.string_attr("structure");
  if (text.empty())
    return Status::OK();
  auto structure = Structure::parse(text);
  if (!structure.ok())
    return structure.status().with_context(n.op + ": `structure`");
  const std::size_t components = n.element_attr("element").size();
  if (structure->flat_size() != components)
    return invalid_argument(n.op + ": `structure` " + text + " has " +
                            std::to_string(structure->flat_size()) + " leaves, `element` has " +
                            std::to_string(components) + " component(s)");
  return Status::OK();
}

Status check_files(const Node& n) {
  const auto& files = n.strings_attr("files");
  for (std::size_t i = 0; i < files.size(); ++i)
    if (files[i].empty())
      return invalid_argument(n.op + ": `files` entry " + std::to_string(i) +
                              " must be a file name, got \"\"");
  return Status::OK();
}

Status check_shard(const Node& n) {
  const int64_t num_shards = n.int_attr("num_shards");
  const int64_t index = n.int_attr("index");
  if (num_shards != kShardHint && num_shards <= 0)
    return bad_arg(n, "num_shards", "> 0 or SHARD_HINT", num_shards);
  if (index == kShardHint)
    return Status::OK();
  if (index < 0 || (num_shards != kShardHint && index >= num_shards))
    return bad_arg(n, "index",
                   num_shards == kShardHint
                     ? std::string{">= 0 or SHARD_HINT"}
                     : "in [0, " + std::to_string(num_shards) + ") or SHARD_HINT",
                   index);
  return Status::OK();
}

// The per-op value checks; the node already matches its schema.
Status check_arguments(const Node& n, const FunctionRegistry& functions) {
  const std::string& op = n.op;
  if (op == "range") {
    if (n.int_attr("step") == 0)
      return bad_arg(n, "step", "non-zero", 0);
  } else if (op == "from_tensors") {
    // Zero components would read as an unknown ElementSpec (see dataset_spec.cpp).
    if (n.element_attr("element").size() == 0)
      return invalid_argument("from_tensors: `element` needs at least one component, got ()");
    return check_structure(n);
  } else if (op == "from_tensor_slices") {
    CONVEYOR_RETURN_IF_ERROR(check_slices(n));
    return check_structure(n);
  } else if (op == "list_files") {
    if (n.string_attr("pattern").empty())
      return invalid_argument("list_files: `pattern` must be a file glob, got \"\"");
  } else if (op == "text_lines" || op == "tfrecord") {
    CONVEYOR_RETURN_IF_ERROR(check_files(n));
    return check_compression(n);
  } else if (op == "load") {
    if (n.string_attr("path").empty())
      return invalid_argument("load: `path` must be a snapshot directory, got \"\"");
    if (n.int_attr("num_shards") < 1 || n.int_attr("shard_index") < 0 ||
        n.int_attr("shard_index") >= n.int_attr("num_shards"))
      return invalid_argument("load: `shard_index` must be in [0, num_shards), got " +
                              std::to_string(n.int_attr("shard_index")) + " of " +
                              std::to_string(n.int_attr("num_shards")));
    return snapshot::parse_spec_components(n.string_attr("element_spec")).status();
  } else if (op == "webdataset") {
    CONVEYOR_RETURN_IF_ERROR(check_files(n));
    CONVEYOR_RETURN_IF_ERROR(check_compression(n));
    return webdataset_structure(n.strings_attr("keys")).status();
  } else if (op == "csv") {
    CONVEYOR_RETURN_IF_ERROR(check_files(n));
    CONVEYOR_RETURN_IF_ERROR(check_compression(n));
    auto delim = csv_delimiter(n.string_attr("field_delim"));
    if (!delim.ok())
      return delim.status();
    auto columns = csv_columns(n.strings_attr("column_types"),
                               std::get<std::vector<int64_t>>(n.attrs.at("select_cols")),
                               n.element_attr("record_defaults"));
    return columns.ok() ? Status::OK() : columns.status();
  } else if (op == "source") {
    return check_function(n, FunctionKind::source, functions);
  } else if (op == "map") {
    CONVEYOR_RETURN_IF_ERROR(check_function(n, FunctionKind::map, functions));
    return check_autotune_or_at_least(n, "num_parallel_calls", 1);
  } else if (op == "filter") {
    return check_function(n, FunctionKind::predicate, functions);
  } else if (op == "flat_map") {
    return check_function(n, FunctionKind::dataset, functions);
  } else if (op == "interleave") {
    CONVEYOR_RETURN_IF_ERROR(check_function(n, FunctionKind::dataset, functions));
    CONVEYOR_RETURN_IF_ERROR(check_autotune_or_at_least(n, "cycle_length", 1));
    return check_at_least(n, "block_length", 1, "> 0");
  } else if (op == "batch") {
    return check_at_least(n, "batch_size", 1, "> 0");
  } else if (op == "padded_batch") {
    CONVEYOR_RETURN_IF_ERROR(check_at_least(n, "batch_size", 1, "> 0"));
    auto config = padding_config(n);
    return config.ok() ? Status::OK() : config.status();
  } else if (op == "parse_example") {
    auto spec = FeatureSpec::parse(n.string_attr("features"));
    return spec.ok() ? Status::OK() : spec.status();
  } else if (op == "shuffle") {
    return check_at_least(n, "buffer_size", 1, "> 0");
  } else if (op == "repeat" || op == "take" || op == "skip") {
    return check_at_least(n, "count", -1, ">= -1 (-1 means all)");
  } else if (op == "shard") {
    return check_shard(n);
  } else if (op == "prefetch") {
    return check_autotune_or_at_least(n, "buffer_size", 0);
  } else if (op == "concatenate") {
    // tf.data checks the two specs when the dataset is built; here it is when it is validated.
    auto a = Dataset{n.inputs[0]}.element_spec(&functions);
    if (!a.ok())
      return a.status();
    auto b = Dataset{n.inputs[1]}.element_spec(&functions);
    if (!b.ok())
      return b.status();
    auto spec = concatenate_spec(*a, *b);
    return spec.ok() ? Status::OK() : spec.status().with_context("concatenate");
  }
  return Status::OK();
}

} // namespace

Status Dataset::validate(const FunctionRegistry* functions) const {
  const FunctionRegistry& registry = functions != nullptr ? *functions : FunctionRegistry::global();
  if (!node_)
    return invalid_argument("dataset has no graph (null node)");
  // Iterative walk with a visited set: deep pipelines cannot overflow the stack, and a node
  // shared by several inputs (zip(d, d)) is checked once.
  std::vector<const Node*> pending{node_.get()};
  std::set<const Node*> seen;
  while (!pending.empty()) {
    const Node* n = pending.back();
    pending.pop_back();
    if (!seen.insert(n).second)
      continue;
    CONVEYOR_RETURN_IF_ERROR(check_node_schema(*n));
    CONVEYOR_RETURN_IF_ERROR(check_arguments(*n, registry));
    for (const NodePtr& in : n->inputs)
      pending.push_back(in.get());
  }
  return Status::OK();
}

} // namespace conveyor
