// The embedded CPython that runs the Python functions (python_functions.hpp) on a worker. In a
// process that already runs Python (the `_conveyor` module: the client's in-process workers) it
// uses that interpreter; elsewhere (`conveyor worker`) it starts one on the first call. A
// pipeline thread takes the GIL for each call (PyGILState_Ensure), so the process's other
// threads must not hold it while they wait (module.cpp releases it around every wait).
#pragma once

#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::python {

// Installs the embedded interpreter as the process's PythonRuntime (idempotent, cheap: the
// interpreter itself starts on the first call of a Python function).
void install_embedded_python();

// Adds `dir` in front of sys.path for the functions' modules (`conveyor worker --python-path`):
// at once when the interpreter runs, else when it starts. `dir` must be an existing directory.
Status add_python_path(const std::string& dir);

// How messages name this worker ("worker 10.0.0.5:5001"); by default "worker process PID on
// HOST".
void set_python_worker_name(const std::string& name);

} // namespace conveyor::python
