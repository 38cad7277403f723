// The process-wide registry of in-process workers (tf.data's LocalWorkers): a WorkerServer
// started in a trainer's process adds itself under its advertised address, and its worker
// actor lists every task it runs. A consumer reading with target_workers LOCAL
// (consumer/placement.hpp) recognises its process's workers by the address in the job's task
// list and talks to their task actors and bulk server directly: CAF delivers messages between
// actor systems of one process by reference, so elements cross no socket and are not
// serialized (the consumer keeps itself on its own system's threads: ConsumerActor::enqueue).
// Thread-safe (one mutex); handles only, no logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>

namespace conveyor::actors {

struct LocalWorkers {
  // A worker at `address` runs in this process; `bulk_server` takes its frames (may be null).
  static void add(const std::string& address, caf::actor bulk_server);
  static void remove(const std::string& address);
  static bool empty();
  static bool contains(const std::string& address);
  static std::vector<std::string> addresses();
  // The worker actor's tasks (ignored for an address that is not registered).
  static void add_task(const std::string& address, uint64_t task, caf::actor handle);
  static void remove_task(const std::string& address, uint64_t task);
  // Null when unknown.
  static caf::actor task(const std::string& address, uint64_t task);
  static caf::actor bulk_server(const std::string& address);
  // Frames consumers of this process received in process (tests and benchmarks check that
  // LOCAL reads took the in-process path).
  static void note_frame();
  static uint64_t frames_delivered();
};

} // namespace conveyor::actors
