// The dataset graph: plain data that serializes, fingerprints and prints.
// A Node is an op name, its input nodes and its attributes. Every attribute of the op's
// schema (pipeline/graph/ops.hpp) is always present — defaults are filled in by the builder and by
// the text parser — so equal definitions give equal graphs and equal fingerprints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "conveyor/element.hpp"

namespace conveyor {

// A parameter value of a registered user function.
using Scalar = std::variant<bool, int64_t, double, std::string>;
using Params = std::map<std::string, Scalar>;

// A reference to a function in the FunctionRegistry, with its parameters:
// text form `square` or `scale(factor=2.5)`.
struct FunctionRef {
  std::string name;
  Params params;

  FunctionRef() = default;
  FunctionRef(const char* n) : name(n) {}
  FunctionRef(std::string n, Params p = {}) : name(std::move(n)), params(std::move(p)) {}

  friend bool operator==(const FunctionRef& a, const FunctionRef& b) {
    return a.name == b.name && a.params == b.params;
  }
};

// Attribute kinds (index order of AttrValue).
using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<std::string>, Element, FunctionRef>;

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  std::string op;
  std::vector<NodePtr> inputs;
  std::map<std::string, AttrValue> attrs;

  // Typed attribute access; precondition: present with that kind (schemas guarantee it).
  int64_t int_attr(const std::string& k) const { return std::get<int64_t>(attrs.at(k)); }
  bool bool_attr(const std::string& k) const { return std::get<bool>(attrs.at(k)); }
  double float_attr(const std::string& k) const { return std::get<double>(attrs.at(k)); }
  const std::string& string_attr(const std::string& k) const {
    return std::get<std::string>(attrs.at(k));
  }
  const std::vector<std::string>& strings_attr(const std::string& k) const {
    return std::get<std::vector<std::string>>(attrs.at(k));
  }
  const Element& element_attr(const std::string& k) const { return std::get<Element>(attrs.at(k)); }
  const FunctionRef& function_attr(const std::string& k) const {
    return std::get<FunctionRef>(attrs.at(k));
  }
};

// Deep structural equality (inputs compared recursively).
bool graphs_equal(const Node& a, const Node& b);

// Placeholder for shard(num_shards, index) meaning "fill in at HINT sharding time".
inline constexpr int64_t kShardHint = -1;
// Marker for repeat(count) meaning forever, and for "no seed given".
inline constexpr int64_t kRepeatForever = -1;
inline constexpr int64_t kNoSeed = -1;
// prefetch(kAutotune) lets the runtime pick the buffer size.
inline constexpr int64_t kAutotune = -1;

} // namespace conveyor
