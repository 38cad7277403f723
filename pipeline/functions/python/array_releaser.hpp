// Drops the references conveyor holds on numpy arrays adopted as tensor storage (a map result's
// bytes used in place, numpy_tensor.cpp). The last tensor viewing such an array may go on any
// thread, under any lock: taking the GIL there could deadlock with a thread that holds the GIL and
// waits for that lock. So the release only queues the array, and a thread of its own takes the
// GIL and drops the queued references.
#pragma once

#include <Python.h>

namespace conveyor::python {

// Queues one reference of `array` to be dropped under the GIL soon. Any thread, no lock needed.
// While the interpreter is ending the reference is left to the process's end.
void release_array_later(PyObject* array);

} // namespace conveyor::python
