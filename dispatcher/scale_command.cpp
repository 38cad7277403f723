#include "dispatcher/scale_command.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace conveyor::actors {

Status ScaleCommand::validate(const std::string& templ) {
  if (templ.find("{n}") == std::string::npos)
    return invalid_argument("`--scale-command` must contain {n} (the worker count it is run "
                            "with), e.g. 'kubectl scale deployment/conveyor-worker "
                            "--replicas={n}', got \"" +
                            templ + "\"");
  return Status::OK();
}

std::string ScaleCommand::expand(const std::string& templ, int64_t n) {
  std::string out = templ;
  const std::string count = std::to_string(n);
  for (auto p = out.find("{n}"); p != std::string::npos; p = out.find("{n}", p + count.size()))
    out.replace(p, 3, count);
  return out;
}

ScaleCommand::ScaleCommand(std::string templ, Log log, std::chrono::milliseconds timeout)
  : templ_(std::move(templ)), log_(std::move(log)), timeout_(timeout) {
  thread_ = std::thread([this] { loop(); });
}

ScaleCommand::~ScaleCommand() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ScaleCommand::request(int64_t n) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    pending_ = n;
  }
  cv_.notify_all();
}

void ScaleCommand::loop() {
  for (;;) {
    int64_t n = 0;
    {
      std::unique_lock<std::mutex> lock{mu_};
      cv_.wait(lock, [this] { return stopping_ || pending_.has_value(); });
      if (stopping_)
        return;
      n = *pending_;
      pending_.reset();
    }
    const std::string cmd = expand(templ_, n);
    std::string error = run_one(n);
    if (log_) // before the counts: whoever sees a run counted finds its line logged
      log_(!error.empty(), error.empty() ? "scale command `" + cmd + "` done"
                                         : "scale command `" + cmd + "` failed: " + error);
    if (!error.empty())
      ++failures_;
    ++runs_;
  }
}

std::string ScaleCommand::run_one(int64_t n) {
  const std::string cmd = expand(templ_, n);
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  // In a process group of its own, so that a timeout kills what the shell started too.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, &attr, const_cast<char**>(argv), environ);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return std::string{"cannot start /bin/sh: "} + std::strerror(rc);
  // Polled rather than a blocking waitpid: the timeout and a stopping dispatcher must be able to
  // end it. Bounded by the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return {};
      if (WIFEXITED(status))
        return "exit status " + std::to_string(WEXITSTATUS(status));
      return "killed by signal " + std::to_string(WTERMSIG(status));
    }
    if (r < 0 && errno != EINTR)
      return std::string{"waitpid: "} + std::strerror(errno);
    bool stopping = false;
    {
      std::lock_guard<std::mutex> guard{mu_};
      stopping = stopping_;
    }
    const bool late = std::chrono::steady_clock::now() >= deadline;
    if (stopping || late) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return late ? "still running after " + std::to_string(timeout_.count()) + " ms: killed"
                  : std::string{"the dispatcher stopped: killed"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace conveyor::actors
