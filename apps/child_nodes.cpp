#include "apps/child_nodes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "apps/cli_common.hpp"

namespace conveyor::apps {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string self_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "conveyor";
  return std::string(buf, static_cast<std::size_t>(n));
}

namespace {

// The parent reads a child's readiness ("listening on", "worker: ready") from its log as text
// lines at info level, so a CONVEYOR_LOG_LEVEL of warning or error, or CONVEYOR_LOG_FORMAT=json,
// inherited from the user's shell would hide them: the child's environment keeps every other
// variable and says text at info (debug stays debug).
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("CONVEYOR_LOG_FORMAT=", 0) == 0)
      continue;
    if (var.rfind("CONVEYOR_LOG_LEVEL=", 0) == 0 && var != "CONVEYOR_LOG_LEVEL=debug")
      continue;
    env.push_back(var);
  }
  env.push_back("CONVEYOR_LOG_FORMAT=text");
  if (std::find(env.begin(), env.end(), "CONVEYOR_LOG_LEVEL=debug") == env.end())
    env.push_back("CONVEYOR_LOG_LEVEL=info");
  return env;
}

} // namespace

Expected<ChildNode> start_child(const std::string& exe, std::string role,
                                const std::vector<std::string>& args, const std::string& log_dir) {
  ChildNode node;
  node.role = std::move(role);
  node.log_path = log_dir + "/" + node.role + ".log";
  std::vector<std::string> argv{exe};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = child_environment();
  std::vector<char*> cenv;
  for (auto& v : env)
    cenv.push_back(v.data());
  cenv.push_back(nullptr);
  const int log_fd = ::open(node.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return io_error("cannot create " + node.log_path);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return io_error("fork failed for " + node.role);
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. If the parent dies without cleaning up
    // (SIGKILL), the kernel sends us SIGTERM so no node outlives the demo.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0)
      ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  node.pid = pid;
  return node;
}

// Reaps the child if it has exited; true then.
bool check_exited(ChildNode& node) {
  if (node.reaped)
    return true;
  int status = 0;
  if (::waitpid(node.pid, &status, WNOHANG) == node.pid) {
    node.reaped = true;
    node.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return node.reaped;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t proc_status_number(const std::string& proc, const char* key) {
  std::ifstream in("/proc/" + proc + "/status");
  std::string line;
  const std::string prefix = std::string{key} + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0)
      return std::atoll(line.c_str() + prefix.size());
  return -1;
}

// Waits until the node's log holds `marker` (the log file is polled: the children write it,
// nothing here can be woken by them), and takes its address from the `listening on` line.
Status wait_ready(ChildNode& node, const std::string& marker, milliseconds timeout) {
  static const std::string kListening = "listening on ";
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string log = read_file(node.log_path);
    const auto listening = log.find(kListening);
    if (log.find(marker) != std::string::npos && listening != std::string::npos) {
      const auto at = listening + kListening.size();
      node.address = log.substr(at, log.find_first_of(" \t\r\n", at) - at);
      return Status::OK();
    }
    if (check_exited(node))
      return failed_precondition(node.role + " exited with status " +
                                 std::to_string(node.exit_status) + " before it was ready:\n" +
                                 log);
    if (stop_requested())
      return Status(ErrorCode::cancelled, "interrupted while waiting for " + node.role);
    if (Clock::now() > deadline)
      return Status(ErrorCode::deadline_exceeded, node.role + " was not ready within " +
                                                    std::to_string(timeout.count()) +
                                                    " ms (log: " + node.log_path + ")");
    std::this_thread::sleep_for(milliseconds{10});
  }
}

// SIGTERM to every node still running (workers first, the dispatcher last), then SIGKILL to
// those that have not exited within `grace`; every node is reaped.
void stop_children(std::vector<ChildNode>& nodes, milliseconds grace) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (!check_exited(*it))
      ::kill(it->pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  for (;;) {
    bool all = true;
    for (auto& n : nodes)
      all = check_exited(n) && all;
    if (all)
      return;
    if (Clock::now() > deadline)
      break;
    std::this_thread::sleep_for(milliseconds{10});
  }
  for (auto& n : nodes) {
    if (!check_exited(n)) {
      std::fprintf(stderr, "conveyor: %s did not stop within %lld ms, killing it\n", n.role.c_str(),
                   static_cast<long long>(grace.count()));
      ::kill(n.pid, SIGKILL);
      int status = 0;
      ::waitpid(n.pid, &status, 0);
      n.reaped = true;
      n.exit_status = 128 + SIGKILL;
    }
  }
}

Status start_process_cluster(std::vector<ChildNode>& nodes, int workers,
                             const std::string& role_prefix,
                             const std::vector<std::string>& dispatcher_flags,
                             const std::vector<std::string>& worker_flags,
                             const std::string& log_dir, const std::string& node_exe) {
  const std::string exe = node_exe.empty() ? self_executable() : node_exe;
  std::vector<std::string> dispatcher_args{"dispatcher", "--port", "0", "--host", "127.0.0.1"};
  dispatcher_args.insert(dispatcher_args.end(), dispatcher_flags.begin(), dispatcher_flags.end());
  auto d = start_child(exe, role_prefix + "dispatcher", dispatcher_args, log_dir);
  if (!d.ok())
    return d.status();
  nodes.push_back(std::move(d).value());
  const std::size_t first = nodes.size();
  CONVEYOR_RETURN_IF_ERROR(wait_ready(nodes.back(), "listening on", milliseconds{15000}));
  const std::string dispatcher_address = nodes.back().address;
  for (int i = 1; i <= workers; ++i) {
    std::vector<std::string> worker_args{"worker", "--dispatcher", dispatcher_address, "--port",
                                         "0",      "--host",       "127.0.0.1"};
    worker_args.insert(worker_args.end(), worker_flags.begin(), worker_flags.end());
    auto w = start_child(exe, role_prefix + "worker-" + std::to_string(i), worker_args, log_dir);
    if (!w.ok())
      return w.status();
    nodes.push_back(std::move(w).value());
  }
  // Workers start in parallel and are waited for together.
  for (std::size_t i = first; i < nodes.size(); ++i)
    CONVEYOR_RETURN_IF_ERROR(wait_ready(nodes[i], "worker: ready", milliseconds{15000}));
  return Status::OK();
}

Status start_bench_node_pair(std::vector<ChildNode>& nodes, const std::string& bench_name,
                             const std::string& node_exe) {
  if (!node_exe.empty() && !std::filesystem::is_regular_file(node_exe))
    return invalid_argument("`--node-exe` " + node_exe + " is not a file");
  return start_process_cluster(nodes, 1,
                               "bench-" + bench_name + "-" + std::to_string(::getpid()) + "-", {},
                               {}, std::filesystem::temp_directory_path().string(), node_exe);
}

} // namespace conveyor::apps
