// Streams and servers across os.fork() and their destruction without the GIL: what every object
// of the module that owns actor-system threads shares (module.cpp, py_stream.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor_python {

// Counts the forks this process is a child of (a pthread_atfork child handler, registered at
// import). Streams and servers remember the count they were made under: one made before a fork
// belongs to the parent, whose actor-system threads did not cross into the child and whose
// mutexes a vanished parent thread may hold. In the child it is never used, closed or
// destroyed (its memory is left as it is): using it raises, closing it does nothing. New ones
// made in the child are fine.
inline std::atomic<uint64_t> fork_generation{0};

inline void after_fork_in_child() { fork_generation.fetch_add(1); }

class ForkBound {
public:
  bool inherited() const { return generation_ != fork_generation.load(); }

private:
  uint64_t generation_ = fork_generation.load();
};

inline conveyor::Status crossed_fork(const std::string& what) {
  return conveyor::failed_precondition(
    what + " was created in the parent process before os.fork(): conveyor "
           "iterators and servers cannot cross a fork; create them in the child");
}

// Destroying a server or a stream stops actors and joins threads; other Python threads keep
// running meanwhile. During interpreter shutdown the GIL stays where it is.
inline bool may_release_gil() { return PyGILState_Check() != 0 && _Py_IsFinalizing() == 0; }

struct DeleteWithoutGil {
  template <class T>
  void operator()(T* p) const {
    if (p->inherited())
      return; // the parent's: destroying it would wait for threads the child does not have
    if (may_release_gil()) {
      pybind11::gil_scoped_release release;
      delete p;
    } else {
      delete p;
    }
  }
};
template <class T>
using GilFreeHolder = std::unique_ptr<T, DeleteWithoutGil>;

} // namespace conveyor_python
