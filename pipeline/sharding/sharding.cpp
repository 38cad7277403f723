#include "pipeline/sharding/sharding.hpp"

#include "pipeline/io/files.hpp"

#include <array>
#include <cctype>
#include <utility>
#include <vector>

namespace conveyor {

namespace {

constexpr std::array<std::pair<ShardingPolicy, const char*>, 6> kPolicyNames{{
  {ShardingPolicy::off, "OFF"},
  {ShardingPolicy::dynamic, "DYNAMIC"},
  {ShardingPolicy::file, "FILE"},
  {ShardingPolicy::data, "DATA"},
  {ShardingPolicy::file_or_data, "FILE_OR_DATA"},
  {ShardingPolicy::hint, "HINT"},
}};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

NodePtr make_shard(NodePtr input, int64_t num_shards, int64_t index) {
  auto shard = std::make_shared<Node>();
  shard->op = "shard";
  shard->inputs.push_back(std::move(input));
  shard->attrs["num_shards"] = num_shards;
  shard->attrs["index"] = index;
  return shard;
}

// Rebuilds the graph bottom-up: every node, once its inputs are rewritten, goes through
// `replace`, which returns it unchanged or a new node. Nodes are never modified in place:
// unchanged subtrees are shared with the original graph, changed ones are fresh copies.
template <class Replace>
Expected<NodePtr> rewrite(const NodePtr& node, Replace& replace) {
  std::vector<NodePtr> inputs;
  inputs.reserve(node->inputs.size());
  bool inputs_changed = false;
  for (const NodePtr& input : node->inputs) {
    Expected<NodePtr> rewritten = rewrite(input, replace);
    if (!rewritten)
      return rewritten.status();
    inputs_changed = inputs_changed || *rewritten != input;
    inputs.push_back(std::move(*rewritten));
  }
  NodePtr current = node;
  if (inputs_changed) {
    auto copy = std::make_shared<Node>(*node);
    copy->inputs = std::move(inputs);
    current = std::move(copy);
  }
  return replace(current);
}

// A seed every worker derives alike from the pattern (FNV-1a), never kNoSeed.
int64_t pinned_seed(const std::string& pattern) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : pattern) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return static_cast<int64_t>(hash & 0x7fffffffffffffffULL);
}

// FILE: worker i of n keeps files i, i+n, ... of every file source. `found` tells whether the
// dataset had one at all.
Expected<Dataset> shard_files(const Dataset& dataset, int64_t n, int64_t i, bool& found,
                              const PathPolicy* paths) {
  found = false;
  auto replace = [&](const NodePtr& node) -> Expected<NodePtr> {
    if (node->op == "text_lines" || node->op == "tfrecord" || node->op == "csv" ||
        node->op == "webdataset") {
      found = true;
      // Glob patterns expand to their sorted matches first (the same list on every worker),
      // then each worker keeps its share, written back as patterns that match exactly one file.
      Expected<std::vector<std::string>> expanded =
        expand_file_patterns(node->op, node->strings_attr("files"), paths);
      if (!expanded)
        return expanded.status().with_context("FILE sharding");
      const std::vector<std::string>& files = *expanded;
      // tf.data raises this at run time; here the file list is known, so it fails up front.
      if (static_cast<int64_t>(files.size()) < n)
        return invalid_argument("FILE sharding needs at least as many files as workers: `" +
                                node->op + "` has " + std::to_string(files.size()) +
                                " file(s), num_workers is " + std::to_string(n));
      std::vector<std::string> mine;
      for (std::size_t f = static_cast<std::size_t>(i); f < files.size();
           f += static_cast<std::size_t>(n))
        mine.push_back(has_glob_chars(files[f]) ? escape_glob(files[f]) : files[f]);
      auto copy = std::make_shared<Node>(*node);
      copy->attrs["files"] = std::move(mine);
      return NodePtr(std::move(copy));
    }
    if (node->op == "load") { // chunks, not files: each worker keeps its share of them
      found = true;
      if (node->int_attr("num_shards") != 1)
        return invalid_argument("FILE sharding of a `load` that is sharded already");
      auto copy = std::make_shared<Node>(*node);
      copy->attrs["num_shards"] = n;
      copy->attrs["shard_index"] = i;
      return NodePtr(std::move(copy));
    }
    if (node->op == "list_files") {
      found = true;
      NodePtr listed = node;
      // Unseeded, every worker would shuffle the list its own way and the shards would overlap;
      // a seed derived from the pattern gives all workers the same order, so shards are disjoint.
      if (node->bool_attr("shuffle") && node->int_attr("seed") == kNoSeed) {
        auto seeded = std::make_shared<Node>(*node);
        seeded->attrs["seed"] = pinned_seed(node->string_attr("pattern"));
        listed = std::move(seeded);
      }
      return make_shard(std::move(listed), n, i);
    }
    return node;
  };
  Expected<NodePtr> root = rewrite(dataset.node(), replace);
  if (!root)
    return root.status();
  if (!found)
    return invalid_argument(
      "FILE sharding policy requires a file-based dataset source (list_files, text_lines, "
      "tfrecord, csv, webdataset or load); this dataset has none");
  return Dataset(std::move(*root));
}

// DATA: tf.data shards at the output, so every worker runs the whole pipeline and keeps its
// elements i, i+n, ...
Dataset shard_data(const Dataset& dataset, int64_t n, int64_t i) {
  return Dataset(make_shard(dataset.node(), n, i));
}

// HINT: shard(SHARD_HINT, ...) placeholders become shard(n, i); no placeholder, no change.
Expected<Dataset> fill_shard_hints(const Dataset& dataset, int64_t n, int64_t i) {
  auto replace = [&](const NodePtr& node) -> Expected<NodePtr> {
    if (node->op == "shard" && node->int_attr("num_shards") == kShardHint)
      return make_shard(node->inputs.at(0), n, i);
    return node;
  };
  Expected<NodePtr> root = rewrite(dataset.node(), replace);
  if (!root)
    return root.status();
  return Dataset(std::move(*root));
}

} // namespace

const char* to_string(ShardingPolicy policy) {
  for (const auto& [p, name] : kPolicyNames)
    if (p == policy)
      return name;
  return "UNKNOWN";
}

std::optional<ShardingPolicy> sharding_policy_from_string(std::string_view name) {
  for (const auto& [p, text] : kPolicyNames)
    if (equals_ignoring_case(name, text))
      return p;
  return std::nullopt;
}

Expected<Dataset> apply_sharding(const Dataset& dataset, ShardingPolicy policy, int64_t num_workers,
                                 int64_t worker_index, const PathPolicy* paths) {
  if (num_workers <= 0)
    return invalid_argument("`num_workers` must be positive, got " + std::to_string(num_workers));
  if (worker_index < 0 || worker_index >= num_workers)
    return invalid_argument("`worker_index` must be in [0, num_workers=" +
                            std::to_string(num_workers) + "), got " + std::to_string(worker_index));
  if (!dataset.node())
    return invalid_argument("cannot shard an empty dataset graph");
  bool found_files = false;
  switch (policy) {
    case ShardingPolicy::off:
    case ShardingPolicy::dynamic: return dataset;
    case ShardingPolicy::file:
      return shard_files(dataset, num_workers, worker_index, found_files, paths);
    case ShardingPolicy::data: return shard_data(dataset, num_workers, worker_index);
    case ShardingPolicy::file_or_data: {
      // FILE when it works; without a file source, or with fewer files than workers, DATA.
      Expected<Dataset> by_files =
        shard_files(dataset, num_workers, worker_index, found_files, paths);
      if (by_files)
        return by_files;
      return shard_data(dataset, num_workers, worker_index);
    }
    case ShardingPolicy::hint: return fill_shard_hints(dataset, num_workers, worker_index);
  }
  return invalid_argument("unknown sharding policy " + std::to_string(static_cast<int>(policy)));
}

} // namespace conveyor
