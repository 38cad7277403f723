// Errors on their way to Python: a non-OK Status is thrown as StatusError, which the module's
// translator (module.cpp) turns into the exception class registered for its code.
#pragma once

#include <exception>
#include <utility>

#include "pipeline/runtime/status.hpp"

namespace conveyor_python {

using conveyor::Expected;
using conveyor::Status;

struct StatusError : std::exception {
  explicit StatusError(Status s) : status(std::move(s)) {}
  const char* what() const noexcept override { return status.message().c_str(); }
  Status status;
};

[[noreturn]] inline void raise(const Status& st) { throw StatusError(st); }
inline void check(const Status& st) {
  if (!st.ok())
    raise(st);
}
template <class T>
T unwrap(Expected<T>&& e) {
  if (!e.ok())
    raise(e.status());
  return std::move(e).value();
}

} // namespace conveyor_python
