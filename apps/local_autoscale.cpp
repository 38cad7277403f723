#include "apps/local_autoscale.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "node/shell_quote.hpp"

namespace conveyor::apps {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A worker that is not ready this long after its start is given up (killed, reported).
constexpr milliseconds kReadyTimeout{15000};

bool is_worker(const ChildNode& n) { return n.role.rfind("worker-", 0) == 0; }

} // namespace

std::vector<std::string> autoscale_dispatcher_flags(const LocalAutoscaleConfig& config,
                                                    const std::string& target_file) {
  // Renamed into place, so `run` never reads a half-written number.
  const std::string tmp = shell_quote(target_file + ".tmp");
  return {"--scale-command",
          "echo {n} > " + tmp + " && mv -f " + tmp + " " + shell_quote(target_file),
          "--min-workers",
          std::to_string(config.min_workers),
          "--max-workers",
          std::to_string(config.max_workers),
          "--autoscale-interval-ms",
          std::to_string(config.interval.count()),
          "--scale-cooldown-ms",
          std::to_string(config.cooldown.count())};
}

LocalAutoscaler::LocalAutoscaler(std::vector<ChildNode>& workers, std::string exe,
                                 std::string dispatcher_address,
                                 std::vector<std::string> worker_flags, std::string log_dir,
                                 std::string target_file)
  : nodes_(workers), exe_(std::move(exe)), dispatcher_address_(std::move(dispatcher_address)),
    worker_flags_(std::move(worker_flags)), log_dir_(std::move(log_dir)),
    target_file_(std::move(target_file)) {
  for (const auto& n : nodes_)
    if (is_worker(n))
      ++next_index_;
}

void LocalAutoscaler::start() { start_ = Clock::now(); }

int64_t LocalAutoscaler::read_target() {
  const std::string text = read_file(target_file_);
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || n < 0)
    return -1; // not written yet
  return n;
}

int64_t LocalAutoscaler::live_workers() const {
  return std::count_if(nodes_.begin(), nodes_.end(), [](const ChildNode& n) {
    return is_worker(n) && !n.reaped && !n.address.empty();
  });
}

bool LocalAutoscaler::start_worker() {
  const std::string role = "worker-" + std::to_string(next_index_++);
  std::vector<std::string> args{"worker", "--dispatcher", dispatcher_address_, "--port",
                                "0",      "--host",       "127.0.0.1"};
  args.insert(args.end(), worker_flags_.begin(), worker_flags_.end());
  auto w = start_child(exe_, role, args, log_dir_);
  if (!w.ok()) {
    failures_.push_back(role + " (could not start: " + w.status().to_string() + ")");
    return false;
  }
  nodes_.push_back(std::move(w).value());
  ready_by_.emplace_back(role, Clock::now() + kReadyTimeout);
  return true;
}

void LocalAutoscaler::drain_newest() {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    if (!is_worker(*it) || it->reaped)
      continue;
    // SIGTERM: the worker delivers what it started, deregisters and exits (`--drain-timeout`).
    ::kill(it->pid, SIGTERM);
    drained_.push_back(std::move(*it));
    nodes_.erase(std::next(it).base());
    return;
  }
}

void LocalAutoscaler::poll() {
  const auto now = Clock::now();
  // Workers started earlier: ready once the dispatcher registered them.
  for (auto it = ready_by_.begin(); it != ready_by_.end();) {
    auto node = std::find_if(nodes_.begin(), nodes_.end(),
                             [&](const ChildNode& n) { return n.role == it->first; });
    if (node == nodes_.end()) { // drained before it was ready
      it = ready_by_.erase(it);
      continue;
    }
    const Status st = wait_ready(*node, "worker: ready", milliseconds{0});
    if (st.ok()) {
      it = ready_by_.erase(it);
    } else if (node->reaped || now > it->second) {
      failures_.push_back(node->role + " did not get ready: " + st.message());
      if (!node->reaped) {
        ::kill(node->pid, SIGKILL);
        int status = 0;
        ::waitpid(node->pid, &status, 0);
        node->reaped = true;
      }
      it = ready_by_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& d : drained_)
    check_exited(d);

  const int64_t target = read_target();
  if (target < 0)
    return;
  int64_t have = std::count_if(nodes_.begin(), nodes_.end(),
                               [](const ChildNode& n) { return is_worker(n) && !n.reaped; });
  if (target == have)
    return;
  Event e;
  e.at_s = std::chrono::duration<double>(now - start_).count();
  e.from = have;
  e.to = target;
  if (target > have) {
    std::string names;
    while (have < target) {
      if (!start_worker())
        return; // reported by failures(); the dispatcher asks again after its cooldown
      names += (names.empty() ? "" : ", ") + nodes_.back().role + " (pid " +
               std::to_string(nodes_.back().pid) + ")";
      ++have;
    }
    e.detail = "starting " + names;
  } else {
    std::string names;
    while (have > target) {
      drain_newest();
      names += (names.empty() ? "" : ", ") + drained_.back().role;
      --have;
    }
    e.detail = "draining " + names;
  }
  events_.push_back(std::move(e));
}

std::vector<std::string> LocalAutoscaler::failures() {
  std::vector<std::string> out = failures_;
  for (auto& d : drained_)
    if (check_exited(d) && d.exit_status != 0)
      out.push_back(d.role + " (drained; exit status " + std::to_string(d.exit_status) + ", log " +
                    d.log_path + ")");
  return out;
}

void LocalAutoscaler::stop(milliseconds grace) {
  // They already have their SIGTERM: a second one would cut their drain short.
  const auto deadline = Clock::now() + grace;
  for (auto& d : drained_) {
    while (!check_exited(d) && Clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds{10});
    if (!check_exited(d)) {
      ::kill(d.pid, SIGKILL);
      int status = 0;
      ::waitpid(d.pid, &status, 0);
      d.reaped = true;
      d.exit_status = 128 + SIGKILL;
    }
  }
}

} // namespace conveyor::apps
