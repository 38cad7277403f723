// Element: what a dataset yields — a tuple of tensors, like a tf.data element.
// ElementSpec: the dtypes and (partially known) shapes of a dataset's elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/tensor.hpp"

namespace conveyor {

struct Element {
  std::vector<Tensor> components;

  Element() = default;
  Element(std::vector<Tensor> parts) : components(std::move(parts)) {}
  Element(Tensor single) { components.push_back(std::move(single)); }

  std::size_t size() const { return components.size(); }
  const Tensor& operator[](std::size_t i) const { return components[i]; }
  Tensor& operator[](std::size_t i) { return components[i]; }

  std::size_t byte_size() const;

  // One component prints as that tensor's literal, several as a tuple: (0, "a").
  // Uses the same literal syntax as the pipeline text form (see Tensor::to_string).
  std::string to_string() const;

  friend bool operator==(const Element& a, const Element& b) {
    return a.components == b.components;
  }
  friend bool operator!=(const Element& a, const Element& b) { return !(a == b); }
};

// Dimension value meaning "unknown" in a PartialShape (e.g. the batch dimension without
// drop_remainder).
inline constexpr int64_t kUnknownDim = -1;
using PartialShape = std::vector<int64_t>;

struct TensorSpec {
  DType dtype = DType::int64;
  PartialShape shape;        // entries may be kUnknownDim
  bool unknown_rank = false; // true when even the rank is unknown (shape is then empty)

  // "TensorSpec(shape=(None, 3), dtype=int64)"
  std::string to_string() const;
  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.unknown_rank == b.unknown_rank;
  }
};

struct ElementSpec {
  std::vector<TensorSpec> components;

  // One component prints as that spec; several as a tuple "(TensorSpec(...), TensorSpec(...))".
  std::string to_string() const;
  friend bool operator==(const ElementSpec& a, const ElementSpec& b) {
    return a.components == b.components;
  }

  // True when `e` has these dtypes and shapes compatible with these partial shapes.
  bool is_compatible(const Element& e) const;
};

// "a" for one part, "(a, b, ...)" for several: how elements and specs print their tuples.
template <class Parts>
std::string tuple_to_string(const Parts& parts) {
  if (parts.size() == 1)
    return parts[0].to_string();
  std::string out = "(";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += parts[i].to_string();
  }
  return out + ")";
}

// The spec of one concrete element.
ElementSpec spec_of(const Element& e);

// Cardinality as in tf.data: a count, or one of these two markers.
inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

} // namespace conveyor
