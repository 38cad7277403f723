// The Dataset builder: each method makes one graph node with every schema attribute filled in,
// plus the entry points that hand the graph to the kernels, the text form and the serializer.
#include "pipeline/graph/dataset.hpp"

#include <cassert>
#include <utility>

#include "pipeline/io/example.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/kernels/make_iterator.hpp"
#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/padding.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor {

namespace {

using Attrs = std::map<std::string, AttrValue>;

// A node of `op` with the given attributes; any schema attribute not given takes its default,
// so a builder can never produce a graph that differs from the parsed text form.
Dataset make(const char* op, std::vector<NodePtr> inputs, Attrs attrs) {
  const OpSchema* schema = find_op_schema(op);
  assert(schema != nullptr && "builder op missing from ops.cpp");
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->attrs = std::move(attrs);
  for (const AttrSpec& spec : schema->attrs)
    if (spec.default_value && node->attrs.count(spec.name) == 0)
      node->attrs.emplace(spec.name, *spec.default_value);
  return Dataset{std::move(node)};
}

} // namespace

// --- sources

Dataset Dataset::range(int64_t stop) { return range(0, stop, 1); }

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  return make("range", {}, {{"start", start}, {"stop", stop}, {"step", step}});
}

Dataset Dataset::from_tensors(Element element) {
  return make("from_tensors", {}, {{"element", std::move(element)}});
}

Dataset Dataset::from_tensor_slices(Element element) {
  return make("from_tensor_slices", {}, {{"element", std::move(element)}});
}

// The flat default is stored as "" so that a flat element builds the graph it always has.
Dataset Dataset::from_tensors(Element element, const Structure& structure) {
  std::string text = structure.is_flat() ? std::string{} : structure.to_string();
  return make("from_tensors", {},
              {{"element", std::move(element)}, {"structure", std::move(text)}});
}

Dataset Dataset::from_tensor_slices(Element element, const Structure& structure) {
  std::string text = structure.is_flat() ? std::string{} : structure.to_string();
  return make("from_tensor_slices", {},
              {{"element", std::move(element)}, {"structure", std::move(text)}});
}

Dataset Dataset::list_files(std::string pattern, bool shuffle, int64_t seed) {
  return make("list_files", {},
              {{"pattern", std::move(pattern)}, {"shuffle", shuffle}, {"seed", seed}});
}

Dataset Dataset::text_lines(std::vector<std::string> files, std::string compression_type) {
  return make("text_lines", {},
              {{"files", std::move(files)}, {"compression_type", std::move(compression_type)}});
}

Dataset Dataset::tfrecord(std::vector<std::string> files, std::string compression_type) {
  return make("tfrecord", {},
              {{"files", std::move(files)}, {"compression_type", std::move(compression_type)}});
}

Dataset Dataset::load(std::string path, bool wait) {
  // As tf.data's load(): the element spec comes from the snapshot's metadata when it exists
  // already (wait=true may name one that a save has not started yet: the spec is then unknown).
  std::string spec;
  if (auto metadata = snapshot::read_metadata(path); metadata.ok())
    spec = metadata->element_spec;
  return make("load", {},
              {{"path", std::move(path)},
               {"wait", wait},
               {"element_spec", spec},
               {"num_shards", int64_t{1}},
               {"shard_index", int64_t{0}}});
}

Dataset Dataset::webdataset(std::vector<std::string> files, std::vector<std::string> keys,
                            std::string compression_type) {
  return make("webdataset", {},
              {{"files", std::move(files)},
               {"keys", std::move(keys)},
               {"compression_type", std::move(compression_type)}});
}

Dataset Dataset::csv(std::vector<std::string> files, std::vector<std::string> column_types,
                     bool header, std::string field_delim, std::string na_value,
                     std::vector<int64_t> select_cols, Element record_defaults,
                     bool use_quote_delim, std::string compression_type) {
  return make("csv", {},
              {{"files", std::move(files)},
               {"column_types", std::move(column_types)},
               {"header", header},
               {"field_delim", std::move(field_delim)},
               {"na_value", std::move(na_value)},
               {"select_cols", std::move(select_cols)},
               {"record_defaults", std::move(record_defaults)},
               {"use_quote_delim", use_quote_delim},
               {"compression_type", std::move(compression_type)}});
}

Dataset Dataset::source(FunctionRef fn) { return make("source", {}, {{"fn", std::move(fn)}}); }

Dataset Dataset::random(int64_t seed) { return make("random", {}, {{"seed", seed}}); }

Dataset Dataset::zip(std::vector<Dataset> inputs) {
  std::vector<NodePtr> nodes;
  nodes.reserve(inputs.size());
  for (auto& d : inputs)
    nodes.push_back(d.node_);
  return make("zip", std::move(nodes), {});
}

// --- transforms

Dataset Dataset::map(FunctionRef fn, int64_t num_parallel_calls, bool deterministic) const {
  return make("map", {node_},
              {{"fn", std::move(fn)},
               {"num_parallel_calls", num_parallel_calls},
               {"deterministic", deterministic}});
}

Dataset Dataset::filter(FunctionRef predicate) const {
  return make("filter", {node_}, {{"fn", std::move(predicate)}});
}

Dataset Dataset::flat_map(FunctionRef fn) const {
  return make("flat_map", {node_}, {{"fn", std::move(fn)}});
}

Dataset Dataset::interleave(FunctionRef fn, int64_t cycle_length, int64_t block_length,
                            int64_t num_parallel_calls, bool deterministic) const {
  return make("interleave", {node_},
              {{"fn", std::move(fn)},
               {"cycle_length", cycle_length},
               {"block_length", block_length},
               {"num_parallel_calls", num_parallel_calls},
               {"deterministic", deterministic}});
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  return make("batch", {node_}, {{"batch_size", batch_size}, {"drop_remainder", drop_remainder}});
}

Dataset Dataset::unbatch() const { return make("unbatch", {node_}, {}); }

Dataset Dataset::padded_batch(int64_t batch_size, const std::vector<PartialShape>& padded_shapes,
                              std::vector<Tensor> padding_values, bool drop_remainder) const {
  return make("padded_batch", {node_},
              {{"batch_size", batch_size},
               {"padded_shapes", padded_shapes_element(padded_shapes)},
               {"padding_values", Element{std::move(padding_values)}},
               {"drop_remainder", drop_remainder}});
}

Dataset Dataset::parse_example(const FeatureSpec& features) const {
  // The canonical text of the checked spec; an invalid spec is kept as written so that
  // validate() reports it.
  FeatureSpec checked = features;
  return parse_example(checked.check().ok() ? checked.to_string() : features.to_string());
}

Dataset Dataset::parse_example(std::string features) const {
  return make("parse_example", {node_}, {{"features", std::move(features)}});
}

Dataset Dataset::ignore_errors(bool log_warning) const {
  return make("ignore_errors", {node_}, {{"log_warning", log_warning}});
}

Dataset Dataset::shuffle(int64_t buffer_size, int64_t seed, bool reshuffle_each_iteration) const {
  return make("shuffle", {node_},
              {{"buffer_size", buffer_size},
               {"seed", seed},
               {"reshuffle_each_iteration", reshuffle_each_iteration}});
}

Dataset Dataset::repeat(int64_t count) const { return make("repeat", {node_}, {{"count", count}}); }
Dataset Dataset::take(int64_t count) const { return make("take", {node_}, {{"count", count}}); }
Dataset Dataset::skip(int64_t count) const { return make("skip", {node_}, {{"count", count}}); }

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  return make("shard", {node_}, {{"num_shards", num_shards}, {"index", index}});
}

Dataset Dataset::concatenate(const Dataset& other) const {
  return make("concatenate", {node_, other.node_}, {});
}

Dataset Dataset::enumerate(int64_t start) const {
  return make("enumerate", {node_}, {{"start", start}});
}

Dataset Dataset::prefetch(int64_t buffer_size) const {
  return make("prefetch", {node_}, {{"buffer_size", buffer_size}});
}

Dataset Dataset::cache(std::string filename) const {
  return make("cache", {node_}, {{"filename", std::move(filename)}});
}

// --- running

Expected<std::unique_ptr<Iterator>> Dataset::make_iterator(IteratorContext& ctx) const {
  if (ctx.functions == nullptr)
    ctx.functions = &FunctionRegistry::global();
  // Kernels assume a valid graph; checking here turns a bad argument into an error value
  // instead of undefined behaviour deep inside an iterator.
  CONVEYOR_RETURN_IF_ERROR(validate(ctx.functions));
  return make_node_iterator(node_, ctx);
}

Expected<std::unique_ptr<Iterator>> Dataset::make_iterator() const {
  // Kernels copy the context (it is two pointers), so a local one may go out of scope.
  IteratorContext ctx;
  return make_iterator(ctx);
}

Expected<std::vector<Element>> Dataset::collect(int64_t limit) const {
  if (limit < 0 && cardinality() == kInfiniteCardinality)
    return invalid_argument("collect: the dataset is infinite; pass a `limit` >= 0");
  auto it = make_iterator();
  if (!it.ok())
    return it.status();
  std::vector<Element> out;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR((*it)->get_next(e, end));
    if (end)
      break;
    out.push_back(std::move(e));
  }
  return out;
}

std::string Dataset::to_text() const { return conveyor::to_text(*this); }

std::string Dataset::fingerprint() const { return conveyor::fingerprint(*this); }

} // namespace conveyor
