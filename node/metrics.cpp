#include "node/metrics.hpp"

#include <algorithm>
#include <deque>
#include <mutex>

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "conveyor/options.hpp"
#include "messages/status.hpp"
#include "pipeline/runtime/executor.hpp"

namespace conveyor::metrics {

namespace {

struct TaskTable {
  std::mutex mu;
  std::vector<std::weak_ptr<TaskStats>> tasks;
  std::deque<std::shared_ptr<TaskStats>> recent; // the last kKeptTasks registered
};
constexpr std::size_t kKeptTasks = 100;

TaskTable& table() {
  static TaskTable t;
  return t;
}

Sample sample(const char* name, const char* help, const char* type,
              std::map<std::string, std::string> labels, double value) {
  return Sample{name, help, type, std::move(labels), value};
}

std::vector<prometheus::MetricFamily> to_families(const std::vector<Sample>& samples) {
  std::vector<prometheus::MetricFamily> families;
  std::map<std::string, std::size_t> index;
  for (const auto& s : samples) {
    auto it = index.find(s.name);
    if (it == index.end()) {
      prometheus::MetricFamily f;
      f.name = s.name;
      f.help = s.help;
      f.type =
        s.type == "counter" ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
      it = index.emplace(s.name, families.size()).first;
      families.push_back(std::move(f));
    }
    auto& family = families[it->second];
    prometheus::ClientMetric m;
    for (const auto& [k, v] : s.labels)
      m.label.push_back({k, v});
    if (family.type == prometheus::MetricType::Counter)
      m.counter.value = s.value;
    else
      m.gauge.value = s.value;
    family.metric.push_back(std::move(m));
  }
  return families;
}

class FunctionCollectable : public prometheus::Collectable {
public:
  explicit FunctionCollectable(Endpoint::Collect collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return to_families(collect_()); }

private:
  Endpoint::Collect collect_;
};

// /healthz and /readyz, answered by civetweb's begin_request callback before the exposer's
// handlers see the request. The callback has no user data of its own, so each endpoint's
// readiness is found by the port the request came in on.
struct ReadyTable {
  std::mutex mu;
  std::map<int, std::shared_ptr<const Endpoint::Ready>> by_port;
};

ReadyTable& ready_table() {
  static ReadyTable t;
  return t;
}

int answer(mg_connection* conn, int code, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            "%zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            code, code == 200 ? "OK" : "Service Unavailable", body.size());
  mg_write(conn, body.data(), body.size());
  return code;
}

int health_request(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  if (ri == nullptr || ri->local_uri == nullptr)
    return 0;
  const std::string uri = ri->local_uri;
  if (uri == "/healthz")
    return answer(conn, 200, "ok\n");
  if (uri != "/readyz")
    return 0; // the exposer's (/metrics) or its 404
  std::shared_ptr<const Endpoint::Ready> ready;
  {
    auto& t = ready_table();
    std::lock_guard<std::mutex> guard{t.mu};
    if (auto it = t.by_port.find(ri->server_port); it != t.by_port.end())
      ready = it->second;
  }
  if (!ready)
    return answer(conn, 503, "not ready: starting\n");
  std::string why = *ready ? (*ready)() : std::string{};
  return why.empty() ? answer(conn, 200, "ready\n") : answer(conn, 503, "not ready: " + why + "\n");
}

const CivetCallbacks* health_callbacks() {
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;
    c.begin_request = health_request;
    return c;
  }();
  return &callbacks;
}

} // namespace

std::shared_ptr<TaskStats> register_task(uint64_t job, uint64_t task, std::string dataset,
                                         std::string tenant) {
  auto stats = std::make_shared<TaskStats>();
  stats->job = job;
  stats->task = task;
  stats->dataset = std::move(dataset);
  stats->tenant = std::move(tenant);
  auto& t = table();
  std::lock_guard<std::mutex> guard{t.mu};
  // Drop the entries of ended tasks here, so the table stays as small as the live tasks.
  t.tasks.erase(
    std::remove_if(t.tasks.begin(), t.tasks.end(), [](const auto& w) { return w.expired(); }),
    t.tasks.end());
  t.tasks.push_back(stats);
  t.recent.push_back(stats);
  while (t.recent.size() > kKeptTasks)
    t.recent.pop_front();
  return stats;
}

std::vector<Sample> task_samples() {
  std::vector<std::shared_ptr<TaskStats>> live;
  {
    auto& t = table();
    std::lock_guard<std::mutex> guard{t.mu};
    for (const auto& w : t.tasks)
      if (auto s = w.lock())
        live.push_back(std::move(s));
  }
  std::vector<Sample> out;
  const auto running =
    std::count_if(live.begin(), live.end(), [](const auto& s) { return !s->ended.load(); });
  out.push_back(sample("conveyor_worker_tasks", "tasks running on this worker", "gauge", {},
                       static_cast<double>(running)));
  for (const auto& s : live) {
    std::map<std::string, std::string> l{
      {"job", std::to_string(s->job)}, {"task", std::to_string(s->task)}, {"dataset", s->dataset}};
    out.push_back(sample("conveyor_task_produced_elements_total",
                         "elements the task's pipeline produced", "counter", l,
                         static_cast<double>(s->produced_elements.load())));
    out.push_back(sample("conveyor_task_delivered_elements_total",
                         "elements the task sent to consumers", "counter", l,
                         static_cast<double>(s->delivered_elements.load())));
    out.push_back(sample("conveyor_task_delivered_bytes_total",
                         "encoded bytes the task sent to consumers", "counter", l,
                         static_cast<double>(s->delivered_bytes.load())));
    // An ended task's buffer went with it: its last fill is memory nobody holds any more.
    const bool ended = s->ended.load();
    out.push_back(sample("conveyor_task_buffered_elements",
                         "elements produced and not yet taken by consumers", "gauge", l,
                         ended ? 0.0 : static_cast<double>(s->buffered_elements.load())));
    out.push_back(sample("conveyor_task_buffered_bytes",
                         "bytes produced and not yet taken by consumers", "gauge", l,
                         ended ? 0.0 : static_cast<double>(s->buffered_bytes.load())));
    out.push_back(sample("conveyor_task_credit_stalls_total",
                         "times the pipeline paused because its buffer was full (consumers had "
                         "no credit left)",
                         "counter", l, static_cast<double>(s->buffer_full_total.load())));
    out.push_back(sample("conveyor_task_split_waits_total",
                         "DYNAMIC: split requests the task waited for", "counter", l,
                         static_cast<double>(s->split_waits_total.load())));
    out.push_back(sample("conveyor_task_split_wait_seconds_total",
                         "DYNAMIC: time the task waited for splits", "counter", l,
                         static_cast<double>(s->split_wait_ns.load()) / 1e9));
    out.push_back(sample("conveyor_task_splits_ahead",
                         "DYNAMIC: splits the task took from the job and has not started (no "
                         "other task can take them)",
                         "gauge", l, ended ? 0.0 : static_cast<double>(s->splits_ahead.load())));
  }
  // The bytes each tenant's tasks buffer here (issue 38), as the dispatcher's
  // conveyor_tenant_buffered_bytes shows them from heartbeats, but current: what
  // --tenant-max-buffer-bytes caps. A tenant whose tasks all ended is listed with 0 while they
  // are among the kept ones, so its series drops to 0 instead of vanishing at its last value.
  std::map<std::string, int64_t> tenant_bytes;
  for (const auto& s : live) {
    auto& bytes = tenant_bytes[s->tenant];
    if (!s->ended.load())
      bytes += s->buffered_bytes.load();
  }
  for (const auto& [tenant, bytes] : tenant_bytes)
    out.push_back(sample("conveyor_worker_tenant_buffered_bytes",
                         "bytes the tenant's tasks on this worker buffer (produced, not yet taken "
                         "by consumers)",
                         "gauge", {{"tenant", tenant}}, static_cast<double>(bytes)));
  // The executor's thread time per tenant (issue 38): how the worker's threads were shared.
  for (const auto& u : Executor::shared().tenant_usage())
    out.push_back(sample("conveyor_tenant_thread_seconds_total",
                         "executor thread time the tenant's jobs held on this worker (running "
                         "items included)",
                         "counter", {{"tenant", u.tenant}}, u.thread_seconds));
  return out;
}

std::vector<Sample> status_samples(const msg::cluster_status& st) {
  std::vector<Sample> out;
  out.push_back(sample("conveyor_dispatcher_uptime_seconds", "since the dispatcher started",
                       "gauge", {}, static_cast<double>(st.uptime_ms) / 1e3));
  out.push_back(sample("conveyor_workers", "registered workers", "gauge", {},
                       static_cast<double>(st.workers.size())));
  out.push_back(sample("conveyor_datasets", "registered datasets (listed ones)", "gauge", {},
                       static_cast<double>(st.datasets.size())));
  out.push_back(sample("conveyor_jobs",
                       "jobs conveyor status lists: live ones and the last 100 finished", "gauge",
                       {}, static_cast<double>(st.jobs.size())));
  constexpr const char* kDesired =
    "workers needed for the trainers not to wait on workers (the dispatcher's estimate; per "
    "job, and without a job label for the cluster: the largest job's need)";
  if (st.desired_workers >= 0)
    out.push_back(sample("conveyor_desired_workers", kDesired, "gauge", {},
                         static_cast<double>(st.desired_workers)));
  if (st.autoscale_target >= 0) {
    out.push_back(sample("conveyor_autoscale_target_workers",
                         "the autoscaler's worker count (--scale-command)", "gauge", {},
                         static_cast<double>(st.autoscale_target)));
    out.push_back(sample("conveyor_scale_commands_total", "scale commands run", "counter", {},
                         static_cast<double>(st.scale_commands)));
    out.push_back(sample("conveyor_scale_command_failures_total",
                         "scale commands that failed (could not start, exited non-zero or timed "
                         "out)",
                         "counter", {}, static_cast<double>(st.scale_command_failures)));
  }
  out.push_back(
    sample("conveyor_jobs_running", "jobs whose production has not ended", "gauge", {},
           static_cast<double>(std::count_if(st.jobs.begin(), st.jobs.end(),
                                             [](const auto& j) { return !j.finished; }))));
  for (const auto& t : st.tenants) { // issue 38: per-tenant caps
    std::map<std::string, std::string> l{{"tenant", t.tenant}};
    out.push_back(sample("conveyor_tenant_workers",
                         "workers holding a task of the tenant's unfinished jobs", "gauge", l,
                         static_cast<double>(t.workers)));
    if (t.max_workers > 0)
      out.push_back(sample("conveyor_tenant_max_workers",
                           "the tenant's worker cap (--tenant-max-workers)", "gauge", l,
                           static_cast<double>(t.max_workers)));
    out.push_back(sample("conveyor_tenant_buffered_bytes",
                         "bytes the tenant's tasks buffer on the workers (their last heartbeats)",
                         "gauge", l, static_cast<double>(t.buffered_bytes)));
    if (t.max_buffer_bytes > 0)
      out.push_back(sample("conveyor_tenant_max_buffer_bytes",
                           "the tenant's buffer cap on each worker (--tenant-max-buffer-bytes)",
                           "gauge", l, static_cast<double>(t.max_buffer_bytes)));
  }
  for (const auto& w : st.workers) {
    std::map<std::string, std::string> l{{"worker", w.address}};
    out.push_back(sample("conveyor_worker_heartbeat_age_seconds",
                         "since the dispatcher last heard from the worker", "gauge", l,
                         static_cast<double>(w.heartbeat_age_ms) / 1e3));
    out.push_back(sample("conveyor_worker_task_count", "tasks the worker runs", "gauge", l,
                         static_cast<double>(w.tasks)));
    std::string tags;
    for (const auto& t : w.tags)
      tags += (tags.empty() ? "" : ",") + t;
    l["tags"] = tags;
    out.push_back(sample("conveyor_worker_info", "the worker's tags (--worker-tags), always 1",
                         "gauge", l, 1.0));
  }
  for (const auto& j : st.jobs) {
    std::map<std::string, std::string> l{{"job", std::to_string(j.id)},
                                         {"job_name", j.name},
                                         {"dataset", j.dataset},
                                         {"mode", j.mode}};
    out.push_back(sample("conveyor_job_delivered_elements_total",
                         "elements the job's consumers received", "counter", l,
                         static_cast<double>(j.elements)));
    out.push_back(sample("conveyor_job_delivered_bytes_total",
                         "encoded bytes the job's consumers received", "counter", l,
                         static_cast<double>(j.bytes)));
    out.push_back(sample("conveyor_job_consumers", "consumers reading the job", "gauge", l,
                         static_cast<double>(j.consumers)));
    out.push_back(
      sample("conveyor_job_tasks", "tasks of the job", "gauge", l, static_cast<double>(j.tasks)));
    if (j.splits_handed_out >= 0) {
      out.push_back(sample("conveyor_job_splits_handed_out_total", "DYNAMIC: splits handed out",
                           "counter", l, static_cast<double>(j.splits_handed_out)));
      out.push_back(sample("conveyor_job_epoch", "DYNAMIC: the job's split epoch", "gauge", l,
                           static_cast<double>(j.epoch)));
    }
    const std::pair<const char*, int64_t> causes[] = {{"worker", j.waiting.wait_worker_ns},
                                                      {"network", j.waiting.wait_network_ns},
                                                      {"split", j.waiting.wait_split_ns},
                                                      {"credit", j.waiting.wait_credit_ns}};
    for (const auto& [cause, ns] : causes) {
      auto lc = l;
      lc["cause"] = cause;
      out.push_back(sample("conveyor_job_consumer_wait_seconds_total",
                           "time the job's consumers waited with nothing to read, by cause",
                           "counter", lc, static_cast<double>(ns) / 1e9));
    }
    if (j.desired_workers >= 0)
      out.push_back(sample("conveyor_desired_workers", kDesired, "gauge", l,
                           static_cast<double>(j.desired_workers)));
    out.push_back(sample("conveyor_job_lost_tasks_total",
                         "OFF tasks lost before their end that the job's consumers read on "
                         "without (on_worker_loss \"continue\": a short copy)",
                         "counter", l, static_cast<double>(j.waiting.lost_tasks)));
    out.push_back(sample("conveyor_job_consumer_seconds_total",
                         "time the job's consumers have been reading (sum over consumers)",
                         "counter", l, static_cast<double>(j.waiting.elapsed_ns) / 1e9));
  }
  return out;
}

std::string to_text(const std::vector<Sample>& samples) {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(to_families(samples));
}

struct Endpoint::Impl {
  int port = -1; // its entry in the ready table (-1: none yet)
  std::unique_ptr<prometheus::Exposer> exposer;
  std::shared_ptr<FunctionCollectable> collectable;
  ~Impl() {
    // Out of the table first: the exposer's destructor then waits for requests in flight.
    if (port >= 0) {
      auto& t = ready_table();
      std::lock_guard<std::mutex> guard{t.mu};
      t.by_port.erase(port);
    }
  }
};

Endpoint::Endpoint(std::unique_ptr<Impl> impl, uint16_t port)
  : impl_(std::move(impl)), port_(port) {}

Endpoint::~Endpoint() = default;

Expected<std::unique_ptr<Endpoint>> Endpoint::start(const std::string& host, uint16_t port,
                                                    Collect collect, Ready ready) {
  auto impl = std::make_unique<Impl>();
  // civetweb's listening_ports syntax: "host:port", with IPv6 hosts in brackets.
  std::string bind = host.find(':') != std::string::npos && host.front() != '['
                       ? "[" + host + "]:" + std::to_string(port)
                       : host + ":" + std::to_string(port);
  try {
    // Two threads: a slow /readyz (it asks the dispatcher) does not hold up a scrape.
    impl->exposer =
      std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2, health_callbacks());
  } catch (const std::exception& e) {
    return io_error("the metrics endpoint cannot listen on " + HostPort{host, port}.to_string() +
                    ": " + e.what() +
                    (port != 0 ? " (is port " + std::to_string(port) +
                                   " in use? choose another `--metrics-port`, or 0)"
                               : std::string{}));
  }
  impl->collectable = std::make_shared<FunctionCollectable>(std::move(collect));
  impl->exposer->RegisterCollectable(impl->collectable);
  auto ports = impl->exposer->GetListeningPorts();
  uint16_t bound = ports.empty() ? port : static_cast<uint16_t>(ports.front());
  {
    auto& t = ready_table();
    std::lock_guard<std::mutex> guard{t.mu};
    t.by_port[bound] = std::make_shared<const Ready>(std::move(ready));
  }
  impl->port = bound;
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl), bound));
}

} // namespace conveyor::metrics
