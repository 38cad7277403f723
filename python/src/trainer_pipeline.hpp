// The trainer-side pipeline for Python (_conveyor._TrainerPipeline): the ops after distribute()
// (`distribute(...).map(fn).shuffle(64).batch(32).prefetch(2)`) run by LocalPipeline
// (consumer/local_pipeline.cpp), the one implementation C++ trainers use too, over a _Stream.
// Python callables of map and filter are called with the GIL from whichever thread runs them
// (the caller's, or the executor's for a parallel map or a prefetch fill); checkpoint()
// releases the GIL while the pipeline saves. An exception a callable raises travels
// through the pipeline as an error Status that names it, and next() raises the same exception
// object again (its class and message kept), in the order the pipeline reports errors.
// The thread in next() keeps the GIL while ops run on it and gives it up when they wait; a
// prefetch fill's calls take it once per fill (gil_lease.hpp). Waits check for signals every
// 100 ms: a signal handler's exception (KeyboardInterrupt) comes out of next(), and the
// iterator is then closed (later next() calls: StopIteration; state_dict(): an error).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>

#include "conveyor/local_pipeline.hpp"
#include "fork_bound.hpp"
#include "py_stream.hpp"

namespace conveyor_python {

class PyTrainerPipeline : public ForkBound {
public:
  // `stream`: a _Stream, read by the pipeline (closed by close()). `ops`: tuples, bottom first:
  // ("map", fn, name, num_parallel_calls, deterministic), ("filter", fn, name) (`name` in
  // error messages), ("batch", size, drop),
  // ("unbatch",), ("shuffle", size, seed), ("take", n), ("skip", n), ("prefetch", size).
  PyTrainerPipeline(pybind11::object stream, pybind11::list ops);
  PyTrainerPipeline(const PyTrainerPipeline&) = delete;
  PyTrainerPipeline& operator=(const PyTrainerPipeline&) = delete;
  ~PyTrainerPipeline(); // without the GIL (GilFreeHolder): it waits for the pipeline's threads

  // The next element; a null object at the end, when the stream is closed too (the job left).
  pybind11::object next_or_end();
  pybind11::object next(); // StopIteration at the end
  // Stops the read (a thread waiting in next() gets the end) and the pipeline. Idempotent.
  void close();
  // (LocalPipeline::checkpoint's blob, its read cursor, the structure text of each map's results
  // (None: none seen yet)), taken between two next() calls.
  pybind11::tuple checkpoint();
  // Before the first next(): continues from checkpoint()'s blob and structures (of a pipeline
  // with the same ops, over a stream that resumes from its read cursor).
  void restore(const std::string& blob, pybind11::list structures);
  std::string to_text();

  struct Errors; // Python exceptions on their way through the pipeline
  struct Slot;   // how the elements after an op nest

private:
  [[noreturn]] void raise_status(const conveyor::Status& st);

  pybind11::object stream_object_; // keeps the _Stream alive while the pipeline reads it
  PyStream* stream_;
  std::shared_ptr<Errors> errors_;
  std::vector<std::shared_ptr<Slot>> map_slots_;    // one per map, bottom first
  std::shared_ptr<Slot> out_slot_;                  // the last op's
  std::mutex mu_;                                   // one next()/checkpoint()/close() at a time
  std::optional<conveyor::LocalPipeline> pipeline_; // reset by close()
  bool interrupted_ = false; // a signal's exception ended a next(): closed (touched with the GIL)
};

// Defines _conveyor._TrainerPipeline on `m`.
void bind_trainer_pipeline(pybind11::module_& m);

} // namespace conveyor_python
