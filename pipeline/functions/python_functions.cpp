// The Python functions' registry entries: they forward to the installed PythonRuntime.
#include "pipeline/functions/python_functions.hpp"

#include <atomic>

#include "pipeline/functions/functions.hpp"
#include "pipeline/io/snapshot_files.hpp"

namespace conveyor {

namespace {

std::atomic<PythonRuntime*> installed_runtime{nullptr};

std::string described(const Params& params) {
  auto it = params.find("qualname");
  if (it != params.end() && std::holds_alternative<std::string>(it->second) &&
      !std::get<std::string>(it->second).empty())
    return " `" + std::get<std::string>(it->second) + "`";
  return "";
}

Expected<PythonRuntime*> runtime_for(const Params& params) {
  PythonRuntime* runtime = installed_runtime.load(std::memory_order_acquire);
  if (runtime == nullptr)
    return unimplemented("cannot run Python function" + described(params) +
                         ": this worker was built without Python functions (configure it "
                         "with python3-dev and pybind11-dev installed)");
  return runtime;
}

std::vector<ParamSpec> python_params() {
  return {{"pickle", std::string{}}, {"import", std::string{}}, {"qualname", std::string{}}};
}

} // namespace

void set_python_runtime(PythonRuntime* runtime) {
  installed_runtime.store(runtime, std::memory_order_release);
}

PythonRuntime* python_runtime() { return installed_runtime.load(std::memory_order_acquire); }

bool is_python_function(const std::string& name) {
  return name == kPythonMapFunction || name == kPythonFilterFunction ||
         name == kPythonFlatMapFunction;
}

Status register_python_functions(FunctionRegistry& registry) {
  FunctionDef map;
  map.name = kPythonMapFunction;
  map.kind = FunctionKind::map;
  map.params = python_params();
  // > 1 (or -1, AUTOTUNE): run in a pool of that many interpreter processes (Python's
  // Dataset.map sets it from num_parallel_calls), past the GIL of the worker's interpreter.
  map.params.push_back({"processes", int64_t{0}});
  // The output spec the client traced (snapshot_files.hpp's text, with the structure after
  // `|`; "" = not traced): the dtypes with unknown ranks, and how the result nests.
  map.params.push_back({"spec", std::string{}});
  map.output_spec = [](const ElementSpec& in, const Params& params) -> Expected<ElementSpec> {
    auto it = params.find("spec");
    const std::string* text = it == params.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (text == nullptr || text->empty()) {
      // Untraced: the input's dtypes, ranks unknown, flat (the function must return a flat
      // tuple then; the client's wrapper checks it).
      ElementSpec out = in;
      out.structure.reset();
      for (TensorSpec& c : out.components) {
        c.unknown_rank = true;
        c.shape.clear();
      }
      return out;
    }
    auto spec = snapshot::parse_spec_components(*text);
    if (!spec.ok())
      return spec.status().with_context("Python function" + described(params) + ": `spec`");
    return spec;
  };
  map.calls_per_parallel_call = [](const Params& params) -> int64_t {
    auto it = params.find("processes");
    const int64_t* processes = it == params.end() ? nullptr : std::get_if<int64_t>(&it->second);
    return processes != nullptr && (*processes > 1 || *processes == kAutotune) ? kPoolCalls : 1;
  };
  map.map_start = [](const Element& in,
                     const Params& params) -> std::function<Expected<Element>()> {
    PythonRuntime* runtime = python_runtime();
    return runtime == nullptr ? nullptr : runtime->start_map(in, params);
  };
  map.doc = "a Python callable (Dataset.map(fn) in Python): pickle=BASE64 or import=MOD:FN";
  map.map = [](const Element& in, const Params& params) -> Expected<Element> {
    auto runtime = runtime_for(params);
    if (!runtime.ok())
      return runtime.status();
    return (*runtime)->map(in, params);
  };
  CONVEYOR_RETURN_IF_ERROR(registry.add(std::move(map)));

  FunctionDef filter;
  filter.name = kPythonFilterFunction;
  filter.kind = FunctionKind::predicate;
  filter.params = python_params();
  filter.doc = "a Python predicate (Dataset.filter(fn) in Python): pickle=BASE64 or import=MOD:FN";
  filter.predicate = [](const Element& in, const Params& params) -> Expected<bool> {
    auto runtime = runtime_for(params);
    if (!runtime.ok())
      return runtime.status();
    return (*runtime)->predicate(in, params);
  };
  CONVEYOR_RETURN_IF_ERROR(registry.add(std::move(filter)));

  FunctionDef flat_map;
  flat_map.name = kPythonFlatMapFunction;
  flat_map.kind = FunctionKind::dataset;
  flat_map.params = python_params();
  flat_map.doc = "a Python function returning a Dataset or rows (Dataset.flat_map(fn) in "
                 "Python): pickle=BASE64 or import=MOD:FN";
  flat_map.dataset = [](const Element& in, const Params& params) -> Expected<Dataset> {
    auto runtime = runtime_for(params);
    if (!runtime.ok())
      return runtime.status();
    return (*runtime)->dataset(in, params);
  };
  return registry.add(std::move(flat_map));
}

} // namespace conveyor
