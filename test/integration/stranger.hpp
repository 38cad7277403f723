// Test-only: a stranger on the network. It is no conveyor node — it never registers or says
// client_hello — it connects straight to a worker's CAF port (what anyone who can reach that port
// can do) and sends the worker's own messages with whatever token it is given: assign_task,
// get_elements to the task it got, stop_task. The admission tests use it to check that a worker
// started with a token refuses these without it (docs/OPERATIONS.md "Security").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::testing {

class Stranger {
public:
  Stranger();
  ~Stranger();
  Stranger(const Stranger&) = delete;
  Stranger& operator=(const Stranger&) = delete;

  // Connects to the worker at 127.0.0.1:`worker_port` (its CAF port, not the dispatcher's).
  Status connect(uint16_t worker_port);
  // assign_task: an OFF task `task` running `dataset` (text form, e.g. "range(10)") presenting
  // `token`. On success the stranger keeps the task's handle for get_elements / stop_task.
  Status assign(uint64_t task, const std::string& dataset, const std::string& token);
  // One get_elements to the kept task as consumer `consumer`: the number of elements in the
  // reply, or the error the task answered with.
  Expected<uint32_t> get_elements(uint64_t consumer, const std::string& token);
  // stop_task for the kept task, sent to the worker (no reply either way).
  void stop(const std::string& token);
  // drain_atom to the worker (a graceful stop; local-only, it carries no token): the reply or
  // the error.
  Expected<bool> drain();
  // The other messages a node sends only to its own actors (net/local_sender.hpp), from here:
  // tick_atom, drained_atom and connect_atom to the worker, produce_atom to the kept task, then
  // drained_atom to the task (its reply or error is returned).
  Expected<bool> send_local_only();
  // tick_atom to the dispatcher at 127.0.0.1:`port` (its timer: heartbeats and compaction).
  Status tick_dispatcher(uint16_t port);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace conveyor::testing
