#include "pipeline/functions/python/array_releaser.hpp"

#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

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
  // Leaked: tensors may still go after static destructors ran.
  static ArrayReleaser& instance() {
    static auto* releaser = new ArrayReleaser();
    return *releaser;
  }

  void push(PyObject* array) {
    std::lock_guard<std::mutex> lock{mu_}; // a leaf lock: nothing else is taken under it
    if (pid_ != ::getpid()) { // the first release, or a forked child (the thread stayed behind)
      pid_ = ::getpid();
      std::thread([this] { run(); }).detach();
    }
    pending_.push_back(array);
    wake_.notify_one();
  }

private:
  ArrayReleaser() {
    // A fork while the thread holds mu_ would leave the child's copy locked forever.
    ::pthread_atfork([] { instance().mu_.lock(); }, [] { instance().mu_.unlock(); },
                     [] { instance().mu_.unlock(); });
  }

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
  pid_t pid_ = -1;
};

} // namespace

void release_array_later(PyObject* array) { ArrayReleaser::instance().push(array); }

} // namespace conveyor::python
