// The dataset text form (text_form.hpp): parse_dataset reads the syntax tree of text_value.cpp
// as a dataset graph, binding arguments to the op schemas of ops.hpp; to_text prints the
// canonical form that parses back to the same graph:
//   - sources are calls, transforms are methods on their input, zip(a, b, ...) is a call;
//   - required arguments positionally, then the optional ones that differ from their default
//     as keywords, both in schema order; defaults are omitted;
//   - range prints as range(stop) when start is 0 and step 1, else range(start, stop[, step=k]);
//   - -1 prints as AUTOTUNE or SHARD_HINT where that is what it means (see kNamedConstants).
#include "pipeline/graph/text_form.hpp"

// g++ 12 reports -Wfree-nonheap-object inside std::variant's destructor when an
// Expected<AttrValue> is destroyed after inlining (a known false positive of GCC 12's
// -Wfree-nonheap-object on std::variant, gone in later releases); nothing here frees a
// non-heap pointer, and ASan checks the same code at run time.
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/padding.hpp"
#include "pipeline/graph/text_literals.hpp"
#include "pipeline/graph/text_value.hpp"

namespace conveyor {

namespace {

using text::describe;
using text::syntax_error;
using text::TextArg;
using text::TextValue;
using Kind = TextValue::Kind;

// The named constants of the text form and the (op, argument) pairs they are meant for.
struct NamedConstant {
  const char* name;
  int64_t value;
  std::vector<std::pair<std::string, std::string>> uses;
};

const std::vector<NamedConstant>& named_constants() {
  static const std::vector<NamedConstant> constants = {
    {"SHARD_HINT", kShardHint, {{"shard", "num_shards"}, {"shard", "index"}}},
    {"AUTOTUNE",
     kAutotune,
     {{"map", "num_parallel_calls"}, {"interleave", "cycle_length"}, {"prefetch", "buffer_size"}}},
  };
  return constants;
}

const NamedConstant* find_constant(const std::string& name) {
  for (const auto& c : named_constants())
    if (name == c.name)
      return &c;
  return nullptr;
}

bool constant_applies(const NamedConstant& c, const std::string& op, const std::string& attr) {
  return std::find(c.uses.begin(), c.uses.end(), std::make_pair(op, attr)) != c.uses.end();
}

// ------------------------------------------------------------------------------- printing

void print_int(const std::string& op, const std::string& attr, int64_t v, std::string& out) {
  for (const auto& c : named_constants()) {
    if (v == c.value && constant_applies(c, op, attr)) {
      out += c.name;
      return;
    }
  }
  out += std::to_string(v);
}

void print_function(const FunctionRef& f, std::string& out) {
  out += f.name;
  if (f.params.empty())
    return;
  out += '(';
  bool first = true;
  for (const auto& [name, value] : f.params) {
    out += first ? "" : ", ";
    first = false;
    out += name + "=";
    std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          out += v ? "true" : "false";
        else if constexpr (std::is_same_v<T, int64_t>)
          out += std::to_string(v);
        else if constexpr (std::is_same_v<T, double>)
          out += text::format_float64(v);
        else
          out += text::quote_string(v);
      },
      value);
  }
  out += ')';
}

void print_value(const std::string& op, const std::string& attr, const AttrValue& value,
                 std::string& out) {
  std::visit(
    [&](const auto& v) {
      using T = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<T, bool>) {
        out += v ? "true" : "false";
      } else if constexpr (std::is_same_v<T, int64_t>) {
        print_int(op, attr, v, out);
      } else if constexpr (std::is_same_v<T, double>) {
        out += text::format_float64(v);
      } else if constexpr (std::is_same_v<T, std::string>) {
        out += text::quote_string(v);
      } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
        out += '[';
        for (std::size_t i = 0; i < v.size(); ++i)
          out += (i > 0 ? ", " : "") + std::to_string(v[i]);
        out += ']';
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        out += '[';
        for (std::size_t i = 0; i < v.size(); ++i)
          out += (i > 0 ? ", " : "") + text::quote_string(v[i]);
        out += ']';
      } else if constexpr (std::is_same_v<T, Element>) {
        if (op == "padded_batch" && attr == "padded_shapes")
          out += padded_shapes_text(v); // plain lists: padded_shapes=([], [-1, 3])
        else
          out += v.to_string();
      } else {
        print_function(v, out);
      }
    },
    value);
}

void print_node(const Node& n, std::string& out);

// The sources whose `element` may be a nested literal, kept as flat components + `structure`.
bool has_structure_attr(const std::string& op) {
  return op == "from_tensors" || op == "from_tensor_slices";
}

// The arguments inside the parentheses, in canonical form; `first` is false when inputs
// (zip's datasets) were printed before them.
void print_arguments(const Node& n, const OpSchema& schema, bool first, std::string& out) {
  auto separator = [&] {
    out += first ? "" : ", ";
    first = false;
  };
  auto attr = [&](const std::string& name) -> const AttrValue* {
    auto it = n.attrs.find(name);
    return it == n.attrs.end() ? nullptr : &it->second;
  };
  // range(stop) when start is 0 and step is 1, as in Python.
  const AttrValue* start = attr("start");
  const AttrValue* step = attr("step");
  bool short_range = n.op == "range" && start != nullptr && *start == AttrValue{int64_t{0}} &&
                     step != nullptr && *step == AttrValue{int64_t{1}};
  // from_tensors/from_tensor_slices with a structure print one nested literal.
  std::optional<Structure> nested_literal;
  if (has_structure_attr(n.op)) {
    const auto* text = attr("structure") ? std::get_if<std::string>(attr("structure")) : nullptr;
    const auto* element = attr("element") ? std::get_if<Element>(attr("element")) : nullptr;
    if (text != nullptr && element != nullptr && !text->empty())
      if (auto s = Structure::parse(*text); s.ok() && s->flat_size() == element->size())
        nested_literal = std::move(*s);
  }
  for (const auto& spec : schema.attrs) {
    const AttrValue* v = attr(spec.name);
    if (v == nullptr)
      continue; // a malformed node; check_node_schema reports it, printing stays best-effort
    if (short_range && spec.name == "start")
      continue;
    if (nested_literal && spec.name == "structure")
      continue;
    if (nested_literal && spec.name == "element") {
      separator();
      out += to_string(std::get<Element>(*v), *nested_literal);
      continue;
    }
    if (!spec.default_value) {
      separator();
      print_value(n.op, spec.name, *v, out);
    } else if (!(*v == *spec.default_value)) {
      separator();
      out += spec.name + "=";
      print_value(n.op, spec.name, *v, out);
    }
  }
}

void print_node(const Node& n, std::string& out) {
  const OpSchema* schema = find_op_schema(n.op);
  bool is_transform =
    schema != nullptr && schema->num_inputs == 1 && n.inputs.size() == 1 && n.inputs[0];
  // a.concatenate(b): the first input is the receiver, the second the one argument.
  bool is_binary = schema != nullptr && schema->num_inputs == OpSchema::kBinary &&
                   n.inputs.size() == 2 && n.inputs[0] && n.inputs[1];
  if (is_transform || is_binary) {
    print_node(*n.inputs[0], out);
    out += '.';
  }
  out += n.op + "(";
  if (is_binary) {
    print_node(*n.inputs[1], out);
    out += ')';
    return;
  }
  if (!is_transform) {
    // Sources have no inputs; zip's inputs are its arguments.
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      out += i > 0 ? ", " : "";
      if (n.inputs[i])
        print_node(*n.inputs[i], out);
    }
  }
  if (schema != nullptr)
    print_arguments(n, *schema, is_transform || n.inputs.empty(), out);
  out += ')';
}

// ------------------------------------------------------------------------------- parsing

// Levenshtein distance, for "did you mean" hints.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean `batch`?)" when a candidate is close enough, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  return best ? " (did you mean `" + *best + "`?)" : "";
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& s : all_op_schemas())
    names.push_back(s.name);
  return names;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Converts one argument value to the attribute kind its schema asks for.
Expected<AttrValue> attr_from_value(const std::string& op, const AttrSpec& spec,
                                    const TextValue& v) {
  std::string what = "argument `" + spec.name + "` of `" + op + "`";
  auto wrong = [&](const char* expected) {
    return syntax_error(v.column, what + " expects " + expected + ", found " + describe(v));
  };
  switch (spec.kind) {
    case AttrKind::int64: {
      if (v.kind == Kind::identifier) {
        if (const NamedConstant* c = find_constant(v.text)) {
          if (!constant_applies(*c, op, spec.name))
            return syntax_error(v.column, "`" + v.text + "` is not a valid value for " + what);
          return AttrValue{c->value};
        }
      }
      if (v.kind != Kind::integer)
        return wrong("an int");
      auto i = text::int64_from_value(v);
      if (!i.ok())
        return i.status();
      return AttrValue{*i};
    }
    case AttrKind::boolean:
      if (v.kind != Kind::boolean)
        return wrong("`true` or `false`");
      return AttrValue{v.boolean};
    case AttrKind::float64: {
      if (v.kind != Kind::integer && v.kind != Kind::floating)
        return wrong("a number");
      auto d = text::double_from_value(v);
      if (!d.ok())
        return d.status();
      return AttrValue{*d};
    }
    case AttrKind::string:
      if (v.kind != Kind::string)
        return wrong("a string");
      return AttrValue{v.text};
    case AttrKind::int64_list: {
      if (v.kind != Kind::list)
        return wrong("a list of ints");
      std::vector<int64_t> out;
      for (const auto& item : v.items) {
        if (item.kind != Kind::integer)
          return syntax_error(item.column,
                              what + " expects a list of ints, found " + describe(item) + " in it");
        auto i = text::int64_from_value(item);
        if (!i.ok())
          return i.status();
        out.push_back(*i);
      }
      return AttrValue{std::move(out)};
    }
    case AttrKind::string_list: {
      // A single file name is accepted too, as tf.data's file datasets do.
      if (v.kind == Kind::string)
        return AttrValue{std::vector<std::string>{v.text}};
      if (v.kind != Kind::list)
        return wrong("a list of strings");
      std::vector<std::string> out;
      for (const auto& item : v.items) {
        if (item.kind != Kind::string)
          return syntax_error(item.column, what + " expects a list of strings, found " +
                                             describe(item) + " in it");
        out.push_back(item.text);
      }
      return AttrValue{std::move(out)};
    }
    case AttrKind::element: {
      auto e = text::element_from_value(v);
      if (!e.ok())
        return e.status();
      if (op == "padded_batch" && spec.name == "padded_shapes")
        return AttrValue{canonical_padded_shapes(std::move(*e))};
      return AttrValue{std::move(*e)};
    }
    case AttrKind::function: {
      if (v.kind != Kind::identifier && v.kind != Kind::call)
        return wrong("a function such as `square` or `scale(factor=2.5)`");
      auto f = text::function_from_value(v);
      if (!f.ok())
        return f.status();
      return AttrValue{std::move(*f)};
    }
  }
  return internal_error("unknown attribute kind");
}

// The schema attributes that positional arguments fill, in order. range(n) means stop = n.
std::vector<const AttrSpec*> positional_slots(const OpSchema& schema, std::size_t num_positional) {
  std::vector<const AttrSpec*> slots;
  for (const auto& spec : schema.attrs)
    slots.push_back(&spec);
  if (schema.name == "range" && num_positional == 1)
    slots.erase(slots.begin()); // skip `start`
  return slots;
}

// Fills node.attrs from the call's arguments, then every omitted attribute with its default.
Status bind_arguments(const OpSchema& schema, const TextValue& call, Node& node) {
  std::size_t num_positional = 0;
  for (const auto& arg : call.args)
    num_positional += arg.keyword.empty() ? 1 : 0;
  std::vector<const AttrSpec*> slots = positional_slots(schema, num_positional);
  std::vector<std::string> names;
  for (const auto& spec : schema.attrs)
    names.push_back(spec.name);

  std::size_t next_slot = 0;
  bool seen_keyword = false;
  for (const TextArg& arg : call.args) {
    const AttrSpec* spec = nullptr;
    int column = arg.value.column;
    if (arg.keyword.empty()) {
      if (seen_keyword)
        return syntax_error(column,
                            "positional argument after keyword arguments in `" + schema.name + "`");
      if (next_slot >= slots.size()) {
        if (schema.attrs.empty())
          return syntax_error(column, "`" + schema.name + "` takes no arguments");
        return syntax_error(column, "`" + schema.name + "` takes at most " +
                                      std::to_string(slots.size()) +
                                      " positional argument(s): " + join_names(names));
      }
      spec = slots[next_slot++];
    } else {
      seen_keyword = true;
      column = arg.keyword_column;
      auto it = std::find_if(schema.attrs.begin(), schema.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == arg.keyword; });
      if (it == schema.attrs.end()) {
        if (schema.attrs.empty())
          return syntax_error(column, "`" + schema.name + "` takes no arguments, found `" +
                                        arg.keyword + "`");
        return syntax_error(column, "`" + schema.name + "` has no argument `" + arg.keyword + "`" +
                                      did_you_mean(arg.keyword, names) + "; its arguments are " +
                                      join_names(names));
      }
      spec = &*it;
    }
    if (node.attrs.count(spec->name) != 0)
      return syntax_error(column,
                          "argument `" + spec->name + "` of `" + schema.name + "` is given twice");
    if (spec->name == "element" && has_structure_attr(schema.name)) {
      // A nested literal: its leaves are the element, its nesting the `structure` attribute.
      auto nested = text::nested_element_from_value(arg.value);
      if (!nested.ok())
        return nested.status();
      if (!nested->structure.is_flat()) { // flat: no `structure` recorded
        if (node.attrs.count("structure") != 0)
          return syntax_error(column, "`" + schema.name +
                                        "` has a nested `element` and a `structure`; give one");
        node.attrs.emplace("structure", AttrValue{nested->structure.to_string()});
      }
      node.attrs.emplace(spec->name, AttrValue{std::move(nested->element)});
      continue;
    }
    auto value = attr_from_value(schema.name, *spec, arg.value);
    if (!value.ok())
      return value.status();
    node.attrs.emplace(spec->name, std::move(*value));
  }

  if (schema.name == "range" && node.attrs.count("start") == 0 && node.attrs.count("stop") != 0)
    node.attrs.emplace("start", AttrValue{int64_t{0}});
  for (const auto& spec : schema.attrs) {
    if (node.attrs.count(spec.name) != 0)
      continue;
    if (!spec.default_value)
      return syntax_error(call.column, "`" + schema.name + "` is missing its required argument `" +
                                         spec.name + "`");
    node.attrs.emplace(spec.name, *spec.default_value);
  }
  return Status::OK();
}

Expected<NodePtr> dataset_from_value(const TextValue& v);

Expected<NodePtr> zip_from_call(const OpSchema& schema, const TextValue& call) {
  auto node = std::make_shared<Node>();
  node->op = schema.name;
  for (const TextArg& arg : call.args) {
    if (!arg.keyword.empty())
      return syntax_error(arg.keyword_column, "`" + schema.name +
                                                "` takes only datasets, found keyword `" +
                                                arg.keyword + "`");
    auto input = dataset_from_value(arg.value);
    if (!input.ok())
      return input.status();
    node->inputs.push_back(std::move(*input));
  }
  if (node->inputs.empty())
    return syntax_error(call.column,
                        "`" + schema.name +
                          "` needs at least one dataset, as in zip(range(3), range(3))");
  return NodePtr{std::move(node)};
}

// a.concatenate(b): a method of its first dataset taking the second, as in tf.data.
Expected<NodePtr> binary_from_method(const OpSchema& schema, const TextValue& v) {
  const std::string usage = "range(3)." + schema.name + "(range(3, 6))";
  if (v.kind != Kind::method)
    return syntax_error(v.column, "`" + schema.name +
                                    "` follows its first dataset and takes the second, as in " +
                                    usage);
  if (v.args.size() != 1 || !v.args[0].keyword.empty())
    return syntax_error(v.column,
                        "`" + schema.name + "` takes exactly one dataset, as in " + usage);
  auto node = std::make_shared<Node>();
  node->op = schema.name;
  for (const TextValue* input : {&v.items.front(), &v.args[0].value}) {
    auto parsed = dataset_from_value(*input);
    if (!parsed.ok())
      return parsed.status();
    node->inputs.push_back(std::move(*parsed));
  }
  return NodePtr{std::move(node)};
}

Expected<NodePtr> dataset_from_value(const TextValue& v) {
  if (v.kind != Kind::call && v.kind != Kind::method)
    return syntax_error(v.column,
                        "expected a dataset (a source such as range(10), or zip(...)), found " +
                          describe(v));
  const OpSchema* schema = find_op_schema(v.text);
  if (schema == nullptr)
    return syntax_error(v.column, "unknown dataset op `" + v.text + "`" +
                                    did_you_mean(v.text, op_names()) +
                                    "; known ops: " + join_names(op_names()));
  if (schema->num_inputs == OpSchema::kBinary)
    return binary_from_method(*schema, v);
  bool is_transform = schema->num_inputs == 1;
  if (v.kind == Kind::call && is_transform)
    return syntax_error(v.column,
                        "`" + v.text +
                          "` is a transform: write it after its input dataset, as in range(10)." +
                          v.text + "(...)");
  if (v.kind == Kind::method && !is_transform)
    return syntax_error(
      v.column, "`" + v.text +
                  "` is not a transform, so it cannot follow `.`; write it as a call, as in " +
                  v.text + "(...)");
  if (schema->num_inputs == OpSchema::kVariadic)
    return zip_from_call(*schema, v);

  auto node = std::make_shared<Node>();
  node->op = schema->name;
  if (is_transform) {
    auto input = dataset_from_value(v.items.front());
    if (!input.ok())
      return input.status();
    node->inputs.push_back(std::move(*input));
  }
  CONVEYOR_RETURN_IF_ERROR(bind_arguments(*schema, v, *node));
  // The binding above follows the schema, so this only catches a bug in it.
  Status st = check_node_schema(*node);
  if (!st.ok())
    return internal_error("text form built an invalid node: " + st.message());
  return NodePtr{std::move(node)};
}

} // namespace

std::string to_text(const Dataset& dataset) {
  std::string out;
  if (dataset.node())
    print_node(*dataset.node(), out);
  return out;
}

Expected<Dataset> parse_dataset(std::string_view text) {
  auto value = text::parse_text_value(text);
  if (!value.ok())
    return value.status();
  auto node = dataset_from_value(*value);
  if (!node.ok())
    return node.status();
  return Dataset{std::move(*node)};
}

Expected<Element> parse_element(std::string_view text) {
  auto value = text::parse_text_value(text);
  if (!value.ok())
    return value.status();
  return text::element_from_value(*value);
}

} // namespace conveyor
