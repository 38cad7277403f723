// `conveyor run --autoscale`: the actuator that follows the dispatcher's autoscaler with local
// worker processes. The dispatcher decides (dispatcher/autoscale_policy.hpp); its
// `--scale-command` writes each new target to a file in the run's log directory (written to a
// temporary name and renamed, so a half-written number is never read), and `run` polls that
// file between elements: it starts worker processes up to the target, and drains the newest ones
// down to it with SIGTERM (the worker delivers its started work, then exits), so a DYNAMIC
// read loses no element. The file is the whole interface: no new message, and the dispatcher's
// own command machinery (one command at a time, newest target wins, failures counted) is the
// one a Kubernetes deployment uses.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "apps/child_nodes.hpp"
#include "conveyor/status.hpp"

namespace conveyor::apps {

struct LocalAutoscaleConfig {
  int64_t min_workers = 1;
  int64_t max_workers = 4;
  std::chrono::milliseconds interval{1000}; // the dispatcher's --autoscale-interval-ms
  std::chrono::milliseconds cooldown{3000}; // its --scale-cooldown-ms
};

// The dispatcher flags that make it decide and write its targets to `target_file`.
std::vector<std::string> autoscale_dispatcher_flags(const LocalAutoscaleConfig& config,
                                                    const std::string& target_file);

class LocalAutoscaler {
public:
  // One worker-count change as `run` carried it out.
  struct Event {
    double at_s = 0; // since start()
    int64_t from = 0, to = 0;
    std::string detail; // which workers started or drain
  };

  // `workers`: the cluster's node list (LocalCluster's), whose worker entries it manages:
  // it appends the workers it starts, and moves those it drains to its own list.
  LocalAutoscaler(std::vector<ChildNode>& workers, std::string exe, std::string dispatcher_address,
                  std::vector<std::string> worker_flags, std::string log_dir,
                  std::string target_file);

  void start();
  // Reads the target and acts on it; returns quickly (never waits for a worker). Call often.
  void poll();
  // Workers running and not draining (started ones included once ready).
  int64_t live_workers() const;
  const std::vector<Event>& events() const { return events_; }
  // Drained workers that exited with a non-zero status ("worker-3 (exit status 1, log ...)"),
  // and workers that did not get ready.
  std::vector<std::string> failures();
  // Waits (up to `grace`, then SIGKILL) for the draining workers to exit.
  void stop(std::chrono::milliseconds grace);
  // Roles of every worker it drained (for naming addresses in the summary).
  const std::vector<ChildNode>& drained() const { return drained_; }

private:
  int64_t read_target();
  bool start_worker(); // false when it could not (recorded in failures_)
  void drain_newest();

  std::vector<ChildNode>& nodes_;
  const std::string exe_, dispatcher_address_;
  const std::vector<std::string> worker_flags_;
  const std::string log_dir_, target_file_;
  std::chrono::steady_clock::time_point start_;
  int next_index_ = 1;
  // Workers started and not ready yet, with the time they are given up at.
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> ready_by_;
  std::vector<ChildNode> drained_;
  std::vector<std::string> failures_;
  std::vector<Event> events_;
};

} // namespace conveyor::apps
