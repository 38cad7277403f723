// FunctionRegistry: the named C++ functions that map/filter/flat_map/interleave/source refer to
// (a FunctionRef in the graph is a name plus parameters). Workers get more functions from plugin
// shared libraries loaded with boost.dll: a plugin exports
//     extern "C" void conveyor_register_functions(conveyor::FunctionRegistry& registry);
// and registers its functions there.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "conveyor/dataset.hpp"
#include "conveyor/element.hpp"
#include "conveyor/graph.hpp"
#include "conveyor/iterator.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

enum class FunctionKind : unsigned char {
  map,       // Element -> Element                        (map)
  predicate, // Element -> bool                            (filter)
  dataset,   // Element -> Dataset                         (flat_map, interleave)
  source,    // Params -> Iterator                         (source)
};
const char* to_string(FunctionKind kind);

using MapFn = std::function<Expected<Element>(const Element&, const Params&)>;
using PredicateFn = std::function<Expected<bool>(const Element&, const Params&)>;
using DatasetFn = std::function<Expected<Dataset>(const Element&, const Params&)>;
using SourceFn = std::function<Expected<std::unique_ptr<Iterator>>(const Params&)>;
// Optional: the output spec of a map function given its input spec (for element_spec()).
// Without it, element_spec() of a map reports unknown rank for every component.
using SpecFn = std::function<Expected<ElementSpec>(const ElementSpec&, const Params&)>;

// Map functions that act on one component of an element (the image ops) declare the parameters
// `key` (string, default "") and `index` (int64, default -1): `key` names a top-level entry of a
// dict element, `index` a component of a tuple. Elements carry no structure at run time, so the
// map kernel resolves `key` against its input's element spec when it builds the pipeline and
// hands the function `index` instead (resolve_component_key).
Expected<std::size_t> component_of_key(const std::string& fn, const std::string& key,
                                       const Structure* structure);
// `params` with a non-empty `key` replaced by the `index` it names in `input`'s structure.
Expected<Params> resolve_component_key(const std::string& fn, Params params,
                                       const ElementSpec& input);

// How a source function's iterator saves its position (Iterator::save / restore, the checkpoints of
// conveyor/iterator_state.hpp: LocalPipeline::checkpoint, resumed snapshot streams).
enum class SourceCheckpoint : unsigned char {
  // The iterator's own save/restore: override them to write (and read back) what it holds between
  // two elements. Iterator's defaults refuse with failed_precondition, and the pipeline then
  // cannot save (the error names the function).
  iterator,
  // The source yields the same elements, in the same order, for the same parameters: a restore
  // makes a new iterator and passes over as many elements as the saved one had returned (cost:
  // re-reading them). One that then ends sooner fails with data_loss.
  skip_by_count,
};

struct ParamSpec {
  std::string name;
  Scalar default_value; // every parameter has a default; its kind fixes the accepted kind
};

struct FunctionDef {
  std::string name;
  FunctionKind kind;
  std::vector<ParamSpec> params;
  std::string doc; // one line, shown by `conveyor inspect --functions`
  MapFn map;
  PredicateFn predicate;
  DatasetFn dataset;
  SourceFn source;
  SpecFn
    output_spec; // map: output spec from input spec; dataset: spec of the returned datasets' elements
  ElementSpec source_spec; // source: spec of what it yields (may be empty = unknown)
  int64_t source_cardinality = kUnknownCardinality;
  SourceCheckpoint source_checkpoint = SourceCheckpoint::iterator; // source: see above
  // map: the calls a parallel map keeps in flight per unit of num_parallel_calls, for these
  // parameters (null: 1). More than 1 lets a function that queues calls (the Python pool: one
  // running and one waiting per process) start the next one without waiting for the map.
  std::function<int64_t(const Params&)> calls_per_parallel_call;
  // map, optional: starts a call without waiting for it when it can (the Python pool sends the
  // request: a process then always has its next one queued, without a thread blocked per
  // request); the returned function waits for the result. Null, or a null result: `map`.
  std::function<std::function<Expected<Element>()>(const Element&, const Params&)> map_start;
};

class FunctionRegistry {
public:
  // The process-wide registry, pre-filled with the built-in functions (builtin_functions.cpp).
  static FunctionRegistry& global();

  // Adds a function; already_exists if the name is taken.
  Status add(FunctionDef def);

  // nullptr when unknown.
  const FunctionDef* find(const std::string& name) const;
  std::vector<std::string> names() const;

  // Checks that `ref` names a function of kind `kind` and that every parameter in ref.params is
  // declared with the same kind of value. Messages name the function and parameter.
  Status check(const FunctionRef& ref, FunctionKind kind) const;
  // ref.params completed with the declared defaults.
  Params resolve_params(const FunctionRef& ref) const;

  // Loads a plugin shared library and lets it register its functions.
  Status load_plugin(const std::string& path);

private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const FunctionDef>> defs_;
};

} // namespace conveyor
