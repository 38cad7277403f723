#include "py_stream.hpp"

#include <pybind11/stl.h>

#include <chrono>
#include <utility>

#include "iter_slot.hpp"
#include "numpy_convert.hpp"
#include "py_status.hpp"

namespace py = pybind11;
using namespace conveyor;
using std::chrono::milliseconds;

namespace conveyor_python {

py::object PyStream::next_or_end() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  Element e;
  bool end = false;
  Status st;
  {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) { // another thread is reading this stream: wait for it without the GIL
      py::gil_scoped_release release;
      lock = std::unique_lock<std::mutex>(mu_);
    }
    st = take(e, end, lock);
  }
  if (!st.ok())
    raise(st);
  if (end)
    return py::object();
  return element_to_python(std::move(e), structure_.get());
}

py::object PyStream::next() {
  py::object out = next_or_end();
  if (!out)
    throw py::stop_iteration();
  return out;
}

void PyStream::close() {
  if (inherited())
    return; // the parent's stream: the parent leaves its job, not this child
  closing_ = true;
  py::gil_scoped_release release;
  {
    // Not under mu_: a reader holds it while it waits. cancel_mu_ keeps stream_ from being
    // swapped away meanwhile.
    std::lock_guard<std::mutex> guard(cancel_mu_);
    if (stream_)
      stream_->cancel();
  }
  std::optional<ElementStream> closed; // destroyed first, before the GIL is taken back
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> guard(cancel_mu_);
    // A closed iterator's cursor stays what it was: e.g. a trainer-side take() that closed the
    // read still saves its state afterwards.
    if (stream_ && !closed_cursor_)
      if (auto cursor = stream_->checkpoint(); cursor.ok())
        closed_cursor_ = std::move(cursor).value();
    closed.swap(stream_);
  }
}

std::string PyStream::job_id() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  auto lock = lock_without_gil();
  return stream()->job_id();
}

py::bytes PyStream::checkpoint() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  Expected<std::string> blob = std::string{};
  {
    py::gil_scoped_release release;
    blob = read_cursor();
  }
  return py::bytes(unwrap(std::move(blob)));
}

Expected<std::string> PyStream::read_cursor() {
  if (inherited())
    return crossed_fork("this iterator");
  std::lock_guard<std::mutex> lock(mu_);
  if (!stream_ && closed_cursor_)
    return *closed_cursor_;
  if (!stream_)
    return failed_precondition("the iterator was closed");
  return stream_->checkpoint();
}

Status PyStream::pull(Element& e, bool& end, milliseconds timeout) {
  if (inherited())
    return crossed_fork("this iterator");
  std::unique_lock<std::mutex> lock(mu_);
  return pull_locked(e, end, timeout);
}

Status PyStream::try_pull(Element& e, bool& end) {
  if (inherited())
    return crossed_fork("this iterator");
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock())
    return Status(ErrorCode::deadline_exceeded, "the stream is busy");
  return pull_locked(e, end, milliseconds{0});
}

Status PyStream::pull_locked(Element& e, bool& end, milliseconds timeout) {
  if (closing_ || !stream_) {
    end = true;
    return Status::OK();
  }
  Status st = stream_->next(e, end, timeout);
  if (closing_) { // closed meanwhile: cancelled, which a closed iterator reports as its end
    end = true;
    return Status::OK();
  }
  return st;
}

int64_t PyStream::consumed_total() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  auto lock = lock_without_gil();
  return stream()->consumed_total();
}

py::dict PyStream::stats() {
  if (inherited())
    raise(crossed_fork("this iterator"));
  StreamStats s;
  {
    auto lock = lock_without_gil();
    s = stream()->stats();
  }
  py::dict d;
  d["elements"] = s.elements;
  d["bytes"] = s.bytes;
  d["messages"] = s.messages;
  d["per_worker"] = s.per_worker;
  d["lost_tasks"] = s.lost_tasks;
  return d;
}

std::unique_lock<std::mutex> PyStream::lock_without_gil() {
  py::gil_scoped_release release;
  return std::unique_lock<std::mutex>(mu_);
}

ElementStream* PyStream::stream() {
  if (!stream_)
    raise(failed_precondition("the iterator was closed"));
  return &*stream_;
}

// The next element; called with mu_ held (`lock`). While elements arrive faster than they are
// taken, ElementStream::next hands over an already received one without waiting: that fast path
// keeps the GIL (releasing it per element would hand it to any busy Python thread, and take up
// to the switch interval to get back). Once a call had to wait, the next one goes straight to
// the wait: a zero-timeout try would cost a futex round trip per element on a stream that is
// waited on anyway. Waits release the GIL, in 100 ms slices; between slices mu_ is released too
// (so stats() and close() from other threads get in) and Ctrl-C is checked. A closed stream
// ends (end = true).
Status PyStream::take(Element& e, bool& end, std::unique_lock<std::mutex>& lock) {
  using Clock = std::chrono::steady_clock;
  if (closing_ || !stream_) {
    end = true;
    return Status::OK();
  }
  if (!waiting_) {
    Status st = stream_->next(e, end, milliseconds{0});
    if (closing_) { // closed meanwhile: cancelled, which a closed iterator reports as its end
      end = true;
      return Status::OK();
    }
    if (st.code() != ErrorCode::deadline_exceeded)
      return st;
  }
  for (;;) {
    Status st;
    const auto start = Clock::now();
    {
      py::gil_scoped_release release;
      if (!lock.owns_lock())
        lock.lock();
      if (closing_ || !stream_) {
        end = true;
        return Status::OK();
      }
      st = stream_->next(e, end, milliseconds{100});
      if (closing_) {
        end = true;
        return Status::OK();
      }
      if (st.code() == ErrorCode::deadline_exceeded)
        lock.unlock();
    }
    if (st.code() != ErrorCode::deadline_exceeded) {
      // An element that was there at once means the stream runs ahead again: back to the fast path.
      waiting_ = Clock::now() - start > std::chrono::microseconds{50};
      return st;
    }
    waiting_ = true;
    if (PyErr_CheckSignals() != 0)
      throw py::error_already_set();
  }
}

void bind_stream(py::module_& m) {
  py::class_<PyStream, GilFreeHolder<PyStream>> cls(m, "_Stream");
  cls.def("__iter__", [](py::object self) { return self; })
    .def("__next__", &PyStream::next)
    .def("close", &PyStream::close, "Leaves the job (a private job is then released).")
    .def("__enter__", [](py::object self) { return self; })
    .def("__exit__", [](PyStream& s, py::args) { s.close(); })
    .def_property_readonly("job_id", &PyStream::job_id)
    .def("stats", &PyStream::stats)
    .def("checkpoint", &PyStream::checkpoint,
         "The read cursor (bytes): which elements this iterator handed out; pass it as "
         "distribute(..., resume_from=...) to read the rest of the epoch.")
    .def_property_readonly("consumed_total", &PyStream::consumed_total)
    .def(
      "state_dict",
      [](PyStream& s) {
        py::dict d;
        d["conveyor_read_cursor"] = s.checkpoint();
        return d;
      },
      "torchdata's Stateful protocol: {\"conveyor_read_cursor\": bytes}.");
  IterSlot<PyStream>::install(cls);
}

} // namespace conveyor_python
