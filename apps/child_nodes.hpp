// Child `conveyor` processes (a dispatcher, workers) started by `conveyor run` and by the
// benchmarks that measure a node as its own process: each writes its log to a file (a pipe
// nobody drains could block it), readiness is its `listening on HOST:PORT` line, and every
// child is stopped and reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/status.hpp"

namespace conveyor::apps {

struct ChildNode {
  std::string role; // "dispatcher", "worker-1", ...
  pid_t pid = -1;
  std::string log_path;
  std::string address; // from its `listening on HOST:PORT` line
  bool reaped = false;
  int exit_status = 0;
};

// This binary (/proc/self/exe), for starting its own subcommands.
std::string self_executable();

// Starts `exe args...` with stdout and stderr in LOG_DIR/ROLE.log; the child gets SIGTERM if
// this process dies.
Expected<ChildNode> start_child(const std::string& exe, std::string role,
                                const std::vector<std::string>& args, const std::string& log_dir);

// Reaps the child if it has exited; true then.
bool check_exited(ChildNode& node);

std::string read_file(const std::string& path);

// The number after `key:` in /proc/PROC/status (PROC a pid, or "self"), e.g. "VmRSS" (kB) or
// "Threads"; -1 when unknown.
int64_t proc_status_number(const std::string& proc, const char* key);

// Waits until the node's log holds `marker` and takes its address from the `listening on`
// line. failed_precondition when it exited first, deadline_exceeded after `timeout`,
// cancelled on SIGINT/SIGTERM.
Status wait_ready(ChildNode& node, const std::string& marker, std::chrono::milliseconds timeout);

// SIGTERM to every node still running (the last first), then SIGKILL to those that have not
// exited within `grace`; every node is reaped.
void stop_children(std::vector<ChildNode>& nodes, std::chrono::milliseconds grace);

// Stops the nodes (stop_children, 5 s grace) when it goes out of scope, however its scope ends.
struct StopChildrenOnExit {
  std::vector<ChildNode>& nodes;
  ~StopChildrenOnExit() { stop_children(nodes, std::chrono::milliseconds{5000}); }
};

// A dispatcher and `workers` workers as children of this binary on 127.0.0.1 with free ports,
// appended to `nodes` (the dispatcher first, roles PREFIX"dispatcher", PREFIX"worker-1", ...).
// Returns once every worker says "worker: ready" (the dispatcher registered it), so a job that
// starts then has all of them. The caller stops the nodes (stop_children), also on failure.
// `exe`: the `conveyor` binary the nodes run (empty = this one; a benchmark may compare another
// build's nodes).
Status start_process_cluster(std::vector<ChildNode>& nodes, int workers,
                             const std::string& role_prefix,
                             const std::vector<std::string>& dispatcher_flags,
                             const std::vector<std::string>& worker_flags,
                             const std::string& log_dir, const std::string& exe = "");

// A benchmark's cluster of one dispatcher and one worker (start_process_cluster, logs in the
// temporary directory, roles "bench-NAME-PID-..."), run from `node_exe` (empty = this binary;
// invalid_argument naming `--node-exe` when it is not a file).
Status start_bench_node_pair(std::vector<ChildNode>& nodes, const std::string& bench_name,
                             const std::string& node_exe);

} // namespace conveyor::apps
