// The C++ side of the Python iterator's benchmark (python/bench/bench_iterator.py).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "conveyor/options.hpp"
#include "pipeline/graph/dataset.hpp"

namespace conveyor_python {

// The same ElementStream loop a C++ trainer runs, for `seconds`, without the GIL. Returns
// (elements, bytes, seconds, cpu_seconds of the consuming thread).
pybind11::tuple bench_cpp_stream(const std::string& service, const conveyor::Dataset& dataset,
                                 const conveyor::DistributeOptions& options, double warmup_s,
                                 double seconds, bool two_step);

} // namespace conveyor_python
