#include "test/support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

extern char** environ;

namespace conveyor::testing {
namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void append_file(const std::string& path, const char* data, std::size_t n) {
  if (std::FILE* f = std::fopen(path.c_str(), "ab")) {
    std::fwrite(data, 1, n, f);
    std::fclose(f);
  }
}

// The children's environment: ours, except that LeakSanitizer is off in them unless
// CONVEYOR_CHILD_LEAK_CHECK=1. CAF 0.17.6 sometimes leaves its BASP broker (the middleman's
// connection manager) in a reference cycle when a node shuts down while connections close; the
// report is indirect leaks only, all owned by caf::io::basp_broker, in a few percent of the processes. With
// leak checks on, that would turn a clean exit status into 1 at random. AddressSanitizer's
// memory checks and UBSan stay on in the children; leaks of the node code are covered by the
// in-process unit and simulation tests.
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  const char* opt_in = std::getenv("CONVEYOR_CHILD_LEAK_CHECK");
  const bool leak_check = opt_in && std::string(opt_in) == "1";
  bool have_asan_options = false;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    if (!leak_check && entry.rfind("ASAN_OPTIONS=", 0) == 0) {
      entry +=
        (entry.size() > std::strlen("ASAN_OPTIONS=") ? ":" : "") + std::string("detect_leaks=0");
      have_asan_options = true;
    }
    env.push_back(std::move(entry));
  }
  if (!leak_check && !have_asan_options)
    env.push_back("ASAN_OPTIONS=detect_leaks=0");
  return env;
}

std::vector<std::string> split_complete_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  return lines;
}

} // namespace

Expected<std::unique_ptr<ChildProcess>> ChildProcess::spawn(std::vector<std::string> argv,
                                                            std::string name, std::string log_dir) {
  if (argv.empty())
    return invalid_argument("ChildProcess::spawn needs a program");
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec)
    return io_error("cannot create log directory " + log_dir + ": " + ec.message());

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->name_ = std::move(name);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return io_error(errno_text("pipe2"));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return io_error(errno_text("pipe2"));
  }
  if (::pipe2(child->wake_, O_CLOEXEC) != 0)
    child->wake_[0] = child->wake_[1] = -1;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group: the destructor can kill the child and anything it started in one call.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<char*> cargv;
  for (auto& a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = child_environment();
  std::vector<char*> cenv;
  for (auto& e : env)
    cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const int rc = ::posix_spawn(&child->pid_, cargv[0], &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    child->pid_ = -1;
    return io_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  child->out_fd_ = out_pipe[0];
  child->err_fd_ = err_pipe[0];
  // (glibc 2.36's <sys/pidfd.h> lacks extern "C", hence the raw syscall.) -1 is fine: the reader
  // then checks for the exit every 20 ms.
  child->pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, child->pid_, 0));
  const std::string base = log_dir + "/" + child->name_ + "-" + std::to_string(child->pid_);
  child->out_log_ = base + ".out";
  child->err_log_ = base + ".err";
  std::FILE* cmdline = std::fopen((base + ".cmd").c_str(), "w");
  if (cmdline) {
    for (const auto& a : argv)
      std::fprintf(cmdline, "%s ", a.c_str());
    std::fputc('\n', cmdline);
    std::fclose(cmdline);
  }
  ChildProcess* raw = child.get();
  child->reader_ = std::thread([raw] { raw->reader_loop(); });
  return child;
}

void ChildProcess::reader_loop() {
  char buf[65536];
  for (;;) {
    pollfd fds[4];
    int n = 0;
    int out_slot = -1, err_slot = -1, pid_slot = -1, wake_slot = -1;
    bool watch_exit;
    {
      std::lock_guard lock(mu_);
      if (out_fd_ < 0 && err_fd_ < 0 && exited_) {
        pipes_closed_ = true;
        changed_.notify_all();
        return;
      }
      watch_exit = !exited_;
    }
    if (out_fd_ >= 0)
      fds[out_slot = n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0)
      fds[err_slot = n++] = {err_fd_, POLLIN, 0};
    if (watch_exit && pidfd_ >= 0)
      fds[pid_slot = n++] = {pidfd_, POLLIN, 0};
    if (wake_[0] >= 0)
      fds[wake_slot = n++] = {wake_[0], POLLIN, 0};
    const int timeout = (watch_exit && pidfd_ < 0) ? 20 : -1;
    if (::poll(fds, n, timeout) < 0 && errno != EINTR)
      return;

    const auto drain = [&](int slot, int& fd, std::string& sink, const std::string& log) {
      if (slot < 0 || !(fds[slot].revents & (POLLIN | POLLHUP | POLLERR)))
        return;
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got > 0) {
        append_file(log, buf, static_cast<std::size_t>(got));
        std::lock_guard lock(mu_);
        sink.append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        std::lock_guard lock(mu_);
        close_fd(fd);
      }
    };
    drain(out_slot, out_fd_, out_, out_log_);
    drain(err_slot, err_fd_, err_, err_log_);

    if (watch_exit) {
      // WNOWAIT: note the exit but leave the zombie, so that the pid and process group stay
      // reserved until stop() has killed whatever else is in the group.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid_) {
        std::lock_guard lock(mu_);
        exited_ = true;
        exit_code_ = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
      }
    }
    {
      std::lock_guard lock(mu_);
      if (out_fd_ < 0 && err_fd_ < 0)
        pipes_closed_ = true;
    }
    changed_.notify_all();
    if (wake_slot >= 0 && (fds[wake_slot].revents & POLLIN))
      return;
  }
}

ChildProcess::~ChildProcess() {
  stop();
  if (reader_.joinable()) {
    {
      // The pipes normally close when the group is dead; if something outside the group still
      // holds them, stop waiting after a bound.
      std::unique_lock lock(mu_);
      changed_.wait_for(lock, Millis{2000}, [&] { return pipes_closed_; });
    }
    if (wake_[1] >= 0) {
      const char byte = 1;
      [[maybe_unused]] auto n = ::write(wake_[1], &byte, 1);
    }
    reader_.join();
  }
  close_fd(out_fd_);
  close_fd(err_fd_);
  close_fd(pidfd_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

void ChildProcess::signal(int sig) {
  std::lock_guard lock(mu_);
  if (!exited_ && pid_ > 0)
    ::kill(pid_, sig);
}

void ChildProcess::stop(Millis grace) {
  if (pid_ <= 0)
    return;
  std::unique_lock lock(mu_);
  if (reaped_)
    return;
  if (!exited_) {
    ::kill(pid_, SIGTERM);
    changed_.wait_for(lock, grace, [&] { return exited_; });
  }
  // The leader is alive or a zombie, so the group id is still ours: kill what is left of it.
  ::killpg(pid_, SIGKILL);
  changed_.wait_for(lock, Millis{10000}, [&] { return exited_; });
  lock.unlock();
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  lock.lock();
  if (!exited_) { // the reader had not seen it yet
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  reaped_ = true;
  changed_.notify_all();
}

bool ChildProcess::exited() const {
  std::lock_guard lock(mu_);
  return exited_;
}

std::optional<int> ChildProcess::wait_exit(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mu_);
  if (!changed_.wait_until(lock, deadline, [&] { return exited_; }))
    return std::nullopt;
  // Output written just before exit may still be in the pipes; a grandchild could hold them
  // open, so bound this wait too.
  changed_.wait_until(lock, std::min(deadline + Millis{1000}, Clock::now() + Millis{1000}),
                      [&] { return pipes_closed_; });
  return exit_code_;
}

std::string ChildProcess::stdout_text() const {
  std::lock_guard lock(mu_);
  return out_;
}

std::string ChildProcess::stderr_text() const {
  std::lock_guard lock(mu_);
  return err_;
}

std::vector<std::string> ChildProcess::stdout_lines() const {
  return split_complete_lines(stdout_text());
}

std::string ChildProcess::describe() const {
  std::lock_guard lock(mu_);
  std::ostringstream s;
  s << "[" << name_ << " pid " << pid_
    << (exited_ ? ", exit " + std::to_string(exit_code_) : ", running") << "; logs " << out_log_
    << " / .err]\n--- stdout (tail):\n"
    << (out_.size() > 3000 ? "..." + out_.substr(out_.size() - 3000) : out_)
    << "\n--- stderr (tail):\n"
    << (err_.size() > 3000 ? "..." + err_.substr(err_.size() - 3000) : err_);
  return s.str();
}

bool ChildProcess::wait_for_output(const std::string& needle, Millis timeout) {
  std::unique_lock lock(mu_);
  bool found = false;
  changed_.wait_for(lock, timeout, [&] {
    found = out_.find(needle) != std::string::npos || err_.find(needle) != std::string::npos;
    return found || (exited_ && pipes_closed_);
  });
  return found;
}

bool ChildProcess::wait_for_stdout_lines(std::size_t n, Millis timeout) {
  std::unique_lock lock(mu_);
  bool enough = false;
  changed_.wait_for(lock, timeout, [&] {
    enough = static_cast<std::size_t>(std::count(out_.begin(), out_.end(), '\n')) >= n;
    return enough || (exited_ && pipes_closed_);
  });
  return enough;
}

Expected<uint16_t> ChildProcess::wait_listening(Millis timeout) {
  static const std::string kMarker = "listening on ";
  if (!wait_for_output(kMarker, timeout))
    return Status(ErrorCode::deadline_exceeded, "no `listening on HOST:PORT` line within " +
                                                  std::to_string(timeout.count()) + " ms\n" +
                                                  describe());
  const std::string text = stdout_text() + "\n" + stderr_text();
  const auto at = text.find(kMarker) + kMarker.size();
  const auto end = text.find_first_of(" \t\r\n", at);
  const std::string address = text.substr(at, end - at);
  const auto colon = address.rfind(':');
  unsigned port = 0;
  if (colon == std::string::npos ||
      std::from_chars(address.data() + colon + 1, address.data() + address.size(), port).ec !=
        std::errc{} ||
      port == 0 || port > 65535)
    return invalid_argument("cannot read a port from `listening on " + address + "`\n" +
                            describe());
  return static_cast<uint16_t>(port);
}

CommandResult run_to_completion(std::vector<std::string> argv, Millis timeout, std::string name,
                                std::string log_dir) {
  CommandResult result;
  auto child = ChildProcess::spawn(std::move(argv), std::move(name), std::move(log_dir));
  if (!child.ok()) {
    result.describe = child.status().to_string();
    return result;
  }
  result.exit_code = (*child)->wait_exit(timeout);
  if (!result.exit_code)
    (*child)->stop(Millis{500});
  result.stdout_text = (*child)->stdout_text();
  result.stderr_text = (*child)->stderr_text();
  result.lines = split_complete_lines(result.stdout_text);
  result.describe = (*child)->describe();
  return result;
}

IntLines sorted_ints(const std::vector<std::string>& lines) {
  IntLines out;
  for (const auto& line : lines) {
    int64_t v = 0;
    const auto r = std::from_chars(line.data(), line.data() + line.size(), v);
    if (!line.empty() && r.ec == std::errc{} && r.ptr == line.data() + line.size())
      out.sorted.push_back(v);
    else
      out.unparsed.push_back(line);
  }
  std::sort(out.sorted.begin(), out.sorted.end());
  return out;
}

} // namespace conveyor::testing
