// tf.train.Example records: the feature spec of `parse_example`, parsing one serialized Example
// into tensors, and writing Examples (for tests, benchmarks and tools).
//
// A FeatureSpec lists features in order; `parse_example` yields one component per feature, in
// that order. When the names are in sorted order (the Python dict form sorts them) the element
// spec is a dict keyed by feature name, as tf.io.parse_single_example returns; a spec in another
// order keeps its order as a flat tuple (a dict's components are always in sorted key order):
//   - fixed-length (tf.io.FixedLenFeature(shape, dtype, default_value)): a tensor of `shape`.
//     The record's list must hold exactly product(shape) values (row-major). Without a default
//     the feature is required; with one, a missing feature (or one with an empty list, as in
//     TensorFlow) takes the default, which is a scalar (repeated) or product(shape) values.
//   - variable-length (tf.io.VarLenFeature(dtype)): a rank-1 tensor of the record's values,
//     shape [n] with n varying per record (element_spec [None]); a missing feature gives [0].
//     This is the `values` of TensorFlow's SparseTensor for one example: its indices are
//     [[0], [1], ..., [n-1]] and its dense_shape is [n], so the values tensor alone represents
//     it. A batch of them (padded_batch) is dense, padded to the longest; keep the lengths with
//     a padding value that cannot occur in the data, or a second fixed feature holding n.
// dtypes: int64 (Int64List), float32 (FloatList; `float` is accepted), string (BytesList; `bytes`
// is accepted). Errors name the feature and what was expected.
//
// Text form of a spec (the `features` argument of parse_example), features separated by `;`:
//   "label: int64; pixels: float32[2, 3] = 0.0; image/id: string = \"none\"; tags: var(string)"
//   NAME ':' DTYPE ['[' dims ']'] ['=' LITERAL]   fixed-length (no dims: a scalar)
//   NAME ':' 'var(' DTYPE ')'                     variable-length
// A NAME is any text without ':' or ';' (surrounding spaces dropped). LITERAL is a tensor literal
// of the pipeline text form (3, -1.5, "a", [1, 2]). to_string() prints the canonical spelling,
// which is what the builder stores in the graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

struct FeatureConfig {
  std::string name;
  DType dtype = DType::int64; // int64, float32 or string
  bool var_len = false;
  Shape shape;                         // fixed-length only
  std::optional<Tensor> default_value; // fixed-length only: of `shape` and `dtype` once checked
};

class FeatureSpec {
public:
  FeatureSpec() = default;

  // tf.io.FixedLenFeature(shape, dtype[, default_value]). A default may be a scalar or hold
  // product(shape) values, and a numeric one may be of another numeric dtype (converted).
  FeatureSpec& fixed(std::string name, DType dtype, Shape shape = {});
  FeatureSpec& fixed(std::string name, DType dtype, Shape shape, Tensor default_value);
  // tf.io.VarLenFeature(dtype).
  FeatureSpec& var_len(std::string name, DType dtype);

  // Reads the text form above; errors name the feature (or the position) and what was expected.
  static Expected<FeatureSpec> parse(std::string_view text);
  // Checks names (non-empty, unique, without ':' ';'), dtypes, shapes and defaults, and turns
  // every default into a tensor of exactly the feature's dtype and shape.
  Status check();
  // The canonical text form (check() first for canonical defaults).
  std::string to_string() const;

  const std::vector<FeatureConfig>& features() const { return features_; }
  ElementSpec element_spec() const;

private:
  std::vector<FeatureConfig> features_;
};

// Parses one serialized tf.train.Example (protobuf wire format) into one tensor per feature of a
// checked spec. invalid_argument naming the feature for a missing required feature, a list of
// the wrong type, or a fixed-length feature with the wrong number of values; data_loss when the
// bytes are not an Example.
Expected<Element> parse_example(std::string_view serialized, const FeatureSpec& spec);

// A serialized tf.train.Example with one feature per (name, tensor): int64 -> Int64List,
// float32 -> FloatList, string -> BytesList (values flattened row-major); other dtypes are an
// invalid_argument error.
Expected<std::string>
serialize_example(const std::vector<std::pair<std::string, Tensor>>& features);

} // namespace conveyor
