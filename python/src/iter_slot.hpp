// A direct tp_iternext for the module's iterator types (_Stream, _TrainerPipeline).
// `for x in it` and next(it) call the type's tp_iternext slot. pybind11 leaves CPython's generic
// one there, which looks __next__ up and calls it through pybind11's dispatcher (argument
// vectors, thread-local loader state, a C++ exception at the end): a good part of the Python
// side's per-element overhead on small elements (docs/BENCHMARKS.md). This slot calls T at once,
// ends by returning null with no exception set (CPython's contract for an exhausted iterator)
// and translates C++ exceptions as pybind11's dispatcher does.
#pragma once

#include <pybind11/pybind11.h>

namespace conveyor_python {

// T::next_or_end(): the next element, or a null object at the end.
template <class T>
struct IterSlot {
  static inline PyTypeObject* exact_type = nullptr;
  static inline PyTypeObject* subclass = nullptr; // a Python subclass given to install_on()

  static PyObject* next(PyObject* self) {
    try {
      // An exact T holds its object first: no type lookup (a subclass goes through one).
      T* it = nullptr;
      if (Py_TYPE(self) == exact_type || Py_TYPE(self) == subclass) {
        auto held = reinterpret_cast<pybind11::detail::instance*>(self)->get_value_and_holder();
        if (held.holder_constructed())
          it = held.template value_ptr<T>();
      }
      if (it == nullptr)
        it = pybind11::handle(self).cast<T*>();
      return it->next_or_end().release().ptr();
    } catch (pybind11::error_already_set& e) {
      e.restore();
    } catch (...) {
      if (!pybind11::detail::apply_exception_translators(
            pybind11::detail::get_local_internals().registered_exception_translators) &&
          !pybind11::detail::apply_exception_translators(
            pybind11::detail::get_internals().registered_exception_translators))
        PyErr_SetString(PyExc_SystemError, "an exception escaped a conveyor iterator");
    }
    return nullptr;
  }

  // Called once the class is complete: defining __next__ installed CPython's generic slot.
  static void install(pybind11::handle cls) {
    exact_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    exact_type->tp_iternext = &next;
  }
  // A Python subclass that adds no state in C++ (TrainerIterator): type creation gave it the
  // generic slot again, as the base has __next__ in its dict.
  static void install_on(pybind11::handle cls) {
    subclass = reinterpret_cast<PyTypeObject*>(cls.ptr());
    subclass->tp_iternext = &next;
  }
};

} // namespace conveyor_python
