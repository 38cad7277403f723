// The autoscaler's actuator `--scale-command 'CMD {n}'`: runs CMD through /bin/sh with {n}
// replaced by the target worker count (e.g. `kubectl scale deployment/conveyor-worker
// --replicas={n}`). CAF-free. Commands run one at a time on a thread of their own, so the
// dispatcher never waits for one; a target set while one runs is run after it (only the newest:
// an older target is no longer wanted). A command that fails (cannot start, exits non-zero, or
// runs past the timeout and is killed) is logged and counted, never fatal: the autoscaler decides
// again later.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class ScaleCommand {
public:
  using Log = std::function<void(bool failed, const std::string& line)>;

  // invalid_argument naming `--scale-command` when `templ` is empty or lacks "{n}".
  static Status validate(const std::string& templ);
  // The command line for `n` workers (every "{n}" replaced).
  static std::string expand(const std::string& templ, int64_t n);

  ScaleCommand(std::string templ, Log log,
               std::chrono::milliseconds timeout = std::chrono::seconds(120));
  ~ScaleCommand(); // kills a command still running, then joins its thread
  ScaleCommand(const ScaleCommand&) = delete;
  ScaleCommand& operator=(const ScaleCommand&) = delete;

  // Runs the command for `n` workers (asynchronously).
  void request(int64_t n);

  int64_t runs() const { return runs_.load(); }         // commands finished (ok or not)
  int64_t failures() const { return failures_.load(); } // of those, failed

private:
  void loop();
  // Runs one command to its end; empty when it succeeded, else why not.
  std::string run_one(int64_t n);

  const std::string templ_;
  const Log log_;
  const std::chrono::milliseconds timeout_;
  std::atomic<int64_t> runs_{0};
  std::atomic<int64_t> failures_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int64_t> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace conveyor::actors
