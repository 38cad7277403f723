// The dispatcher actor's worker estimate and autoscaler: every autoscale interval it asks each
// live job for its status, feeds the counters to the WorkerEstimator and, with --scale-command,
// the estimate and the trainers' wait share to the AutoscalePolicy; a changed target goes to the
// ScaleCommand, which runs off the actor. The logic is in those CAF-free classes.
#include <chrono>
#include <memory>

#include "dispatcher/dispatcher_actor_state.hpp"
#include "dispatcher/tenant_caps.hpp"
#include "messages/all.hpp"
#include "node/log.hpp"

namespace conveyor::actors::dispatcher_detail {

namespace {

double seconds_of(caf::actor_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

int64_t registered_workers(const dispatcher_actor_state& st) {
  int64_t n = 0;
  for (const auto& [id, w] : st.workers)
    if (w.handle) // a worker restored from the journal counts once it registered again
      ++n;
  return n;
}

void conclude(self_ptr self, const std::vector<JobCounters>& jobs) {
  auto& st = self->state;
  st.estimating = false;
  const double now_s = seconds_of(self->clock().now());
  st.estimator.observe(now_s, jobs);
  if (!st.autoscaler)
    return;
  AutoscaleObservation o;
  o.now_s = now_s;
  o.workers = registered_workers(st);
  o.wait_share = st.estimator.max_wait_share();
  o.estimate = st.estimator.total();
  o.demand = st.estimator.demand();
  o.has_readers = st.estimator.has_readers();
  auto d = st.autoscaler->decide(o);
  if (!d.changed)
    return;
  if (st.start.scale_to) {
    log::info(kLog,
              "autoscale: " + d.reason + "; scaling to " + std::to_string(d.target) + " workers");
    st.start.scale_to(d.target);
    return;
  }
  log::info(kLog, "autoscale: " + d.reason + "; running the scale command for " +
                    std::to_string(d.target) + " workers");
  st.scale_command->request(d.target);
}

} // namespace

void start_autoscaler(self_ptr self) {
  auto& st = self->state;
  if (st.start.scale_command.empty() && !st.start.scale_to)
    return;
  st.autoscaler.emplace(st.start.autoscale);
  if (st.start.scale_to)
    return;
  st.scale_command = std::make_shared<ScaleCommand>(st.start.scale_command,
                                                    [](bool failed, const std::string& line) {
                                                      if (failed)
                                                        log::warning(kLog, line);
                                                      else
                                                        log::info(kLog, line);
                                                    });
}

void estimate_if_due(self_ptr self) {
  auto& st = self->state;
  const auto interval = st.start.autoscale_interval;
  const auto now = self->clock().now();
  if (interval.count() <= 0 || st.estimating || now - st.last_estimate < interval)
    return;
  st.last_estimate = now;
  if (st.jobs.empty()) {
    conclude(self, {});
    return;
  }
  st.estimating = true;
  auto counters = std::make_shared<std::vector<JobCounters>>();
  auto pending = std::make_shared<std::size_t>(st.jobs.size());
  auto one_done = [self, counters, pending] {
    if (--*pending == 0)
      conclude(self, *counters);
  };
  for (const auto& [id, job] : st.jobs) {
    const auto* entry = st.cluster.job(id);
    const int64_t cap = entry ? cap_of(st.start.tenant_max_workers, entry->tenant) : 0;
    self->request(job, std::chrono::seconds(2), msg::get_job_status{})
      .then(
        [counters, one_done, cap](msg::job_status& js) {
          JobCounters c;
          c.max_workers = cap;
          c.job = js.id;
          c.finished = js.finished;
          c.consumers = js.consumers;
          c.tasks = js.tasks;
          c.elements = js.elements;
          c.wait_worker_ns = js.waiting.wait_worker_ns;
          c.wait_network_ns = js.waiting.wait_network_ns;
          c.elapsed_ns = js.waiting.elapsed_ns;
          counters->push_back(c);
          one_done();
        },
        // A job that does not answer is left out of this estimate (it is asked again next time).
        [one_done](caf::error&) { one_done(); });
  }
}

void add_estimates(const dispatcher_actor_state& st, msg::cluster_status& status) {
  status.desired_workers = st.estimator.total();
  status.autoscale_target = st.autoscaler ? st.autoscaler->target() : -1;
  if (st.scale_command) {
    status.scale_commands = st.scale_command->runs();
    status.scale_command_failures = st.scale_command->failures();
  }
}

void add_estimate(const dispatcher_actor_state& st, msg::job_status& job) {
  if (const auto* e = st.estimator.job(job.id)) {
    job.desired_workers = e->desired;
    job.recent_worker_wait = e->wait_share;
  }
}

} // namespace conveyor::actors::dispatcher_detail
