// _conveyor: the Python binding of conveyor's public C++ API (include/conveyor/*.hpp and the
// pipeline Dataset builder). The pure-Python package `conveyor` (python/conveyor/) wraps it with
// tf.data service's names; this file only converts values and errors:
//   - a Status error becomes the Python exception class registered for its code (errors.py), with
//     the same message text;
//   - an Element becomes numpy arrays that point into the received Tensor storage (no copy): the
//     arrays' base is one object that owns the C++ Element (numpy_convert.cpp);
//   - every wait (connect, start, next element) runs with the GIL released.
// No consumer logic here: iteration is ElementStream::next.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/client.hpp"
#include "conveyor/options.hpp"
#include "conveyor/server.hpp"
#include "conveyor/snapshot.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/graph/text_form.hpp"
#ifdef CONVEYOR_PYTHON_FUNCTIONS
#include "pipeline/functions/python/embedded_python.hpp"
#endif

#include "bench_stream.hpp"
#include "dataset_ops.hpp"
#include "nested.hpp"
#include "fork_bound.hpp"
#include "numpy_convert.hpp"
#include "py_stream.hpp"
#include "py_status.hpp"
#include "trainer_pipeline.hpp"

namespace py = pybind11;
using namespace conveyor;
using namespace conveyor_python;
using std::chrono::milliseconds;

namespace {

// code name ("invalid_argument") -> Python exception class; filled by conveyor/errors.py.
// Leaked on purpose: it must outlive every exception raised during interpreter shutdown.
py::dict* error_classes = nullptr;

void set_python_error(const Status& st) {
  PyObject* cls = PyExc_RuntimeError;
  if (error_classes != nullptr) {
    py::str key(to_string(st.code()));
    if (error_classes->contains(key))
      cls = (*error_classes)[key].ptr();
  }
  PyErr_SetString(cls, st.message().c_str());
}

// ---------------------------------------------------------------- functions

// A function reference: "square", or Function("scale", factor=2.5).
FunctionRef make_function(const std::string& name, const py::kwargs& params) {
  if (name.empty())
    raise(invalid_argument("function name must not be empty"));
  FunctionRef fn{name};
  for (auto [k, v] : params) {
    const auto key = k.cast<std::string>();
    if (py::isinstance<py::bool_>(v))
      fn.params[key] = v.cast<bool>();
    else if (py::isinstance<py::int_>(v))
      fn.params[key] = v.cast<int64_t>();
    else if (py::isinstance<py::float_>(v))
      fn.params[key] = v.cast<double>();
    else if (py::isinstance<py::str>(v))
      fn.params[key] = v.cast<std::string>();
    else
      raise(invalid_argument("parameter `" + key + "` of function " + name +
                             " must be a bool, int, float or str, got " +
                             std::string(py::str(py::type::of(v).attr("__name__")))));
  }
  return fn;
}

// The function argument of map/filter/flat_map: a registered function (a Function or its name),
// or Python code (a callable, or "package.module:function"), which conveyor/_pyfunc.py turns into
// a reference to the `python*` functions that run it on the workers.
// `processes` (map's num_parallel_calls when above 1, or AUTOTUNE) runs Python code in a pool of
// interpreter processes on the worker.
FunctionRef function_arg(py::handle fn, const char* op, int64_t processes = 0,
                         const Dataset* input = nullptr) {
  if (py::isinstance<FunctionRef>(fn))
    return fn.cast<FunctionRef>();
  if (py::isinstance<py::str>(fn)) {
    auto name = fn.cast<std::string>();
    if (name.find(':') == std::string::npos)
      return FunctionRef{std::move(name)};
  }
  py::object sample =
    input != nullptr && PyCallable_Check(fn.ptr()) ? trace_sample(*input) : py::none();
  return py::module_::import("conveyor._pyfunc")
    .attr("python_function")(fn, op, processes, sample)
    .cast<FunctionRef>();
}

std::string function_repr(const FunctionRef& fn) {
  // The text form of a function reference: the form map(...) takes in the text form.
  auto text = Dataset::range(0).map(fn).to_text();
  const auto open = text.find(".map(");
  return "Function(" + text.substr(open + 5, text.size() - open - 6) + ")";
}

int64_t opt_or(const std::optional<int64_t>& v, int64_t fallback) { return v ? *v : fallback; }

// In-process servers, bound to the process that started them (see ForkBound).
class PyDispatchServer : public DispatchServer, public ForkBound {
public:
  using DispatchServer::DispatchServer;
};
class PyWorkerServer : public WorkerServer, public ForkBound {
public:
  using WorkerServer::WorkerServer;
};

// start/stop/join of a server; in a forked child, the parent's server cannot start or be joined
// and stopping it does nothing (the parent stops it).
template <class Server>
void bind_server_control(py::class_<Server, GilFreeHolder<Server>>& cls, const char* name) {
  const std::string what = std::string{"this "} + name;
  cls
    .def("start",
         [what](Server& s) {
           if (s.inherited())
             raise(crossed_fork(what));
           Status st;
           {
             py::gil_scoped_release release;
             st = s.start();
           }
           check(st);
         })
    .def("stop",
         [](Server& s) {
           if (s.inherited())
             return;
           py::gil_scoped_release release;
           s.stop();
         })
    .def("join", [what](Server& s) {
      if (s.inherited())
        raise(crossed_fork(what));
      py::gil_scoped_release release;
      s.join();
    });
}

py::dict save_result_dict(const SaveResult& r) {
  py::dict d;
  d["chunks"] = r.chunks;
  d["elements"] = r.elements;
  d["bytes"] = r.bytes;
  return d;
}

Client connect(const std::string& service, int64_t connect_timeout_ms) {
  ClientConfig config;
  config.connect_timeout = milliseconds{connect_timeout_ms};
  py::gil_scoped_release release;
  return unwrap(Client::connect(service, config));
}

DistributeOptions
make_options(const std::string& processing_mode, std::optional<std::string> job_name,
             std::optional<int64_t> consumer_index, std::optional<int64_t> num_consumers,
             std::optional<int64_t> max_outstanding_requests, const std::string& compression,
             const std::string& target_workers, std::optional<int64_t> max_buffered_bytes,
             std::optional<int64_t> request_timeout_ms, std::optional<int64_t> expected_consumers,
             std::optional<std::string> on_worker_loss, int64_t iteration,
             std::optional<std::string> data_transfer_protocol, const std::string& tenant,
             int64_t tenant_weight, std::optional<std::string> external_state_policy,
             std::optional<std::string> resume_from, bool deterministic,
             std::optional<int64_t> deterministic_hold_bytes) {
  DistributeOptions o;
  o.deterministic = deterministic;
  if (deterministic_hold_bytes && !deterministic) // (not accepted and ignored)
    raise(invalid_argument("`deterministic_hold_bytes` is used only with `deterministic=True`"));
  if (deterministic_hold_bytes) // (validate() refuses < 1, naming it)
    o.deterministic_hold_bytes = *deterministic_hold_bytes;
  auto policy = parse_processing_mode(processing_mode);
  if (!policy.ok())
    raise(Status(policy.status().code(), "`processing_mode`: " + policy.status().message()));
  o.policy = *policy;
  o.job_name = std::move(job_name);
  o.consumer_index = consumer_index;
  o.num_consumers = num_consumers;
  o.expected_consumers = expected_consumers;
  o.on_worker_loss = std::move(on_worker_loss);
  o.data_transfer_protocol = std::move(data_transfer_protocol);
  o.external_state_policy = std::move(external_state_policy);
  o.resume_from = std::move(resume_from);
  o.iteration = iteration;
  o.tenant = tenant;
  o.tenant_weight = tenant_weight;
  o.max_outstanding_requests = max_outstanding_requests;
  o.compression = compression;
  o.target_workers = target_workers;
  if (max_buffered_bytes)
    o.max_buffered_bytes = *max_buffered_bytes;
  if (request_timeout_ms)
    o.request_timeout = milliseconds{*request_timeout_ms};
  check(validate(o));
  return o;
}

} // namespace

PYBIND11_MODULE(_conveyor, m) {
  m.doc() = "conveyor's C++ client and servers (use the `conveyor` package, not this module)";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const StatusError& e) {
      set_python_error(e.status);
    }
  });
  m.def("_set_error_classes", [](py::dict classes) {
    if (error_classes == nullptr)
      error_classes = new py::dict();
    error_classes->clear();
    for (auto [k, v] : classes)
      (*error_classes)[k] = v;
  });
  m.def("_raise_status", [](const std::string& code, const std::string& message) {
    // Test hook: raises the exception a Status with this code name maps to.
    for (int c = 1; c <= static_cast<int>(ErrorCode::resource_exhausted); ++c)
      if (code == to_string(static_cast<ErrorCode>(c)))
        raise(Status(static_cast<ErrorCode>(c), message));
    raise(invalid_argument("unknown error code " + code));
  });
  m.attr("AUTOTUNE") = kAutotune;
  m.attr("INFINITE_CARDINALITY") = kInfiniteCardinality;
  m.attr("UNKNOWN_CARDINALITY") = kUnknownCardinality;
  m.attr("_ElementOwner") = py::handle(reinterpret_cast<PyObject*>(element_owner_type()));
  pthread_atfork(nullptr, nullptr, &after_fork_in_child);
#ifdef CONVEYOR_PYTHON_FUNCTIONS
  // In-process workers run Python functions in this interpreter (their pipeline threads take
  // the GIL; every wait here releases it).
  python::install_embedded_python();
#endif

  // --- functions and datasets
  m.def(
    "load_plugin",
    [](const std::string& path) {
      Status st;
      {
        py::gil_scoped_release release;
        st = FunctionRegistry::global().load_plugin(path);
      }
      check(st);
    },
    py::arg("path"),
    "Loads dataset functions from a plugin shared library into this process's registry (as\n"
    "`conveyor worker --plugin` does), so datasets naming them validate here.");
  m.def(
    "function_names", [] { return FunctionRegistry::global().names(); },
    "The names of the functions datasets can use in this process.");
  py::class_<FunctionRef>(m, "Function",
                          "A registered function by name, with parameters: "
                          "Function(\"scale\", factor=2.5)")
    .def(py::init(
           [](const std::string& name, py::kwargs params) { return make_function(name, params); }),
         py::arg("name"))
    .def_readonly("name", &FunctionRef::name)
    .def("__repr__", &function_repr)
    .def("__eq__", [](const FunctionRef& a, const FunctionRef& b) { return a == b; });
  py::implicitly_convertible<py::str, FunctionRef>();

  py::class_<Dataset> ds(m, "Dataset",
                         "A tf.data-style pipeline definition, run by the service's workers.");
  ds.def_static(
      "range", [](int64_t stop) { return Dataset::range(stop); }, py::arg("stop"))
    .def_static(
      "range",
      [](int64_t start, int64_t stop, int64_t step) {
        if (step == 0)
          raise(invalid_argument("`step` must not be 0"));
        return Dataset::range(start, stop, step);
      },
      py::arg("start"), py::arg("stop"), py::arg("step") = 1)
    .def_static(
      "from_tensors",
      [](py::object v) {
        NestedElement nested = nested_from_python(v, "from_tensors");
        return Dataset::from_tensors(std::move(nested.element), nested.structure);
      },
      py::arg("tensors"))
    .def_static(
      "from_tensor_slices",
      [](py::object v) {
        NestedElement nested = nested_from_python(v, "from_tensor_slices");
        check_slice_lengths(nested);
        return Dataset::from_tensor_slices(std::move(nested.element), nested.structure);
      },
      py::arg("tensors"))
    .def_static(
      "list_files",
      [](std::string pattern, bool shuffle, std::optional<int64_t> seed) {
        return Dataset::list_files(std::move(pattern), shuffle, opt_or(seed, kNoSeed));
      },
      py::arg("file_pattern"), py::arg("shuffle") = true, py::arg("seed") = py::none())
    .def_static("load", &Dataset::load, py::arg("path"), py::arg("wait") = false,
                "A snapshot written by conveyor.save / distributed_save / `conveyor save`.")
    .def_static(
      "webdataset",
      [](py::object filenames, std::vector<std::string> keys, std::string compression_type) {
        std::vector<std::string> files;
        if (py::isinstance<py::str>(filenames))
          files.push_back(filenames.cast<std::string>());
        else
          files = filenames.cast<std::vector<std::string>>();
        Dataset d =
          Dataset::webdataset(std::move(files), std::move(keys), std::move(compression_type));
        if (Status st = d.validate(); !st.ok())
          raise(st);
        return d;
      },
      py::arg("filenames"), py::arg("keys"), py::arg("compression_type") = "",
      "WebDataset tar shards: one dict per sample, {\"__key__\": str, EXT: bytes for EXT in keys}.")
    .def_static(
      "csv",
      [](py::object filenames, std::vector<std::string> column_types, bool header,
         std::string field_delim, std::string na_value,
         std::optional<std::vector<int64_t>> select_cols, py::object record_defaults,
         bool use_quote_delim, std::string compression_type) {
        std::vector<std::string> files;
        if (py::isinstance<py::str>(filenames))
          files.push_back(filenames.cast<std::string>());
        else
          files = filenames.cast<std::vector<std::string>>();
        // record_defaults: None (every column required) or one entry per column, None for a
        // required one (tf.data's dtype entry), else the default.
        Element defaults;
        if (!record_defaults.is_none())
          for (py::handle entry : record_defaults)
            defaults.components.push_back(entry.is_none()
                                            ? Tensor::vector<int64_t>({})
                                            : tensor_from_python(entry, "csv `record_defaults`"));
        Dataset d =
          Dataset::csv(std::move(files), std::move(column_types), header, std::move(field_delim),
                       std::move(na_value), select_cols.value_or(std::vector<int64_t>{}),
                       std::move(defaults), use_quote_delim, std::move(compression_type));
        if (Status st = d.validate(); !st.ok())
          raise(st);
        return d;
      },
      py::arg("filenames"), py::arg("column_types"), py::arg("header") = false,
      py::arg("field_delim") = ",", py::arg("na_value") = "", py::arg("select_cols") = py::none(),
      py::arg("record_defaults") = py::none(), py::arg("use_quote_delim") = true,
      py::arg("compression_type") = "",
      "CSV/TSV records as tf.data's CsvDataset: one scalar per column of type column_types[i] "
      "(\"int32\", \"int64\", \"float32\", \"float64\", \"string\"). Files may be http(s) URLs.")
    .def_static("source", &Dataset::source, py::arg("fn"))
    .def_static("zip",
                [](py::args args) {
                  // zip(a, b) or tf.data's zip((a, b))
                  py::sequence items = args;
                  if (args.size() == 1 &&
                      (py::isinstance<py::tuple>(args[0]) || py::isinstance<py::list>(args[0])))
                    items = py::reinterpret_borrow<py::sequence>(args[0]);
                  std::vector<Dataset> inputs;
                  for (py::handle h : items)
                    inputs.push_back(h.cast<Dataset>());
                  if (inputs.empty())
                    raise(invalid_argument("zip needs at least one dataset"));
                  return Dataset::zip(std::move(inputs));
                })
    .def_static(
      "from_text", [](const std::string& text) { return unwrap(parse_dataset(text)); },
      py::arg("text"), "Parses the pipeline text form, e.g. \"range(10).map(square).batch(4)\".")
    .def(
      "map",
      [](const Dataset& d, py::object fn, std::optional<int64_t> npc, bool det) {
        const int64_t parallel = opt_or(npc, 1);
        return d.map(function_arg(fn, "map", parallel == 1 ? 0 : parallel, &d), parallel, det);
      },
      py::arg("map_func"), py::arg("num_parallel_calls") = py::none(),
      py::arg("deterministic") = true,
      "map_func: a registered function (name or Function), any picklable Python callable, or\n"
      "\"package.module:function\"; Python code runs on the workers (docs/PYTHON.md).")
    .def(
      "filter",
      [](const Dataset& d, py::object fn) { return d.filter(function_arg(fn, "filter", 0, &d)); },
      py::arg("predicate"))
    .def(
      "flat_map",
      [](const Dataset& d, py::object fn) {
        return d.flat_map(function_arg(fn, "flat_map", 0, &d));
      },
      py::arg("map_func"))
    .def("batch", &Dataset::batch, py::arg("batch_size"), py::arg("drop_remainder") = false)
    .def("unbatch", &Dataset::unbatch)
    .def(
      "shuffle",
      [](const Dataset& d, int64_t buffer, std::optional<int64_t> seed, bool reshuffle) {
        return d.shuffle(buffer, opt_or(seed, kNoSeed), reshuffle);
      },
      py::arg("buffer_size"), py::arg("seed") = py::none(),
      py::arg("reshuffle_each_iteration") = true)
    .def(
      "repeat",
      [](const Dataset& d, std::optional<int64_t> count) {
        return d.repeat(opt_or(count, kRepeatForever));
      },
      py::arg("count") = py::none())
    .def("take", &Dataset::take, py::arg("count"))
    .def("skip", &Dataset::skip, py::arg("count"))
    .def("shard", &Dataset::shard, py::arg("num_shards"), py::arg("index"))
    .def("enumerate", &Dataset::enumerate, py::arg("start") = 0)
    .def("prefetch", &Dataset::prefetch, py::arg("buffer_size") = kAutotune)
    .def("cache", &Dataset::cache, py::arg("filename") = "")
    .def(
      "apply", [](const Dataset& d, py::function fn) { return fn(d); },
      py::arg("transformation_func"))
    .def(
      "validate", [](const Dataset& d) { check(d.validate()); },
      "Checks the graph and that every function exists (raises ValueError / LookupError).")
    .def("cardinality", [](const Dataset& d) { return d.cardinality(); })
    .def_property_readonly("element_spec",
                           [](const Dataset& d) { return unwrap(d.element_spec()).to_string(); })
    .def("fingerprint", &Dataset::fingerprint)
    .def("to_text", &Dataset::to_text)
    .def("__str__", &Dataset::to_text)
    .def("__repr__",
         [](const Dataset& d) {
           return "Dataset.from_text(" + std::string(py::repr(py::str(d.to_text()))) + ")";
         })
    .def("__eq__", [](const Dataset& a, const Dataset& b) { return a == b; })
    .def("__hash__", [](const Dataset& d) { return py::hash(py::str(d.fingerprint())); })
    .def(
      "_collect",
      [](const Dataset& d, int64_t limit) {
        // Runs the pipeline here, in this process (tf.data's as_numpy_iterator, eagerly).
        std::vector<Element> elements;
        {
          py::gil_scoped_release release;
          elements = unwrap(d.collect(limit));
        }
        const std::shared_ptr<const Structure> structure = structure_of(d);
        py::list out;
        for (auto& e : elements)
          out.append(element_to_python(std::move(e), structure.get()));
        return out;
      },
      py::arg("limit") = -1)
    .def(py::pickle([](const Dataset& d) { return py::make_tuple(d.to_text()); },
                    [](py::tuple t) { return unwrap(parse_dataset(t[0].cast<std::string>())); }));
  conveyor_python::bind_dataset_ops(ds);

  // --- servers
  py::class_<PyDispatchServer, GilFreeHolder<PyDispatchServer>> dispatch_server(m,
                                                                                "_DispatchServer");
  bind_server_control(dispatch_server, "DispatchServer");
  dispatch_server
    .def(
      py::init([](uint16_t port, std::string bind_host, std::string work_dir,
                  int64_t worker_timeout_ms, int64_t job_gc_timeout_ms, int64_t range_split_size,
                  std::vector<std::string> allowed_paths, std::vector<std::string> snapshot_reuse,
                  std::map<std::string, int64_t> tenant_max_workers,
                  std::map<std::string, int64_t> tenant_max_buffer_bytes) {
        DispatcherConfig c;
        c.tenant_max_workers = std::move(tenant_max_workers); // checked by start(): ValueError
        c.tenant_max_buffer_bytes = std::move(tenant_max_buffer_bytes);
        c.port = port;
        c.bind_host = std::move(bind_host);
        c.work_dir = std::move(work_dir);
        c.worker_timeout = milliseconds{worker_timeout_ms};
        c.job_gc_timeout = milliseconds{job_gc_timeout_ms};
        c.range_split_size = range_split_size;
        c.allowed_paths = std::move(allowed_paths);
        c.snapshot_reuse = std::move(snapshot_reuse);
        return new PyDispatchServer(std::move(c));
      }),
      py::arg("port"), py::arg("bind_host"), py::arg("work_dir"), py::arg("worker_timeout_ms"),
      py::arg("job_gc_timeout_ms"), py::arg("range_split_size"), py::arg("allowed_paths"),
      py::arg("snapshot_reuse"), py::arg("tenant_max_workers"), py::arg("tenant_max_buffer_bytes"))
    .def_property_readonly("bound_port", [](const PyDispatchServer& s) { return s.bound_port(); })
    .def_property_readonly("target", [](const PyDispatchServer& s) { return s.target(); });

  py::class_<PyWorkerServer, GilFreeHolder<PyWorkerServer>> worker_server(m, "_WorkerServer");
  bind_server_control(worker_server, "WorkerServer");
  worker_server
    .def(
      py::init([](std::string dispatcher_address, uint16_t port, std::string bind_host,
                  std::string advertised_address, int64_t heartbeat_interval_ms,
                  std::vector<std::string> plugins, int64_t task_buffer_elements,
                  int64_t task_buffer_bytes, int64_t connect_timeout_ms,
                  std::vector<std::string> allowed_paths, int64_t job_memory_limit,
                  std::vector<std::string> worker_tags, int64_t max_concurrent_snapshots) {
        WorkerConfig c;
        c.dispatcher_address = std::move(dispatcher_address);
        c.port = port;
        c.bind_host = std::move(bind_host);
        c.advertised_address = std::move(advertised_address);
        c.heartbeat_interval = milliseconds{heartbeat_interval_ms};
        c.plugins = std::move(plugins);
        c.task_buffer_elements = task_buffer_elements;
        c.task_buffer_bytes = task_buffer_bytes;
        // tf.data's dispatcher_timeout_ms: how long start() waits for the dispatcher in all (the
        // worker retries within it), and so also the bound of one attempt.
        c.connect_timeout = milliseconds{connect_timeout_ms};
        c.dispatcher_timeout = milliseconds{connect_timeout_ms};
        c.allowed_paths = std::move(allowed_paths);
        c.job_memory_limit = job_memory_limit;
        c.worker_tags = std::move(worker_tags); // validated by start(): ValueError naming the tag
        c.max_concurrent_snapshots = max_concurrent_snapshots; // 0 = no limit (checked in Python)
        return new PyWorkerServer(std::move(c));
      }),
      py::arg("dispatcher_address"), py::arg("port"), py::arg("bind_host"),
      py::arg("advertised_address"), py::arg("heartbeat_interval_ms"), py::arg("plugins"),
      py::arg("task_buffer_elements"), py::arg("task_buffer_bytes"), py::arg("connect_timeout_ms"),
      py::arg("allowed_paths"), py::arg("job_memory_limit"), py::arg("worker_tags"),
      py::arg("max_concurrent_snapshots"))
    .def_property_readonly("bound_port", [](const PyWorkerServer& s) { return s.bound_port(); })
    .def_property_readonly("worker_address",
                           [](const PyWorkerServer& s) { return s.worker_address(); });

  // --- the consumer API
  py::class_<DistributeOptions>(m, "_Options");
  m.def("_make_options", &make_options, py::arg("processing_mode"), py::arg("job_name"),
        py::arg("consumer_index"), py::arg("num_consumers"), py::arg("max_outstanding_requests"),
        py::arg("compression"), py::arg("target_workers"), py::arg("max_buffered_bytes"),
        py::arg("request_timeout_ms"), py::arg("expected_consumers") = py::none(),
        py::arg("on_worker_loss") = py::none(), py::arg("iteration") = 0,
        py::arg("data_transfer_protocol") = py::none(), py::arg("tenant") = "default",
        py::arg("tenant_weight") = 1, py::arg("external_state_policy") = py::none(),
        py::arg("resume_from") = py::none(), py::arg("deterministic") = false,
        py::arg("deterministic_hold_bytes") = py::none());
  m.attr("_NEXT_ITERATION") = kNextIteration;
  m.def("_validate_address",
        [](const std::string& a) { return unwrap(parse_address(a)).to_string(); });

  bind_stream(m);
  bind_trainer_pipeline(m);

  m.def("_spec_of_result", &spec_of_result);
  m.def("_register_dataset", [](const std::string& service, const Dataset& dataset,
                                const std::string& compression,
                                std::optional<std::string> dataset_id, int64_t connect_timeout_ms,
                                std::optional<std::string> external_state_policy) {
    auto client = connect(service, connect_timeout_ms);
    py::gil_scoped_release release;
    return unwrap(client.register_dataset(dataset, compression, dataset_id, external_state_policy));
  });
  m.def("_distribute", [](const std::string& service, const Dataset& dataset,
                          const DistributeOptions& options, int64_t connect_timeout_ms) {
    auto client = connect(service, connect_timeout_ms);
    std::optional<ElementStream> stream;
    {
      py::gil_scoped_release release;
      stream.emplace(unwrap(client.distribute(dataset, options)));
    }
    return GilFreeHolder<PyStream>(new PyStream(std::move(*stream), structure_of(dataset)));
  });
  m.def("_from_dataset_id", [](const std::string& service, const std::string& dataset_id,
                               const DistributeOptions& options, int64_t connect_timeout_ms) {
    auto client = connect(service, connect_timeout_ms);
    std::optional<ElementStream> stream;
    std::shared_ptr<const Structure> structure;
    {
      py::gil_scoped_release release;
      stream.emplace(unwrap(client.from_dataset_id(dataset_id, options)));
      // The reader has no dataset in hand: the elements are re-nested with the registered
      // dataset's structure, which the dispatcher knows (tf.data fetches the element spec too).
      auto spec = unwrap(client.element_spec(dataset_id));
      if (spec.structure)
        structure = std::make_shared<const Structure>(*spec.structure);
    }
    return GilFreeHolder<PyStream>(new PyStream(std::move(*stream), std::move(structure)));
  });
  // Snapshots (include/conveyor/snapshot.hpp): the GIL is free while the pipeline runs.
  m.def("_save", [](const Dataset& dataset, const std::string& path, SaveOptions options) {
    std::optional<Expected<SaveResult>> result;
    {
      py::gil_scoped_release release;
      result.emplace(save(dataset, path, options));
    }
    return save_result_dict(unwrap(std::move(*result)));
  });
  m.def("_distributed_save",
        [](const std::string& service, const Dataset& dataset, const std::string& path,
           SaveOptions options, int64_t connect_timeout_ms) {
          auto client = connect(service, connect_timeout_ms);
          std::optional<Expected<SaveResult>> result;
          {
            py::gil_scoped_release release;
            result.emplace(distributed_save(client, dataset, path, options));
          }
          return save_result_dict(unwrap(std::move(*result)));
        });
  py::class_<SaveOptions>(m, "_SaveOptions")
    .def(py::init([](std::string compression, int64_t chunk_bytes, int64_t stall_timeout_ms) {
           return SaveOptions{std::move(compression), chunk_bytes,
                              std::chrono::milliseconds(stall_timeout_ms)};
         }),
         py::arg("compression"), py::arg("chunk_bytes"), py::arg("stall_timeout_ms") = 0);
  m.def("_bench_cpp_stream", &bench_cpp_stream, py::arg("service"), py::arg("dataset"),
        py::arg("options"), py::arg("warmup_s"), py::arg("seconds"), py::arg("two_step") = false);
}
