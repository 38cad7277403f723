// Dataset: the fluent C++ builder over the dataset graph (pipeline/graph/graph.hpp), mirroring
// tf.data.Dataset. A Dataset is an immutable value (a shared pointer to its output node);
// every method returns a new Dataset. Builders fill in every schema attribute (defaults
// included), so the builder and the text form (text_form.hpp) produce identical graphs.
//
// The builder does not look functions up: `validate()` does (and registration with the
// service calls it), so an unknown function name is an error when the dataset is defined or
// registered — never in the middle of a job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/element.hpp"
#include "conveyor/graph.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

class FeatureSpec;
class FunctionRegistry;
class Iterator;
struct IteratorContext;

class Dataset {
public:
  explicit Dataset(NodePtr node) : node_(std::move(node)) {}

  // --- sources
  static Dataset range(int64_t stop);
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  static Dataset from_tensors(Element element);
  static Dataset from_tensor_slices(Element element);
  // Nested elements: `structure` nests the flat components (structure.hpp), e.g. a dict
  // {"image": _, "label": _} over two components; validate() checks that the sizes agree.
  static Dataset from_tensors(Element element, const Structure& structure);
  static Dataset from_tensor_slices(Element element, const Structure& structure);
  static Dataset list_files(std::string pattern, bool shuffle = true, int64_t seed = kNoSeed);
  // File sources: each entry is a file name or a glob pattern (sorted expansion, files.hpp);
  // compression_type "" (none), "ZLIB" or "GZIP".
  static Dataset text_lines(std::vector<std::string> files, std::string compression_type = "");
  static Dataset tfrecord(std::vector<std::string> files, std::string compression_type = "");
  // A snapshot written by `conveyor save` / save(): its elements, chunk by chunk. wait=false
  // needs a finished snapshot; wait=true reads one while it is written, to its end.
  static Dataset load(std::string path, bool wait = false);
  // CSV/TSV records as tf.data's CsvDataset: one scalar per column of type column_types[i]
  // ("int32", "int64", "float32", "float64", "string"). record_defaults: {} (every value
  // required) or one per column, a scalar default or an empty rank-1 tensor (required);
  // select_cols: the file's columns to keep, increasing ({} = all). Files may be URLs.
  static Dataset csv(std::vector<std::string> files, std::vector<std::string> column_types,
                     bool header = false, std::string field_delim = ",", std::string na_value = "",
                     std::vector<int64_t> select_cols = {}, Element record_defaults = {},
                     bool use_quote_delim = true, std::string compression_type = "");
  // WebDataset tar shards: one dict per sample, {"__key__": name, EXT: bytes for EXT in keys}.
  static Dataset webdataset(std::vector<std::string> files, std::vector<std::string> keys,
                            std::string compression_type = "");
  static Dataset source(FunctionRef fn); // a user source function from the registry
  // tf.data's Dataset.random: pseudo-random int64 scalars, forever. With a seed every iterator
  // yields the same sequence; kNoSeed gives each iterator a fresh one. It has external state in
  // tf.data's sense (DistributeOptions::external_state_policy).
  static Dataset random(int64_t seed = kNoSeed);
  static Dataset zip(std::vector<Dataset> inputs);

  // --- transforms
  Dataset map(FunctionRef fn, int64_t num_parallel_calls = 1, bool deterministic = true) const;
  Dataset filter(FunctionRef predicate) const;
  Dataset flat_map(FunctionRef fn) const;
  // fn may also name a file source, `tfrecord` or `text_lines` (file_source_functions.hpp):
  // list_files("/d/*.tfrecord").interleave("tfrecord", 2) needs no registered function.
  // num_parallel_calls > 1 (or kAutotune: the CPU count) reads that many blocks ahead in
  // parallel; deterministic = false lets a ready block go first.
  Dataset interleave(FunctionRef fn, int64_t cycle_length = kAutotune, int64_t block_length = 1,
                     int64_t num_parallel_calls = 1, bool deterministic = true) const;
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset unbatch() const;
  // tf.data's padded_batch: padded_shapes per component, kUnknownDim (-1) = pad to the batch's
  // longest; {} = every dimension to the longest. padding_values: one scalar per component
  // ({} = 0 / ""). See kernels/padded_batch.cpp.
  Dataset padded_batch(int64_t batch_size, const std::vector<PartialShape>& padded_shapes = {},
                       std::vector<Tensor> padding_values = {}, bool drop_remainder = false) const;
  // Serialized tf.train.Examples (scalar strings) to one component per feature (example.hpp).
  Dataset parse_example(const FeatureSpec& features) const;
  Dataset parse_example(std::string features) const; // the spec's text form
  // Drops elements whose production failed; always reports how many (warnings.hpp).
  Dataset ignore_errors(bool log_warning = false) const;
  Dataset shuffle(int64_t buffer_size, int64_t seed = kNoSeed,
                  bool reshuffle_each_iteration = true) const;
  Dataset repeat(int64_t count = kRepeatForever) const;
  Dataset take(int64_t count) const;
  Dataset skip(int64_t count) const;
  Dataset shard(int64_t num_shards, int64_t index) const;
  Dataset enumerate(int64_t start = 0) const;
  // This dataset's elements, then `other`'s (tf.data's concatenate). Their element specs must be
  // compatible (same component count and dtypes, shapes of the same rank); validate() says
  // "Incompatible dataset elements" otherwise. Under DYNAMIC sharding at most one of the two may
  // hold a splittable source.
  Dataset concatenate(const Dataset& other) const;
  Dataset prefetch(int64_t buffer_size = kAutotune) const;
  Dataset cache(std::string filename = "") const;

  const NodePtr& node() const { return node_; }

  // Checks the whole graph: schemas, argument values (e.g. batch_size > 0, shard index in
  // range), and that every function exists in `functions` with the right kind and parameters.
  // Uses the global registry when `functions` is null.
  Status validate(const FunctionRegistry* functions = nullptr) const;

  // tf.data's cardinality: n, kInfiniteCardinality or kUnknownCardinality.
  int64_t cardinality(const FunctionRegistry* functions = nullptr) const;
  // The dtypes and shapes of elements (batch adds a leading kUnknownDim unless drop_remainder).
  Expected<ElementSpec> element_spec(const FunctionRegistry* functions = nullptr) const;

  // An iterator over the whole dataset (or, with ctx.split_provider, over the splits it hands out).
  Expected<std::unique_ptr<Iterator>> make_iterator(IteratorContext& ctx) const;
  Expected<std::unique_ptr<Iterator>> make_iterator() const; // default context

  // Convenience: runs the dataset to the end (or `limit` elements) with a default context.
  Expected<std::vector<Element>> collect(int64_t limit = -1) const;

  // Text form, e.g. "range(100).map(square).shuffle(16, seed=3).batch(8)" (text_form.hpp).
  std::string to_text() const;
  // Stable hash of the canonical form, as 16 lowercase hex digits (serialize.hpp).
  std::string fingerprint() const;

  friend bool operator==(const Dataset& a, const Dataset& b) {
    return graphs_equal(*a.node_, *b.node_);
  }
  friend bool operator!=(const Dataset& a, const Dataset& b) { return !(a == b); }

private:
  NodePtr node_;
};

} // namespace conveyor
