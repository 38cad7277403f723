// Python functions on the workers: the registry entries `python` (map), `python_filter`
// (predicate) and `python_flat_map` (dataset). Their parameters carry the user's function:
//   pickle    base64 of a cloudpickled callable (lambdas, closures), or
//   import    "package.module:function", imported on the worker;
//   qualname  how messages name it (the callable's qualified name).
// The entries exist in every build, so dispatchers and graph validation treat them like any other
// function; running one needs the process's PythonRuntime, which the embedded interpreter
// (pipeline/functions/python/) installs. Without it a call fails with "this worker was built
// without Python functions".
#pragma once

#include <functional>
#include <string>

#include "conveyor/dataset.hpp"
#include "conveyor/element.hpp"
#include "conveyor/graph.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

class FunctionRegistry;

inline constexpr const char* kPythonMapFunction = "python";
inline constexpr const char* kPythonFilterFunction = "python_filter";
inline constexpr const char* kPythonFlatMapFunction = "python_flat_map";

// Requests in flight per pool process of a map with `processes` > 1: the one it runs and the next,
// waiting in its socket (process_pool.hpp).
inline constexpr int kPoolDepth = 2;
// Calls the parallel map keeps per pool process: those and one more, queued in the worker until a
// reply frees a slot (the thread reading that reply copies and sends it while the process runs the
// next).
inline constexpr int kPoolCalls = kPoolDepth + 1;

class PythonRuntime {
public:
  virtual ~PythonRuntime() = default;
  virtual Expected<Element> map(const Element& in, const Params& params) = 0;
  // map's call in two halves when it can start without waiting (a pool map: the request is sent
  // now), else null; the result waits for the reply.
  virtual std::function<Expected<Element>()> start_map(const Element&, const Params&) {
    return nullptr;
  }
  virtual Expected<bool> predicate(const Element& in, const Params& params) = 0;
  virtual Expected<Dataset> dataset(const Element& in, const Params& params) = 0;
};

// The process's runtime; never destroyed once installed (nullptr: none).
void set_python_runtime(PythonRuntime* runtime);
PythonRuntime* python_runtime();

// True for the three names above.
bool is_python_function(const std::string& name);

Status register_python_functions(FunctionRegistry& registry);

} // namespace conveyor
