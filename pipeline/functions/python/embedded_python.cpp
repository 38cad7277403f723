// The embedded interpreter behind the Python functions (see the header). Every call takes the GIL
// on the calling pipeline thread; the loaded callables are cached under the GIL, keyed by their
// pickle or import string, so a function is unpickled once per process, not once per element.
#include "pipeline/functions/python/embedded_python.hpp"

#include <pybind11/pybind11.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <thread>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pipeline/functions/python/numpy_tensor.hpp"
#include "pipeline/functions/python/process_pool.hpp"
#include "pipeline/functions/python_functions.hpp"
#include "pipeline/graph/text_form.hpp"

namespace py = pybind11;

namespace conveyor::python {

namespace {

// A pipeline thread keeps one Python thread state between calls: without it PyGILState_Release
// deletes the state after every call and the next call makes a new one. Made only on a thread
// that does not hold the GIL (its constructor lets the GIL go); left alone once Python ends.
class KeptThreadState {
public:
  KeptThreadState() : state_(PyGILState_Ensure()), saved_(PyEval_SaveThread()) {}
  ~KeptThreadState() {
    if (Py_IsInitialized() && !_Py_IsFinalizing()) {
      PyEval_RestoreThread(saved_);
      PyGILState_Release(state_);
    }
  }

private:
  PyGILState_STATE state_;
  PyThreadState* saved_;
};

// A pipeline thread's hold on the GIL (it may be a thread Python has never seen).
class GilHold {
public:
  GilHold() : state_(ensure()) {}
  ~GilHold() { PyGILState_Release(state_); }
  GilHold(const GilHold&) = delete;
  GilHold& operator=(const GilHold&) = delete;

private:
  static PyGILState_STATE ensure() {
    thread_local std::unique_ptr<KeptThreadState> kept;
    if (!kept && PyGILState_Check() == 0)
      kept = std::make_unique<KeptThreadState>();
    return PyGILState_Ensure();
  }

  PyGILState_STATE state_;
};

// A cache this large means functions come and go (one per job): start over rather than grow.
constexpr std::size_t kMaxCachedFunctions = 1024;

const std::string& param_ref(const Params& params, const char* key) {
  static const std::string none;
  auto it = params.find(key);
  if (it == params.end() || !std::holds_alternative<std::string>(it->second))
    return none;
  return std::get<std::string>(it->second);
}

std::string param(const Params& params, const char* key) { return param_ref(params, key); }

int64_t int_param(const Params& params, const char* key) {
  auto it = params.find(key);
  return it != params.end() && std::holds_alternative<int64_t>(it->second)
           ? std::get<int64_t>(it->second)
           : 0;
}

int64_t pool_size(int64_t processes) {
  return processes == kAutotune ? std::max<int64_t>(2, std::thread::hardware_concurrency())
                                : processes;
}

std::string default_worker_name() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0)
    host[0] = '\0';
  return "worker process " + std::to_string(getpid()) + " on " +
         (host[0] != '\0' ? std::string{host} : std::string{"this host"});
}

// The exception's "Type: message" line and its traceback (user frames only).
struct PythonError {
  std::string summary;
  std::string traceback;
  std::string missing_module; // ModuleNotFoundError / ImportError: the module's name
};

PythonError describe(py::error_already_set& e) {
  PythonError out;
  try {
    out.summary = py::str(e.type().attr("__name__")).cast<std::string>();
    const std::string text = py::str(e.value()).cast<std::string>();
    if (!text.empty())
      out.summary += ": " + text;
    if (PyErr_GivenExceptionMatches(e.type().ptr(), PyExc_ImportError) &&
        py::hasattr(e.value(), "name") && !e.value().attr("name").is_none())
      out.missing_module = py::str(e.value().attr("name")).cast<std::string>();
    // A function implemented in C (math.log) raises without a Python frame: no traceback object.
    py::object trace = e.trace() ? py::reinterpret_borrow<py::object>(e.trace()) : py::none();
    py::list lines =
      py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), trace);
    for (py::handle line : lines)
      out.traceback += line.cast<std::string>();
  } catch (const std::exception& inner) {
    if (out.summary.empty())
      out.summary = e.what();
    out.traceback = std::string{"(no traceback: "} + inner.what() + ")";
  }
  while (!out.traceback.empty() && out.traceback.back() == '\n')
    out.traceback.pop_back();
  return out;
}

class EmbeddedPython final : public PythonRuntime {
public:
  Expected<Element> map(const Element& in, const Params& params) override {
    const int64_t processes = int_param(params, "processes");
    if (processes < kAutotune)
      return invalid_argument("Python function `" + param(params, "qualname") +
                              "`: `processes` must be 0 or 1 (the worker's interpreter), more "
                              "(a pool of that many processes) or -1 (AUTOTUNE), got " +
                              std::to_string(processes));
    if (processes > 1 || processes == kAutotune)
      return pool_map(in, params, pool_size(processes));
    return call<Element>(in, params,
                         [](py::handle result, const std::string& what, const Arguments& passed) {
                           return element_from_python(result, "the result of " + what, &passed);
                         });
  }

  std::function<Expected<Element>()> start_map(const Element& in, const Params& params) override {
    const int64_t processes = int_param(params, "processes");
    if (processes <= 1 && processes != kAutotune)
      return nullptr;
    const std::string& pickled = param_ref(params, "pickle");
    const std::string& import = param_ref(params, "import");
    if (pickled.empty() == import.empty())
      return nullptr; // map() reports it
    auto pool = ensure_pool();
    if (!pool.ok())
      return nullptr;
    std::string name = param(params, "qualname");
    if (name.empty())
      name = import.empty() ? "<python>" : import;
    return (*pool)->start(pickled.empty() ? import : pickled, !import.empty(), in,
                          pool_size(processes), name, worker_name());
  }

  Expected<bool> predicate(const Element& in, const Params& params) override {
    return call<bool>(
      in, params, [](py::handle result, const std::string&, const Arguments&) -> Expected<bool> {
        // numpy's truth rules: a 0-d or one-entry array is fine, a longer one raises (caught as
        // the function's error by call()).
        const int truth = PyObject_IsTrue(result.ptr());
        if (truth < 0)
          throw py::error_already_set();
        return truth != 0;
      });
  }

  // The function returns a conveyor Dataset (its text form travels) or rows, as
  // Dataset.from_tensor_slices takes them (an array, a list, a tuple of arrays, any iterable).
  Expected<Dataset> dataset(const Element& in, const Params& params) override {
    return call<Dataset>(
      in, params,
      [](py::handle result, const std::string& what, const Arguments&) -> Expected<Dataset> {
        if (py::hasattr(result, "to_text") && py::hasattr(result, "fingerprint"))
          return parse_dataset(result.attr("to_text")().cast<std::string>());
        py::object rows = py::reinterpret_borrow<py::object>(result);
        const bool sequence = py::isinstance<py::tuple>(rows) || py::isinstance<py::list>(rows) ||
                              py::hasattr(rows, "__array__");
        if (!sequence && py::hasattr(rows, "__iter__") && !py::isinstance<py::str>(rows) &&
            !py::isinstance<py::bytes>(rows))
          rows = py::list(rows); // a generator: its items are the rows
        auto element = element_from_python(rows, "the result of " + what);
        if (!element.ok())
          return element.status();
        return Dataset::from_tensor_slices(std::move(*element));
      });
  }

  Status add_path(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return invalid_argument("--python-path `" + dir + "` is not a directory");
    {
      std::lock_guard<std::mutex> lock{mu_};
      paths_.push_back(dir);
    }
    if (!started_.load())
      return Status::OK(); // ensure_started applies it
    GilHold gil;           // always the GIL first, then mu_
    std::lock_guard<std::mutex> lock{mu_};
    return apply_paths_locked();
  }

  void set_worker_name(const std::string& name) {
    std::lock_guard<std::mutex> lock{mu_};
    worker_name_ = name;
  }

private:
  // num_parallel_calls > 1: the call runs in a pool process, without this process's GIL.
  // (Per element: the pickle, often kilobytes, is read in place, not copied.)
  Expected<Element> pool_map(const Element& in, const Params& params, int64_t processes) {
    const std::string& pickled = param_ref(params, "pickle");
    const std::string& import = param_ref(params, "import");
    std::string name = param(params, "qualname");
    if (name.empty())
      name = import.empty() ? "<python>" : import;
    if (pickled.empty() == import.empty())
      return invalid_argument("Python function `" + name +
                              "` needs exactly one of the parameters `pickle` and `import`");
    auto pool = ensure_pool();
    if (!pool.ok())
      return pool.status();
    return (*pool)->call(pickled.empty() ? import : pickled, !import.empty(), in, processes, name,
                         worker_name());
  }

  // The pool runs the interpreter this process runs (or embeds), with its sys.path. A process
  // forked from the one that made the pool (os.fork in the client) makes its own: the inherited
  // pool's processes answer the parent.
  Expected<ProcessPool*> ensure_pool() {
    CONVEYOR_RETURN_IF_ERROR(ensure_started());
    {
      std::lock_guard<std::mutex> lock{pool_mu_}; // never held while waiting for the GIL
      if (pool_ != nullptr && pool_pid_ == ::getpid())
        return pool_;
    }
    GilHold gil; // the GIL first, then pool_mu_
    std::lock_guard<std::mutex> lock{pool_mu_};
    if (pool_ != nullptr && pool_pid_ == ::getpid())
      return pool_;
    try {
      py::module_ sys = py::module_::import("sys");
      std::string python =
        started_here_ ? CONVEYOR_PYTHON_EXECUTABLE : sys.attr("executable").cast<std::string>();
      if (python.empty())
        python = CONVEYOR_PYTHON_EXECUTABLE;
      std::vector<std::string> path;
      for (py::handle entry : sys.attr("path"))
        path.push_back(py::str(entry).cast<std::string>());
      // Never destroyed (a forked child's inherited one included: its processes are the
      // parent's to end).
      pool_ = new ProcessPool(std::move(python), std::move(path));
      pool_pid_ = ::getpid();
      return pool_;
    } catch (py::error_already_set& e) {
      return internal_error("cannot start the Python pool: " + describe(e).summary);
    }
  }

  std::string worker_name() {
    std::lock_guard<std::mutex> lock{mu_};
    if (!worker_name_.empty())
      return worker_name_;
    // Made once per process (a pool map asks per element; a forked child has its own pid).
    if (default_name_pid_ != ::getpid()) {
      default_name_ = default_worker_name();
      default_name_pid_ = ::getpid();
    }
    return default_name_;
  }

  // Under mu_ and the GIL: puts the pending --python-path entries in front of sys.path.
  Status apply_paths_locked() {
    try {
      py::list sys_path = py::module_::import("sys").attr("path");
      for (; applied_paths_ < paths_.size(); ++applied_paths_)
        sys_path.insert(0, py::str(paths_[applied_paths_]));
      return Status::OK();
    } catch (py::error_already_set& e) {
      return internal_error("cannot extend sys.path: " + describe(e).summary);
    }
  }

  // Starts the interpreter unless this process runs one already (the Python client).
  Status ensure_started() {
    std::call_once(start_once_, [this] {
      if (!Py_IsInitialized()) {
        started_here_ = true;
        Py_InitializeEx(0); // no signal handlers: the worker owns SIGINT/SIGTERM
        // The interpreter belongs to no thread: let go of the GIL this thread got with it.
        PyEval_SaveThread();
      }
      GilHold gil;
      {
        std::lock_guard<std::mutex> lock{mu_};
        start_status_ = apply_paths_locked();
      }
      started_.store(true);
      if (start_status_.ok()) {
        try {
          py::module_::import("numpy");
        } catch (py::error_already_set& e) {
          start_status_ =
            failed_precondition("the Python of " + worker_name() + " cannot import numpy (" +
                                describe(e).summary + "); Python functions need it");
        }
      }
    });
    return start_status_;
  }

  // Under the GIL: the callable named by `params`, loaded once.
  Expected<py::object> load(const Params& params, const std::string& name) {
    const std::string pickled = param(params, "pickle");
    const std::string import = param(params, "import");
    if (pickled.empty() == import.empty())
      return invalid_argument("Python function `" + name +
                              "` needs exactly one of the parameters `pickle` and `import`");
    const std::string key = pickled.empty() ? "import:" + import : "pickle:" + pickled;
    auto it = cache_.find(key);
    if (it != cache_.end())
      return it->second;
    py::object fn;
    try {
      if (!pickled.empty()) {
        py::object raw = py::module_::import("base64").attr("b64decode")(py::str(pickled));
        fn = py::module_::import("pickle").attr("loads")(raw);
      } else {
        const auto colon = import.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == import.size())
          return invalid_argument("Python function `" + import +
                                  "`: expected \"package.module:function\"");
        fn = py::module_::import("importlib").attr("import_module")(import.substr(0, colon));
        // "module:Class.method": attributes after the colon, one by one.
        std::size_t begin = colon + 1;
        while (begin <= import.size()) {
          std::size_t dot = import.find('.', begin);
          if (dot == std::string::npos)
            dot = import.size();
          fn = fn.attr(py::str(import.substr(begin, dot - begin)));
          begin = dot + 1;
        }
      }
    } catch (py::error_already_set& e) {
      PythonError error = describe(e);
      if (!error.missing_module.empty())
        return not_found("Python function `" + name + "`: cannot import module `" +
                         error.missing_module + "` on " + worker_name() + " (" + error.summary +
                         "); start the worker with `--python-path DIR` naming the directory "
                         "that holds it, or install it there");
      return invalid_argument("Python function `" + name + "` cannot be loaded on " +
                              worker_name() + ": " + error.summary + "\n" + error.traceback);
    }
    if (!PyCallable_Check(fn.ptr()))
      return invalid_argument("Python function `" + name + "` is not callable (a " +
                              py::str(py::type::of(fn).attr("__name__")).cast<std::string>() + ")");
    if (cache_.size() >= kMaxCachedFunctions)
      cache_.clear();
    cache_.emplace(key, fn);
    return fn;
  }

  template <class T, class Convert>
  Expected<T> call(const Element& in, const Params& params, Convert convert) {
    std::string name = param(params, "qualname");
    if (name.empty())
      name = param(params, "import");
    if (name.empty())
      name = "<python>";
    CONVEYOR_RETURN_IF_ERROR(ensure_started());
    if (_Py_IsFinalizing())
      return Status{ErrorCode::cancelled,
                    "Python function `" + name + "`: the interpreter is shutting down"};
    GilHold gil;
    try {
      auto fn = load(params, name);
      if (!fn.ok())
        return fn.status();
      const std::string what = "Python function `" + name + "`";
      try {
        Arguments passed{element_to_arguments(in), &in};
        py::object result = (*fn)(*passed.args);
        return convert(result, what, passed);
      } catch (py::error_already_set& e) {
        PythonError error = describe(e);
        return invalid_argument(what + " raised " + error.summary + "\n" + error.traceback);
      }
    } catch (py::error_already_set& e) {
      return internal_error("Python function `" + name + "`: " + describe(e).summary);
    } catch (const std::exception& e) {
      return internal_error("Python function `" + name + "`: " + e.what());
    }
  }

  std::once_flag start_once_;
  std::atomic<bool> started_{false};
  bool started_here_ = false; // written once, under start_once_
  std::mutex pool_mu_;
  ProcessPool* pool_ = nullptr; // under pool_mu_
  pid_t pool_pid_ = 0;          // the process that made pool_
  Status start_status_;         // written once, under start_once_
  std::mutex mu_;               // the fields below; taken after the GIL, never before it
  std::vector<std::string> paths_;
  std::size_t applied_paths_ = 0;
  std::string worker_name_;
  std::string default_name_; // default_worker_name() of process default_name_pid_
  pid_t default_name_pid_ = -1;
  // Under the GIL. Leaked with the runtime: py::objects must not be released after Python ends.
  std::unordered_map<std::string, py::object> cache_;
};

EmbeddedPython& runtime() {
  static auto* instance = new EmbeddedPython; // never destroyed (see cache_)
  return *instance;
}

} // namespace

void install_embedded_python() { set_python_runtime(&runtime()); }

Status add_python_path(const std::string& dir) { return runtime().add_path(dir); }

void set_python_worker_name(const std::string& name) { runtime().set_worker_name(name); }

} // namespace conveyor::python
