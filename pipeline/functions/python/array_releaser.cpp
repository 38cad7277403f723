#include "pipeline/functions/python/array_releaser.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline/runtime/per_process.hpp"

namespace conveyor::python {
namespace {

bool interpreter_ending() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

class ArrayReleaser {
public:
  // One per process (a forked child makes its own, with its own thread and an unlocked mutex);
  // never destroyed: tensors may still go after static destructors ran.
  static ArrayReleaser& instance() {
    static PerProcess<ArrayReleaser> per_process;
    return per_process.get([] { return new ArrayReleaser; });
  }

  void push(PyObject* array) {
    // Started on first use, not when made: PerProcess may make and delete a spare one.
    std::call_once(started_, [this] { std::thread([this] { run(); }).detach(); });
    std::lock_guard<std::mutex> lock{mu_}; // a leaf lock: nothing else is taken under it
    pending_.push_back(array);
    wake_.notify_one();
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock{mu_};
    for (;;) {
      wake_.wait(lock, [this] { return !pending_.empty(); });
      std::vector<PyObject*> batch;
      batch.swap(pending_);
      lock.unlock();
      if (!interpreter_ending()) {
        const PyGILState_STATE state = PyGILState_Ensure();
        for (PyObject* array : batch)
          Py_DECREF(array);
        PyGILState_Release(state);
      }
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<PyObject*> pending_;
  std::once_flag started_;
};

} // namespace

void release_array_later(PyObject* array) { ArrayReleaser::instance().push(array); }

} // namespace conveyor::python
