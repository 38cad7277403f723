// The job actor's status (`conveyor status`, metrics): what its consumers reported, and the
// rate over about the last 10 s.
#include "dispatcher/job_actor_state.hpp"

namespace conveyor::actors::job_detail {

msg::job_status job_status_of(self_ptr self) {
  auto& st = self->state;
  msg::job_status s;
  s.id = st.start.id;
  s.name = st.start.name;
  s.dataset = st.start.dataset;
  s.mode = to_string(st.start.policy);
  s.finished = st.core().production_ended();
  s.waiting_for = st.core().waiting_for();
  s.consumers = static_cast<int64_t>(st.core().live_consumers());
  s.tasks = static_cast<int64_t>(st.workers.size());
  msg::consumer_progress sum = st.departed;
  for (const auto& [id, p] : st.progress)
    sum += p;
  s.elements = sum.elements;
  s.bytes = sum.bytes;
  s.waiting = sum;
  const auto now = self->clock().now();
  s.age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - st.created).count();
  if (!st.rate_samples.empty()) {
    // The base: the newest sample at least 10 s old now (the oldest while the job is younger).
    const auto* base = &st.rate_samples.front();
    for (const auto& sample : st.rate_samples)
      if (now - sample.at >= std::chrono::seconds(10))
        base = &sample;
    const double secs = std::chrono::duration<double>(now - base->at).count();
    if (secs > 0) {
      s.elements_per_s = static_cast<double>(sum.elements - base->elements) / secs;
      s.bytes_per_s = static_cast<double>(sum.bytes - base->bytes) / secs;
    }
  }
  if (st.core().dynamic()) {
    s.epoch = st.core().epoch();
    s.splits_handed_out = st.core().splits_handed_out();
  }
  return s;
}

// One more sample of the delivered totals for the status rate (job_state::rate_samples): kept
// are the newest sample at least 10 s old (the window's base) and the ones after it.
void sample_rate(self_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (!st.rate_samples.empty() && now - st.rate_samples.back().at < std::chrono::seconds(1))
    return;
  msg::consumer_progress sum = st.departed;
  for (const auto& [id, p] : st.progress)
    sum += p;
  st.rate_samples.push_back({now, sum.elements, sum.bytes});
  while (st.rate_samples.size() > 1 && now - st.rate_samples[1].at >= std::chrono::seconds(10))
    st.rate_samples.pop_front();
}

} // namespace conveyor::actors::job_detail
