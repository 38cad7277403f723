// Prometheus metrics of a node (`--metrics-port`): a text endpoint over HTTP served by
// prometheus-cpp's exposer (civetweb). No prometheus or CAF types in this header.
//
// The dispatcher's metrics are computed at scrape time from its `conveyor status` answer
// (workers, heartbeat ages, jobs, delivered elements/bytes, consumers' waiting time by cause,
// the worker estimate conveyor_desired_workers and the autoscaler's target and commands).
// A worker's come from per-task counters its task actors update (TaskStats below): produced and
// delivered elements, delivered bytes, buffer fill, pauses on a full buffer (consumers' credits),
// split waits. A task's series disappear when the task ends, so the endpoint never grows.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/runtime/status.hpp"

namespace conveyor::msg {
struct cluster_status;
}

namespace conveyor::metrics {

// One sample of the text format: name{labels} value, in a family with help and type.
struct Sample {
  std::string name;
  std::string help;
  std::string type; // "counter" or "gauge"
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The counters of one task on a worker; updated by its task actor, read by scrapes.
struct TaskStats {
  uint64_t job = 0;
  uint64_t task = 0;
  std::string dataset;
  std::string tenant; // the job's tenant (per-tenant buffered bytes sum the live tasks' buffers)
  std::atomic<int64_t> produced_elements{0};
  std::atomic<int64_t> delivered_elements{0};
  std::atomic<int64_t> delivered_bytes{0};
  std::atomic<int64_t> buffered_elements{0};
  std::atomic<int64_t> buffered_bytes{0};
  std::atomic<int64_t> buffer_full_total{0}; // produce steps skipped: consumers had no credit
  std::atomic<int64_t> split_waits_total{0};
  std::atomic<int64_t> split_wait_ns{0};
  std::atomic<int64_t> splits_ahead{0}; // DYNAMIC: splits taken from the job, not started
  std::atomic<bool> ended{false};       // the task stopped (its counters stay listed a while)
};

// Registers a task's counters for this process's worker endpoint; they are listed while the
// task runs, and after it ended as one of the last 100 tasks registered (so a finished job's
// totals stay visible; bounded).
std::shared_ptr<TaskStats> register_task(uint64_t job, uint64_t task, std::string dataset,
                                         std::string tenant = "default");
// The live tasks' samples, the bytes each tenant's tasks buffer and the executor's thread time per
// tenant (what a worker's endpoint serves).
std::vector<Sample> task_samples();
// A cluster status as samples (what the dispatcher's endpoint serves).
std::vector<Sample> status_samples(const msg::cluster_status& status);

// Renders samples in the Prometheus text format (for tests and tools without the exposer).
std::string to_text(const std::vector<Sample>& samples);

// The HTTP endpoint: GET /metrics on host:port serves what `collect` returns at each scrape;
// GET /healthz answers 200 while the process serves HTTP at all (liveness), GET /readyz 200 when
// `ready` returns "" and 503 with its reason otherwise (readiness: a worker registered with its
// dispatcher, a dispatcher with its journal replayed that answers requests).
class Endpoint {
public:
  using Collect = std::function<std::vector<Sample>()>;
  using Ready = std::function<std::string()>; // "" = ready, else why not
  // port 0 = a free port. io_error naming host:port when it cannot listen. Without `ready`,
  // /readyz answers as /healthz.
  static Expected<std::unique_ptr<Endpoint>> start(const std::string& host, uint16_t port,
                                                   Collect collect, Ready ready = {});
  ~Endpoint();
  uint16_t port() const { return port_; }

private:
  struct Impl;
  explicit Endpoint(std::unique_ptr<Impl> impl, uint16_t port);
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

} // namespace conveyor::metrics
