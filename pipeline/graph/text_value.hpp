// The syntax tree of the pipeline text form (text_form.hpp), before it means anything:
// one recursive-descent parser turns text into TextValues, and text_form.cpp / text_element.cpp
// then read datasets, element literals and function references out of them. Keeping the two
// steps apart lets every argument error name what was found ("expects an int, got a string").
//
// Grammar (columns in errors are 1-based byte positions in the text):
//   value   := primary ( '.' NAME '(' args ')' )*          method chain (dataset transforms)
//   primary := INT | FLOAT | '-' (INT | FLOAT | inf | nan) | STRING | true | false | inf | nan
//            | NAME | NAME '(' args ')'                     name: function, constant; call: source,
//            | '[' [value (',' value)* [',']] ']'             zip, cast or function with params
//            | '(' ')' | '(' value ')' | '(' value ',' [value (',' value)* [',']] ')'   tuples
//            | '{' [STRING ':' value (',' STRING ':' value)* [',']] '}'       dicts (nested elements)
//   args    := [arg (',' arg)* [',']]      arg := [NAME '='] value
//   INT     := [0-9]+      FLOAT := [0-9]+ ('.' [0-9]+)? ([eE] [+-]? [0-9]+)?  (with '.' or exponent)
//   STRING  := "..." or '...' with escapes \\ \" \' \n \t \r \0 \xHH
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/tensor/element.hpp"
#include "pipeline/graph/graph.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::text {

// Limits that keep every recursion within the stack (also under AddressSanitizer, whose frames
// are several times larger): brackets, parentheses and calls may nest kMaxNesting deep (the
// parser recurses on them), and a whole expression, each transform of a method chain counting
// one level, may be kMaxDepth deep (the walks over the tree and over the graph recurse on it).
inline constexpr int kMaxNesting = 100;
inline constexpr int kMaxDepth = 1000;

struct TextArg;

struct TextValue {
  enum class Kind {
    integer,
    floating,
    boolean,
    string,
    identifier,
    list,
    tuple,
    dict,
    call,
    method
  };
  Kind kind = Kind::integer;
  int column = 0;   // where the value starts; for a method, where its name starts
  std::string text; // number as spelled (with '-'), decoded string, or the name
  bool boolean = false;
  std::vector<TextValue> items;  // list / tuple entries, dict values; for a method, items[0] is
                                 // the receiver
  std::vector<std::string> keys; // dict keys, one per item, in source order
  std::vector<TextArg> args;     // call / method arguments in source order
  int depth = 1;                 // 1 + the depth of the deepest child
};

struct TextArg {
  std::string keyword; // empty for a positional argument
  int keyword_column = 0;
  TextValue value;
};

// Parses exactly one value spanning all of `text` (trailing text is an error).
Expected<TextValue> parse_text_value(std::string_view text);

// "column 7: <message>" as an invalid_argument Status.
Status syntax_error(int column, const std::string& message);

// How an error names a value: "an int `3`", "a string", "a list", "the name `foo`", ...
std::string describe(const TextValue& v);

// --- Reading literals out of values (text_element.cpp). Errors carry the value's column.

// An element literal: a tuple gives one component per entry, anything else one component.
Expected<Element> element_from_value(const TextValue& v);
// A nested element literal (from_tensors({"a": 1, "b": (2, "x")})): tuples of tuples and dicts
// with string keys; the leaves become the flat components in flatten order (dict keys sorted).
struct NestedElement {
  Element element;
  Structure structure;
};
Expected<NestedElement> nested_element_from_value(const TextValue& v);
// One tensor literal: 3, 2.5, "a", [[1, 2], [3, 4]], or a cast such as int32([1, 2]) or
// float32([], shape=[0, 3]).
Expected<Tensor> tensor_from_value(const TextValue& v);
// `square` (a name) or `scale(factor=2.5)` (a call with keyword parameters).
Expected<FunctionRef> function_from_value(const TextValue& v);
// An int literal as int64 (errors when it does not fit).
Expected<int64_t> int64_from_value(const TextValue& v);
// An int or float literal as a double.
Expected<double> double_from_value(const TextValue& v);

} // namespace conveyor::text
