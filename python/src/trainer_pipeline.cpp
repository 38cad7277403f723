#include "trainer_pipeline.hpp"

#include <pybind11/stl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>

#include "gil_lease.hpp"
#include "iter_slot.hpp"
#include "numpy_convert.hpp"
#include "py_status.hpp"

namespace py = pybind11;
using namespace conveyor;
using std::chrono::milliseconds;

namespace conveyor_python {

namespace {

constexpr const char* kMarker = " [Python exception #";

// A Python object that pipeline threads hold: released with the GIL, by whichever thread drops
// the last reference.
using PyRef = std::shared_ptr<py::object>;
PyRef keep(py::object o) {
  return PyRef(new py::object(std::move(o)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// tf.data's convention: a tuple element is passed as positional arguments. Needs the GIL.
py::object call(const py::object& fn, py::object arg) {
  py::object args = py::isinstance<py::tuple>(arg) ? std::move(arg) : py::make_tuple(arg);
  PyObject* result = PyObject_Call(fn.ptr(), args.ptr(), nullptr);
  if (result == nullptr)
    throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

std::string short_repr(py::handle value) {
  std::string r = py::repr(value);
  return r.size() > 80 ? r.substr(0, 77) + "..." : r;
}

} // namespace

// An exception raised by a callable is held here, and the Status that travels through the
// pipeline names it by number; next() raises the held object when that Status reaches it.
struct PyTrainerPipeline::Errors {
  std::mutex mu;
  int64_t last_id = 0;
  std::unordered_map<int64_t, py::object> held; // touched with the GIL only

  // With the GIL, in the handler of `e`.
  Status hold(py::error_already_set& e, const std::string& where) {
    py::object value = e.value();
    if (e.trace())
      PyException_SetTraceback(value.ptr(), e.trace().ptr());
    const std::string text =
      std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(value));
    int64_t id;
    {
      std::lock_guard<std::mutex> lock(mu);
      id = ++last_id;
      held.emplace(id, std::move(value));
    }
    return internal_error(where + " raised " + text + kMarker + std::to_string(id) + "]");
  }

  // With the GIL: the object `st` names (null when none is held here, e.g. restored).
  py::object take(const Status& st) {
    const std::string& m = st.message();
    const auto at = m.rfind(kMarker);
    if (at == std::string::npos)
      return py::object();
    const int64_t id =
      std::strtoll(m.c_str() + at + std::char_traits<char>::length(kMarker), nullptr, 10);
    std::lock_guard<std::mutex> lock(mu);
    auto it = held.find(id);
    if (it == held.end())
      return py::object();
    py::object value = std::move(it->second);
    held.erase(it);
    return value;
  }
};

// The elements after a map nest as its results do: the first result sets the structure, and
// every later one must have it too (as tf.data's fixed element_spec).
struct PyTrainerPipeline::Slot {
  std::mutex mu;
  bool known = false;
  std::shared_ptr<const Structure> structure; // null: flat

  std::shared_ptr<const Structure> get() {
    std::lock_guard<std::mutex> lock(mu);
    return structure;
  }
  void set(std::shared_ptr<const Structure> s) {
    std::lock_guard<std::mutex> lock(mu);
    structure = std::move(s);
    known = true;
  }
  Status check_or_set(Structure s, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (!known) {
      structure = std::make_shared<const Structure>(std::move(s));
      known = true;
      return Status::OK();
    }
    const Structure before = structure ? *structure : Structure::leaf();
    if (before == s)
      return Status::OK();
    return invalid_argument(what + ": returned an element that nests as " + s.to_string() +
                            " after one that nested as " + before.to_string() +
                            "; every element of a pipeline must have the same structure");
  }
};

namespace {

LocalPipeline::Map map_function(PyRef fn, const std::string& name,
                                std::shared_ptr<PyTrainerPipeline::Slot> in,
                                std::shared_ptr<PyTrainerPipeline::Slot> out,
                                std::shared_ptr<PyTrainerPipeline::Errors> errors) {
  return [fn = std::move(fn), what = "trainer-side map `" + name + "`", in = std::move(in),
          out = std::move(out), errors = std::move(errors)](const Element& e) -> Expected<Element> {
    GilForCall gil;
    try {
      const auto structure = in->get();
      py::object result = call(*fn, element_to_python(Element(e), structure.get()));
      NestedElement nested = nested_from_python(result, what.c_str(), /*share_received=*/true);
      CONVEYOR_RETURN_IF_ERROR(out->check_or_set(std::move(nested.structure), what));
      return std::move(nested.element);
    } catch (py::error_already_set& err) {
      return errors->hold(err, what);
    } catch (const StatusError& err) {
      return err.status;
    }
  };
}

LocalPipeline::Predicate filter_function(PyRef fn, const std::string& name,
                                         std::shared_ptr<PyTrainerPipeline::Slot> in,
                                         std::shared_ptr<PyTrainerPipeline::Errors> errors) {
  return [fn = std::move(fn), what = "trainer-side filter `" + name + "`", in = std::move(in),
          errors = std::move(errors)](const Element& e) -> Expected<bool> {
    GilForCall gil;
    try {
      const auto structure = in->get();
      py::object keep = call(*fn, element_to_python(Element(e), structure.get()));
      if (PyBool_Check(keep.ptr()))
        return keep.ptr() == Py_True;
      // numpy's bool_ and 0-d bool arrays count as bools too.
      if (py::hasattr(keep, "dtype") && py::hasattr(keep, "ndim") &&
          keep.attr("ndim").cast<int>() == 0 &&
          keep.attr("dtype").attr("kind").cast<std::string>() == "b")
        return PyObject_IsTrue(keep.ptr()) == 1;
      const std::string got =
        std::string(py::str(keep.get_type().attr("__name__"))) + ": " + short_repr(keep);
      PyErr_SetString(PyExc_TypeError,
                      ("filter: `predicate` must return a scalar bool, got " + got).c_str());
      throw py::error_already_set();
    } catch (py::error_already_set& err) {
      return errors->hold(err, what);
    } catch (const StatusError& err) {
      return err.status;
    }
  };
}

} // namespace

PyTrainerPipeline::PyTrainerPipeline(py::object stream, py::list ops)
  : stream_object_(std::move(stream)), stream_(stream_object_.cast<PyStream*>()),
    errors_(std::make_shared<Errors>()) {
  if (stream_->inherited())
    raise(crossed_fork("this iterator"));
  PyStream* source = stream_; // outlives the pipeline: close() and ~ stop the pipeline first
  LocalPipeline pipeline(
    [source](Element& out, bool& end) -> Status {
      // An element already received is taken without giving up the thread's lease (the GIL).
      ThreadLease* lease = thread_lease();
      if (lease != nullptr) {
        Status st = source->try_pull(out, end);
        if (st.code() != ErrorCode::deadline_exceeded)
          return st;
      }
      // Else waits in slices until an element, the end or close(); between slices the lease's
      // check runs Python's signal handlers on the thread in next() (Ctrl-C), whose exception
      // ends the wait.
      for (;;) {
        if (lease != nullptr)
          lease->give_back();
        Status st = source->pull(out, end, milliseconds{100});
        if (st.code() != ErrorCode::deadline_exceeded)
          return st;
        if (lease != nullptr)
          CONVEYOR_RETURN_IF_ERROR(lease->check());
      }
    },
    [source] { return source->read_cursor(); });

  auto slot = std::make_shared<Slot>();
  slot->set(stream_->structure());
  for (py::handle h : ops) {
    const auto op = h.cast<py::tuple>();
    const auto kind = op[0].cast<std::string>();
    if (kind == "map" || kind == "filter") {
      py::object fn = op[1];
      const auto name = op[2].cast<std::string>();
      if (kind == "filter") {
        pipeline = pipeline.filter(filter_function(keep(fn), name, slot, errors_));
        continue;
      }
      auto out = std::make_shared<Slot>();
      pipeline = pipeline.map(map_function(keep(fn), name, slot, out, errors_),
                              op[3].cast<int64_t>(), op[4].cast<bool>());
      map_slots_.push_back(out);
      slot = out;
    } else if (kind == "batch") {
      pipeline = pipeline.batch(op[1].cast<int64_t>(), op[2].cast<bool>());
    } else if (kind == "unbatch") {
      pipeline = pipeline.unbatch();
    } else if (kind == "shuffle") {
      pipeline = pipeline.shuffle(op[1].cast<int64_t>(), op[2].cast<int64_t>());
    } else if (kind == "take") {
      pipeline = pipeline.take(op[1].cast<int64_t>());
    } else if (kind == "skip") {
      pipeline = pipeline.skip(op[1].cast<int64_t>());
    } else if (kind == "prefetch") {
      pipeline = pipeline.prefetch(op[1].cast<int64_t>());
    } else {
      raise(invalid_argument("_TrainerPipeline: `ops` has an unknown op `" + kind + "`"));
    }
  }
  out_slot_ = slot;
  pipeline_.emplace(std::move(pipeline));
}

PyTrainerPipeline::~PyTrainerPipeline() {
  {
    py::gil_scoped_acquire gil;
    stream_->close(); // a pull waiting in the pipeline gets the end
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pipeline_.reset(); // waits for its fills and calls; drops the callables (with the GIL)
  }
  py::gil_scoped_acquire gil;
  errors_->held.clear();
  stream_object_ = py::object();
}

py::object PyTrainerPipeline::next_or_end() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  if (interrupted_)
    return py::object();
  Element e;
  bool end = false;
  Status st;
  Status interruption;
  {
    // This thread keeps the GIL while the ops run on it and gives it up while they wait.
    ConsumerGil gil([this] {
      py::error_already_set pending;
      return errors_->hold(pending, "waiting for the next element");
    });
    LeaseScope lease(&gil);
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) { // another thread's next() or checkpoint(): wait without the GIL
      gil.give_back();
      lock.lock();
    }
    if (pipeline_)
      st = pipeline_->next(e, end);
    else
      end = true;
    interruption = gil.interruption();
  }
  if (!interruption.ok()) {
    // A signal's exception (KeyboardInterrupt) ended a wait somewhere in the ops, which may
    // have dropped what they held: the iterator ends, as a generator does after raising. Its
    // read is closed now (the job is left); its threads stop in close() or when it goes (a
    // fill may be in a call that has not returned yet, which close() waits for).
    interrupted_ = true;
    stream_->close();
    // Raised even where the ops returned something else first (an element or an earlier
    // error, e.g. a fill run here put the interrupt behind them): the caller asked to stop.
    raise_status(interruption);
  }
  if (!st.ok())
    raise_status(st);
  if (end) {
    stream_->close(); // nothing more is read: leave the job now, not when the iterator goes
    return py::object();
  }
  return element_to_python(std::move(e), out_slot_->get().get());
}

py::object PyTrainerPipeline::next() {
  py::object out = next_or_end();
  if (!out)
    throw py::stop_iteration();
  return out;
}

void PyTrainerPipeline::close() {
  if (inherited())
    return;
  stream_->close(); // releases the GIL; a next() waiting in a pull wakes with the end
  std::optional<LocalPipeline> closed;
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  closed.swap(pipeline_);
  closed.reset();
}

py::tuple PyTrainerPipeline::checkpoint() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  if (interrupted_)
    raise(failed_precondition("state_dict(): the iterator was closed when a signal's exception "
                              "(e.g. KeyboardInterrupt) ended its next()"));
  Expected<std::string> blob = std::string{};
  {
    py::gil_scoped_release release; // a prefetch's fill may be in a callable: it finishes first
    std::lock_guard<std::mutex> lock(mu_);
    if (pipeline_)
      blob = pipeline_->checkpoint();
    else
      blob = failed_precondition("state_dict(): the iterator was closed");
  }
  std::string bytes = unwrap(std::move(blob));
  std::string cursor = unwrap(LocalPipeline::read_cursor_of(bytes));
  py::list structures;
  for (const auto& slot : map_slots_) {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (!slot->known)
      structures.append(py::none());
    else
      structures.append(slot->structure ? slot->structure->to_string()
                                        : Structure::leaf().to_string());
  }
  return py::make_tuple(py::bytes(bytes), py::bytes(cursor), structures);
}

void PyTrainerPipeline::restore(const std::string& blob, py::list structures) {
  if (structures.size() != map_slots_.size())
    raise(invalid_argument("restore: `structures` has " + std::to_string(structures.size()) +
                           " entries, this pipeline has " + std::to_string(map_slots_.size()) +
                           " map(s)"));
  // Elements restored after a map (e.g. in a shuffle buffer) did not pass it in this process.
  for (std::size_t i = 0; i < map_slots_.size(); ++i) {
    if (structures[i].is_none())
      continue;
    auto s = Structure::parse(structures[i].cast<std::string>());
    if (!s.ok())
      raise(s.status().with_context("restore: the structure of map " + std::to_string(i)));
    map_slots_[i]->set(std::make_shared<const Structure>(std::move(s).value()));
  }
  Status st;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    st = pipeline_ ? pipeline_->restore(blob)
                   : failed_precondition("restore: the iterator was closed");
  }
  check(st);
}

std::string PyTrainerPipeline::to_text() {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  return pipeline_ ? pipeline_->to_text() : "";
}

void PyTrainerPipeline::raise_status(const Status& st) {
  py::object held = errors_->take(st);
  if (!held)
    raise(st);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(held.ptr())), held.ptr());
  throw py::error_already_set();
}

void bind_trainer_pipeline(py::module_& m) {
  py::class_<PyTrainerPipeline, GilFreeHolder<PyTrainerPipeline>> cls(
    m, "_TrainerPipeline",
    "The ops after distribute() over a _Stream, run by the C++ LocalPipeline (trainer.py).");
  cls.def(py::init<py::object, py::list>(), py::arg("stream"), py::arg("ops"))
    .def("__iter__", [](py::object self) { return self; })
    .def("__next__", &PyTrainerPipeline::next)
    .def("close", &PyTrainerPipeline::close,
         "Stops the pipeline and leaves the job (a private job is then released).")
    .def("_checkpoint", &PyTrainerPipeline::checkpoint)
    .def("_restore", &PyTrainerPipeline::restore, py::arg("blob"), py::arg("structures"))
    .def("_to_text", &PyTrainerPipeline::to_text);
  IterSlot<PyTrainerPipeline>::install(cls);
  m.def(
    "_fast_iternext",
    [cls](py::type subclass) {
      if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(subclass.ptr()),
                            reinterpret_cast<PyTypeObject*>(cls.ptr())))
        raise(
          invalid_argument("_fast_iternext: `subclass` must be a subclass of _TrainerPipeline"));
      IterSlot<PyTrainerPipeline>::install_on(subclass);
    },
    "Gives a Python subclass of _TrainerPipeline the direct next() slot (trainer.py).");
}

} // namespace conveyor_python
