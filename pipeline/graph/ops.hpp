// Op schemas: the one table that says which ops exist, how many inputs each takes and which
// attributes (with kinds, positional order and defaults) it has. The builder (dataset.hpp),
// the text parser (text_form.hpp), validation and serialization all follow this table.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/graph/graph.hpp"

namespace conveyor {

enum class AttrKind : unsigned char {
  boolean,
  int64,
  float64,
  string,
  int64_list,
  string_list,
  element,
  function
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value; // nullopt = required
};

struct OpSchema {
  std::string name;
  // Number of dataset inputs: 0 for sources, 1 for transforms, kVariadic for zip, kBinary for
  // concatenate (two inputs, written as a method of the first taking the second).
  int num_inputs;
  // Attributes in positional order (the text form accepts them positionally or by keyword).
  std::vector<AttrSpec> attrs;
  static constexpr int kVariadic = -1;
  static constexpr int kBinary = -2;
  // The exact input count for fixed-arity ops (not kVariadic).
  int input_count() const { return num_inputs == kBinary ? 2 : num_inputs; }
};

// nullptr when no op has this name.
const OpSchema* find_op_schema(std::string_view name);
const std::vector<OpSchema>& all_op_schemas();

// Checks a node against its schema (op exists, input count, every attr present with the right
// kind, no unknown attrs) — not recursive. Messages name the op and the attribute.
Status check_node_schema(const Node& node);

} // namespace conveyor
