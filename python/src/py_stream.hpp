// One job's elements for Python (_conveyor._Stream): ElementStream::next, the GIL released
// while waiting, each element converted by element_to_python (numpy_convert.hpp).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "conveyor/client.hpp"
#include "conveyor/structure.hpp"
#include "fork_bound.hpp"

namespace conveyor_python {

class PyStream : public ForkBound {
public:
  // `structure` (the dataset's, when known) nests each element; null yields them flat.
  explicit PyStream(conveyor::ElementStream s,
                    std::shared_ptr<const conveyor::Structure> structure = nullptr)
    : stream_(std::move(s)), structure_(std::move(structure)) {}
  PyStream(const PyStream&) = delete;
  PyStream& operator=(const PyStream&) = delete;

  // The next element; a null object at the end (no Python error set). A closed iterator is
  // exhausted, as Python's own iterators are after close(); so is one closed by another thread
  // while this one waits.
  pybind11::object next_or_end();
  // The same for __next__: StopIteration at the end.
  pybind11::object next();

  // Any thread may close: a thread waiting in next() on this stream wakes at once
  // (ElementStream::cancel) and gets the end. Leaving the job and stopping the stream's actor
  // system happen after mu_ is released. Idempotent.
  void close();

  // These take mu_ without the GIL: a thread in next() may hold it while it waits for the GIL.
  std::string job_id();
  // ElementStream::checkpoint: the read cursor, bytes.
  pybind11::bytes checkpoint();

  // For a C++ reader on any thread that does not hold the GIL (the trainer-side pipeline's
  // source, trainer_pipeline.cpp): the next element within `timeout` (deadline_exceeded
  // otherwise, so that the caller can check for signals and close() gets in between waits); a
  // closed stream ends.
  conveyor::Status pull(conveyor::Element& e, bool& end, std::chrono::milliseconds timeout);
  // pull() without waiting, also with the GIL held: deadline_exceeded when no element is ready
  // or another thread holds the stream (which may be waiting for the GIL).
  conveyor::Status try_pull(conveyor::Element& e, bool& end);
  // The read cursor (what checkpoint() returns), without the GIL; a closed stream's is the one
  // it had when it closed.
  conveyor::Expected<std::string> read_cursor();
  // How the elements nest (null: flat).
  const std::shared_ptr<const conveyor::Structure>& structure() const { return structure_; }
  int64_t consumed_total();
  pybind11::dict stats();

private:
  std::unique_lock<std::mutex> lock_without_gil();
  conveyor::ElementStream* stream();
  conveyor::Status take(conveyor::Element& e, bool& end, std::unique_lock<std::mutex>& lock);
  // pull() with mu_ held.
  conveyor::Status pull_locked(conveyor::Element& e, bool& end, std::chrono::milliseconds timeout);

  std::atomic<bool> waiting_{false}; // the last element had to be waited for (a hint only)
  std::atomic<bool> closing_{false};
  std::mutex mu_;
  std::mutex cancel_mu_; // held to cancel stream_ and, with mu_, to swap it away
  std::optional<conveyor::ElementStream> stream_;
  std::optional<std::string> closed_cursor_; // the read cursor when close() ran (guarded by mu_)
  const std::shared_ptr<const conveyor::Structure> structure_;
};

// Defines _conveyor._Stream on `m`.
void bind_stream(pybind11::module_& m);

} // namespace conveyor_python
