// Dataset::cardinality with tf.data's rules, op by op (each mirrors the CardinalityInternal of
// the matching tf.data kernel). A node that fails its schema or holds a value that validate()
// rejects has unknown cardinality: this function has no error channel.
#include <algorithm>
#include <limits>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/ops.hpp"

namespace conveyor {

namespace {

constexpr int64_t kInfinite = kInfiniteCardinality;
constexpr int64_t kUnknown = kUnknownCardinality;

bool is_count(int64_t n) { return n >= 0; }

// Elements of range(start, stop, step): ceil((stop - start) / step), or 0.
int64_t range_count(int64_t start, int64_t stop, int64_t step) {
  if (step == 0)
    return kUnknown;
  // 128-bit so that range(INT64_MIN, INT64_MAX) does not overflow.
  const __int128 span = static_cast<__int128>(stop) - start;
  if ((step > 0 && span <= 0) || (step < 0 && span >= 0))
    return 0;
  const __int128 abs_span = span < 0 ? -span : span;
  const __int128 abs_step = step < 0 ? -static_cast<__int128>(step) : step;
  return static_cast<int64_t>((abs_span + abs_step - 1) / abs_step);
}

int64_t repeat_count(int64_t n, int64_t count) {
  if (count < 0)
    return n == 0 ? 0 : kInfinite; // an empty input stays empty; anything else repeats forever
  if (count == 0)
    return 0;
  if (!is_count(n))
    return n;
  int64_t total = 0;
  if (__builtin_mul_overflow(n, count, &total))
    return kUnknown; // more than int64 can count
  return total;
}

int64_t take_count(int64_t n, int64_t count) {
  if (n == kUnknown)
    return kUnknown;
  if (n == kInfinite)
    return count; // take(-1) of an infinite input is infinite
  if (count == kInfinite)
    return n;
  return std::min(n, count);
}

int64_t skip_count(int64_t n, int64_t count) {
  if (!is_count(n))
    return n;
  return count < 0 ? 0 : std::max<int64_t>(0, n - count);
}

int64_t batch_count(int64_t n, int64_t batch_size, bool drop_remainder) {
  if (!is_count(n))
    return n;
  if (batch_size <= 0)
    return kUnknown;
  return n / batch_size + (n % batch_size == 0 || drop_remainder ? 0 : 1);
}

int64_t shard_count(int64_t n, int64_t num_shards, int64_t index) {
  if (!is_count(n))
    return n;
  // SHARD_HINT placeholders are filled in per worker later; until then the count is unknown.
  if (num_shards <= 0 || index < 0 || index >= num_shards)
    return kUnknown;
  return n / num_shards + (index < n % num_shards ? 1 : 0);
}

int64_t zip_count(const std::vector<int64_t>& inputs) {
  int64_t result = kInfinite;
  for (int64_t n : inputs) {
    if (n == kUnknown)
      return kUnknown;
    if (n != kInfinite && (result == kInfinite || n < result))
      result = n;
  }
  return result;
}

int64_t node_cardinality(const Node& n, const FunctionRegistry& functions) {
  if (!check_node_schema(n).ok())
    return kUnknown;
  const std::string& op = n.op;
  if (op == "zip") {
    std::vector<int64_t> counts;
    for (const NodePtr& in : n.inputs)
      counts.push_back(node_cardinality(*in, functions));
    return zip_count(counts);
  }
  if (op == "concatenate") {
    const int64_t a = node_cardinality(*n.inputs[0], functions);
    const int64_t b = node_cardinality(*n.inputs[1], functions);
    if (a == kUnknown || b == kUnknown)
      return kUnknown;
    if (a == kInfinite || b == kInfinite || a > std::numeric_limits<int64_t>::max() - b)
      return kInfinite; // a sum past int64 is as good as forever
    return a + b;
  }
  // Every other op has zero inputs or one.
  const int64_t input = n.inputs.empty() ? kUnknown : node_cardinality(*n.inputs[0], functions);

  if (op == "range")
    return range_count(n.int_attr("start"), n.int_attr("stop"), n.int_attr("step"));
  if (op == "from_tensors")
    return 1;
  if (op == "random")
    return kInfinite;
  if (op == "from_tensor_slices") {
    const Element& e = n.element_attr("element");
    return e.size() > 0 && e[0].rank() >= 1 ? e[0].shape()[0] : kUnknown;
  }
  if (op == "source") {
    const FunctionDef* def = functions.find(n.function_attr("fn").name);
    return def != nullptr ? def->source_cardinality : kUnknown;
  }
  if (op == "map" || op == "shuffle" || op == "enumerate" || op == "prefetch" || op == "cache")
    return input;
  if (op == "batch" || op == "padded_batch")
    return batch_count(input, n.int_attr("batch_size"), n.bool_attr("drop_remainder"));
  if (op == "parse_example")
    return input;
  if (op == "ignore_errors") // any element may be dropped; forever stays forever
    return input == kInfinite ? kInfinite : kUnknown;
  if (op == "repeat")
    return repeat_count(input, n.int_attr("count"));
  if (op == "take")
    return take_count(input, n.int_attr("count"));
  if (op == "skip")
    return skip_count(input, n.int_attr("count"));
  if (op == "shard")
    return shard_count(input, n.int_attr("num_shards"), n.int_attr("index"));
  // list_files, text_lines, tfrecord (file contents), filter (the predicate decides),
  // flat_map, interleave (the function decides) and unbatch (shapes decide).
  return kUnknown;
}

} // namespace

int64_t Dataset::cardinality(const FunctionRegistry* functions) const {
  if (!node_)
    return kUnknown;
  return node_cardinality(*node_, functions != nullptr ? *functions : FunctionRegistry::global());
}

} // namespace conveyor
