// Element: what a dataset yields — a tuple of tensors, like a tf.data element.
// ElementSpec: the dtypes and (partially known) shapes of a dataset's elements, and how they nest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/structure.hpp"
#include "conveyor/tensor.hpp"

namespace conveyor {

// An Element carries no Structure: the flat components are what kernels, codecs and the wire
// see, and the dataset's ElementSpec (Dataset::element_spec) says how they nest. Consumers re-nest
// with it (the Python client; to_string(element, structure) below).
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
  ElementSpec() = default;
  // ElementSpec{{spec, ...}}: flat components.
  ElementSpec(std::vector<TensorSpec> parts, std::optional<Structure> nesting = std::nullopt)
    : components(std::move(parts)), structure(std::move(nesting)) {}

  std::vector<TensorSpec> components;
  // How the components nest; nullopt is the flat tuple (Structure::flat(components.size())).
  // When set, structure->flat_size() == components.size().
  std::optional<Structure> structure;

  // The structure, or the flat tuple when none is set.
  Structure structure_or_flat() const {
    return structure ? *structure : Structure::flat(components.size());
  }
  // As tf.data prints element_spec: one component prints as that spec, several as a tuple
  // "(TensorSpec(...), TensorSpec(...))", a dict as "{'image': TensorSpec(...), ...}".
  std::string to_string() const;
  friend bool operator==(const ElementSpec& a, const ElementSpec& b) {
    return a.components == b.components && a.structure_or_flat() == b.structure_or_flat();
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

// The spec of one concrete element (flat: an Element has no structure of its own).
ElementSpec spec_of(const Element& e);

// `e` nested by `structure` in the pipeline text form: {"a": 1, "b": (2, "x")}. A structure
// whose flat_size() differs from e.size() prints the element flat.
std::string to_string(const Element& e, const Structure& structure);

// Cardinality as in tf.data: a count, or one of these two markers.
inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

} // namespace conveyor
