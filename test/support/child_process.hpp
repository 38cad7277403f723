// A child process for integration tests: spawns a program (usually the built `conveyor`), captures
// its stdout and stderr (kept in memory and copied to log files), lets a test wait for output with
// a deadline, and always cleans up: the destructor sends SIGTERM, then SIGKILL to the child's whole
// process group, and reaps it — also when a CHECK failed and the test is unwinding.
//
// Waiting never sleeps for a fixed time: a reader thread polls the output pipes and the child's
// pidfd and wakes waiters on every change.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/runtime/status.hpp"

namespace conveyor::testing {

using Millis = std::chrono::milliseconds;

// The build directory is a compile definition of the test binaries only (not of this support
// library), so the paths that need it are inline here and reach the library as arguments.
#ifdef CONVEYOR_BINARY_DIR
inline std::string conveyor_binary() { return CONVEYOR_BINARY_DIR "/conveyor"; }
// Where child logs go: one .out and one .err file per child, named after it.
inline std::string test_log_dir() { return CONVEYOR_BINARY_DIR "/test-logs"; }
#endif

class ChildProcess {
public:
  // Starts argv[0] with argv[1..] in its own process group; its output is also written to
  // `log_dir`/<name>-<pid>.out and .err (log_dir is created if needed).
  static Expected<std::unique_ptr<ChildProcess>> spawn(std::vector<std::string> argv,
                                                       std::string name, std::string log_dir);
#ifdef CONVEYOR_BINARY_DIR
  // `conveyor <args...>`.
  static Expected<std::unique_ptr<ChildProcess>> conveyor(std::vector<std::string> args,
                                                          std::string name) {
    args.insert(args.begin(), conveyor_binary());
    return spawn(std::move(args), std::move(name), test_log_dir());
  }
#endif

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

  std::string stdout_text() const;
  std::string stderr_text() const;
  // Complete stdout lines so far (without the newline).
  std::vector<std::string> stdout_lines() const;
  // stdout and stderr plus the log file paths, for failure messages.
  std::string describe() const;

  // Waits until stdout or stderr contains `needle`; false at the deadline or if the child exited
  // (and its output is complete) without printing it.
  bool wait_for_output(const std::string& needle, Millis timeout);
  // Waits until stdout holds at least `n` complete lines.
  bool wait_for_stdout_lines(std::size_t n, Millis timeout);
  // Waits for the `listening on HOST:PORT` startup line and returns the port.
  Expected<uint16_t> wait_listening(Millis timeout);

  // Waits for the child to exit: its exit status, or 128 + signal number if a signal ended it;
  // nullopt at the deadline. Also waits for the output pipes to be drained.
  std::optional<int> wait_exit(Millis timeout);
  bool exited() const;

  // Sends `sig` to the child (not its group) if it is still running.
  void signal(int sig);
  // SIGTERM, up to `grace` for it to exit, then SIGKILL to the group; always reaps.
  void stop(Millis grace = Millis{3000});

private:
  ChildProcess() = default;
  void reader_loop();

  std::string name_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_log_;
  std::string err_log_;
  std::thread reader_;
  int wake_[2] = {-1, -1}; // lets the destructor stop the reader if a grandchild holds the pipes

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::string out_;
  std::string err_;
  bool exited_ = false; // seen with WNOWAIT: still a zombie, so its process group stays ours
  bool reaped_ = false; // waited for: pid and group id may be reused from here on
  bool pipes_closed_ = false;
  int exit_code_ = -1;
};

// The outcome of running a command to completion.
struct CommandResult {
  std::optional<int> exit_code;   // nullopt: it ran past the timeout and was killed
  std::vector<std::string> lines; // stdout lines
  std::string stdout_text;
  std::string stderr_text;
  std::string describe; // for CHECK messages
};

// Runs argv to completion (killed at `timeout`) and collects its output.
CommandResult run_to_completion(std::vector<std::string> argv, Millis timeout, std::string name,
                                std::string log_dir);
#ifdef CONVEYOR_BINARY_DIR
// Runs `conveyor <args...>` to completion.
inline CommandResult run_conveyor(std::vector<std::string> args, Millis timeout,
                                  std::string name = "cmd") {
  args.insert(args.begin(), conveyor_binary());
  return run_to_completion(std::move(args), timeout, std::move(name), test_log_dir());
}
#endif

// Integers printed one per line (e.g. by `conveyor read` of an int64 dataset), sorted; any
// non-integer line is kept in `unparsed`.
struct IntLines {
  std::vector<int64_t> sorted;
  std::vector<std::string> unparsed;
};
IntLines sorted_ints(const std::vector<std::string>& lines);

} // namespace conveyor::testing
