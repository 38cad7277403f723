// Structure: how an element's flat components nest, as tf.nest sees a tf.data element. A tree of
// tuples, dicts (string keys, kept sorted as tf.nest flattens them) and leaves; the leaves are
// numbered in flatten order, and leaf i is component i of the flat Element. The flat components
// stay the storage and the wire payload: a Structure only says how to re-nest them.
//
// Text form: `_` is a leaf, `(_, _)` a tuple (`(_,)` a one-entry tuple, `()` an empty one),
// `{"image": _, "label": (_, _)}` a dict. parse(to_string()) gives the same structure back.
// A flat tuple of N components (flat(N)) is the default: one leaf for N == 1, else a tuple of N
// leaves, which is what an Element without a structure has always meant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conveyor/status.hpp"

namespace conveyor {

class Structure {
public:
  enum class Kind { leaf, tuple, dict };

  Structure() = default; // a leaf
  static Structure leaf() { return Structure{}; }
  static Structure tuple(std::vector<Structure> items);
  // Keys are sorted; a repeated key is an error naming it.
  static Expected<Structure> dict(std::vector<std::pair<std::string, Structure>> entries);
  // The default structure of n flat components.
  static Structure flat(std::size_t n);
  // The text form above; errors name the column and what was expected.
  static Expected<Structure> parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_leaf() const { return kind_ == Kind::leaf; }
  // True for a leaf or a tuple of leaves: what a flat Element means without a structure (the
  // one-leaf tuple `(_,)` included, which has always read as its one component).
  bool is_flat() const;
  std::size_t flat_size() const { return flat_size_; }
  // Tuple entries or dict values (in key order); empty for a leaf.
  const std::vector<Structure>& children() const { return children_; }
  // Dict keys, sorted; empty otherwise.
  const std::vector<std::string>& keys() const { return keys_; }
  // The flat index of the first leaf of child i.
  std::size_t child_offset(std::size_t i) const;

  // The flat component index of the top-level dict key `key`, which must hold one tensor (a
  // leaf): how ops such as decode_image(key="jpg") find their component.
  Expected<std::size_t> index_of(const std::string& key) const;
  // The flat range [first, first + count) that the top-level dict key `key` holds.
  Expected<std::pair<std::size_t, std::size_t>> range_of(const std::string& key) const;

  std::string to_string() const;
  // The structure with leaf i replaced by leaves[i] (leaves.size() == flat_size()). Dict keys
  // are quoted with `quote` ('"' for the pipeline text form, '\'' for Python-like specs).
  std::string format(const std::vector<std::string>& leaves, char quote = '"') const;

  friend bool operator==(const Structure& a, const Structure& b) {
    return a.kind_ == b.kind_ && a.keys_ == b.keys_ && a.children_ == b.children_;
  }
  friend bool operator!=(const Structure& a, const Structure& b) { return !(a == b); }

private:
  void format_into(const std::vector<std::string>& leaves, char quote, std::size_t& next,
                   std::string& out) const;

  Kind kind_ = Kind::leaf;
  std::vector<std::string> keys_;
  std::vector<Structure> children_;
  std::size_t flat_size_ = 1;
};

// A dict key in the text form: "..." with \" and \\ escaped (and control bytes as \xHH).
std::string quote_structure_key(const std::string& key, char quote = '"');

} // namespace conveyor
