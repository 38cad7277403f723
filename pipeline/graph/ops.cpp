#include "pipeline/graph/ops.hpp"

#include <algorithm>

namespace conveyor {

namespace {

AttrSpec req(std::string name, AttrKind kind) { return {std::move(name), kind, std::nullopt}; }
AttrSpec opt(std::string name, AttrKind kind, AttrValue def) {
  return {std::move(name), kind, std::move(def)};
}

std::vector<OpSchema> make_schemas() {
  using K = AttrKind;
  return {
    // --- sources
    // Text form: range(stop), range(start, stop) or range(start, stop, step), as in Python.
    {"range",
     0,
     {req("start", K::int64), req("stop", K::int64), opt("step", K::int64, int64_t{1})}},
    // `structure` (Structure's text form, "" = flat) nests the element's flat components; the
    // text form prints both as one nested literal: from_tensors({"a": 1, "b": (2, "x")}).
    {"from_tensors", 0, {req("element", K::element), opt("structure", K::string, std::string{})}},
    {"from_tensor_slices",
     0,
     {req("element", K::element), opt("structure", K::string, std::string{})}},
    // Files matching a glob, sorted by name; shuffled (seeded) unless shuffle=false, as in
    // tf.data.Dataset.list_files.
    {"list_files",
     0,
     {req("pattern", K::string), opt("shuffle", K::boolean, true), opt("seed", K::int64, kNoSeed)}},
    // File sources: each entry of `files` is a file name or a glob pattern (files.hpp); the whole
    // file may be compressed ("", "ZLIB" or "GZIP").
    {"text_lines",
     0,
     {req("files", K::string_list), opt("compression_type", K::string, std::string{})}},
    {"tfrecord",
     0,
     {req("files", K::string_list), opt("compression_type", K::string, std::string{})}},
    // A snapshot's elements (`conveyor save`; kernels/load.cpp): element_spec is the snapshot's
    // (snapshot_files.hpp format; "" = unknown); num_shards/shard_index keep a share of the
    // chunks (FILE sharding sets them).
    {"load",
     0,
     {req("path", K::string), opt("wait", K::boolean, false),
      opt("element_spec", K::string, std::string{}), opt("num_shards", K::int64, int64_t{1}),
      opt("shard_index", K::int64, int64_t{0})}},
    // CSV/TSV files with typed columns, as tf.data's CsvDataset (pipeline/io/csv.hpp): one scalar
    // per column; record_defaults per column a scalar default or [] (required), () = all
    // required; select_cols the file columns to keep (() = all).
    {"csv",
     0,
     {req("files", K::string_list), req("column_types", K::string_list),
      opt("header", K::boolean, false), opt("field_delim", K::string, std::string{","}),
      opt("na_value", K::string, std::string{}),
      opt("select_cols", K::int64_list, std::vector<int64_t>{}),
      opt("record_defaults", K::element, Element{}), opt("use_quote_delim", K::boolean, true),
      opt("compression_type", K::string, std::string{})}},
    // WebDataset tar shards (kernels/webdataset.cpp): one dict per sample, "__key__" and one
    // string entry per extension in `keys`.
    {"webdataset",
     0,
     {req("files", K::string_list), req("keys", K::string_list),
      opt("compression_type", K::string, std::string{})}},
    // A user source: a registered source function, e.g. source(my_gen(n=10)).
    {"source", 0, {req("fn", K::function)}},
    // tf.data's Dataset.random: int64 scalars forever; seed=kNoSeed draws a fresh seed per
    // iterator. The one op with external state (a random-seed resource in tf.data), which is
    // what register's external_state_policy looks for.
    {"random", 0, {opt("seed", K::int64, kNoSeed)}},
    // --- transforms
    {"map",
     1,
     {req("fn", K::function), opt("num_parallel_calls", K::int64, int64_t{1}),
      opt("deterministic", K::boolean, true)}},
    {"filter", 1, {req("fn", K::function)}},
    {"flat_map", 1, {req("fn", K::function)}},
    // cycle_length = kAutotune means 4 (fixed, so output order is the same on every machine).
    // num_parallel_calls > 1 reads blocks ahead on the executor, in the same order unless
    // deterministic is false.
    {"interleave",
     1,
     {req("fn", K::function), opt("cycle_length", K::int64, kAutotune),
      opt("block_length", K::int64, int64_t{1}), opt("num_parallel_calls", K::int64, int64_t{1}),
      opt("deterministic", K::boolean, true)}},
    {"batch", 1, {req("batch_size", K::int64), opt("drop_remainder", K::boolean, false)}},
    // padded_shapes: one rank-1 int tensor per component ([] for a scalar; -1 = pad to the
    // longest in the batch); () pads every dimension to the batch's longest. padding_values: one
    // scalar per component; () pads with 0 / "". See kernels/padded_batch.cpp.
    {"padded_batch",
     1,
     {req("batch_size", K::int64), opt("padded_shapes", K::element, Element{}),
      opt("padding_values", K::element, Element{}), opt("drop_remainder", K::boolean, false)}},
    // tf.train.Example records (scalar strings) to one component per feature (example.hpp).
    {"parse_example", 1, {req("features", K::string)}},
    // Drops elements whose production failed; log_warning logs each error, and the count dropped is
    // always logged (at the end, or when the iterator goes away). `unavailable` passes through.
    {"ignore_errors", 1, {opt("log_warning", K::boolean, false)}},
    {"unbatch", 1, {}},
    {"shuffle",
     1,
     {req("buffer_size", K::int64), opt("seed", K::int64, kNoSeed),
      opt("reshuffle_each_iteration", K::boolean, true)}},
    {"repeat", 1, {opt("count", K::int64, kRepeatForever)}},
    {"take", 1, {req("count", K::int64)}},
    {"skip", 1, {req("count", K::int64)}},
    // shard(SHARD_HINT, SHARD_HINT) is the placeholder filled by the HINT sharding policy.
    {"shard", 1, {req("num_shards", K::int64), req("index", K::int64)}},
    {"enumerate", 1, {opt("start", K::int64, int64_t{0})}},
    {"prefetch", 1, {opt("buffer_size", K::int64, kAutotune)}},
    // filename "" caches in memory; otherwise in files with that prefix.
    {"cache", 1, {opt("filename", K::string, std::string{})}},
    // --- combinators
    {"zip", OpSchema::kVariadic, {}},
    // a.concatenate(b): a's elements, then b's; text form and builder as a method with one
    // dataset argument (OpSchema::kBinary).
    {"concatenate", OpSchema::kBinary, {}},
  };
}

bool kind_matches(AttrKind kind, const AttrValue& v) {
  switch (kind) {
    case AttrKind::boolean: return std::holds_alternative<bool>(v);
    case AttrKind::int64: return std::holds_alternative<int64_t>(v);
    case AttrKind::float64: return std::holds_alternative<double>(v);
    case AttrKind::string: return std::holds_alternative<std::string>(v);
    case AttrKind::int64_list: return std::holds_alternative<std::vector<int64_t>>(v);
    case AttrKind::string_list: return std::holds_alternative<std::vector<std::string>>(v);
    case AttrKind::element: return std::holds_alternative<Element>(v);
    case AttrKind::function: return std::holds_alternative<FunctionRef>(v);
  }
  return false;
}

} // namespace

const std::vector<OpSchema>& all_op_schemas() {
  static const std::vector<OpSchema> schemas = make_schemas();
  return schemas;
}

const OpSchema* find_op_schema(std::string_view name) {
  const auto& all = all_op_schemas();
  auto it = std::find_if(all.begin(), all.end(), [&](const OpSchema& s) { return s.name == name; });
  return it == all.end() ? nullptr : &*it;
}

Status check_node_schema(const Node& node) {
  const OpSchema* schema = find_op_schema(node.op);
  if (schema == nullptr)
    return invalid_argument("unknown dataset op `" + node.op + "`");
  if (schema->num_inputs == OpSchema::kVariadic) {
    if (node.inputs.empty())
      return invalid_argument("`" + node.op + "` needs at least one input dataset");
  } else if (static_cast<int>(node.inputs.size()) != schema->input_count()) {
    return invalid_argument("`" + node.op + "` takes " + std::to_string(schema->input_count()) +
                            " input dataset(s), got " + std::to_string(node.inputs.size()));
  }
  for (const auto& in : node.inputs)
    if (!in)
      return invalid_argument("`" + node.op + "` has a null input");
  for (const auto& spec : schema->attrs) {
    auto it = node.attrs.find(spec.name);
    if (it == node.attrs.end())
      return invalid_argument("`" + node.op + "` is missing its argument `" + spec.name + "`");
    if (!kind_matches(spec.kind, it->second))
      return invalid_argument("`" + node.op + "` argument `" + spec.name + "` has the wrong type");
  }
  for (const auto& [name, value] : node.attrs) {
    (void)value;
    bool known = std::any_of(schema->attrs.begin(), schema->attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    if (!known)
      return invalid_argument("`" + node.op + "` has no argument `" + name + "`");
  }
  return Status::OK();
}

} // namespace conveyor
