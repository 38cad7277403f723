// The task actor's coordinated reads (coordinated/round_robin.hpp): rounds complete when every
// consumer asked. What each request is answered with is decided by RoundRobinTaskServer
// (CAF-free); this file holds the requests that must wait and sends the replies.
#include <optional>

#include "node/log.hpp"
#include "worker/task_actor_state.hpp"

namespace conveyor::actors::task_detail {

namespace {

// Completes what rounds can complete from the buffer.
void complete_rounds(self_ptr self) {
  auto& st = self->state;
  if (!st.rounds || !st.runner)
    return;
  const auto rounds = st.rounds->completable(st.runner->buffered_elements());
  if (rounds <= 0)
    return;
  const auto n = static_cast<std::size_t>(st.rounds->num_consumers());
  std::vector<std::size_t> sizes;
  auto elements = st.runner->take_elements(static_cast<std::size_t>(rounds) * n, &sizes);
  st.rounds->complete(std::move(elements), sizes, now_ns(self));
  schedule_produce(self);
}

// Answers a coordinated request now (elements or an error); false: it must wait.
template <class Deliver, class Fail>
bool answer_round(self_ptr self, const msg::get_elements& req, Deliver&& deliver, Fail&& fail) {
  auto& st = self->state;
  if (!st.rounds->error().ok()) {
    fail(msg::to_error(st.rounds->error()));
    return true;
  }
  if (auto b = st.rounds->take_reply(req)) {
    if (st.stats) {
      st.stats->delivered_elements.fetch_add(b->num_elements, std::memory_order_relaxed);
      st.stats->delivered_bytes.fetch_add(static_cast<int64_t>(b->payload.size()),
                                          std::memory_order_relaxed);
    }
    deliver(std::move(*b));
    return true;
  }
  if (st.rounds->fail_if_short(st.runner->failed(), st.runner->ended(),
                               st.runner->buffered_elements(), st.runner->error())) {
    fail(msg::to_error(st.rounds->error()));
    return true;
  }
  return false;
}

// A coordinated request that cannot be answered with elements now: answered at once without
// them when the committed rounds already passed what it knows, else held (serve_held_rounds).
caf::result<msg::element_batch> wait_for_rounds(self_ptr self, msg::get_elements& req) {
  auto& st = self->state;
  if (st.rounds->committed_past(req))
    return st.rounds->committed_reply();
  auto promise = self->make_response_promise<msg::element_batch>();
  auto deadline = self->clock().now() + hold_of(req);
  st.held.push_back(Held{promise, std::move(req), deadline, 0});
  return promise;
}

// A repeated request of this consumer replaces its held one (which gets an empty answer).
void replace_held(self_ptr self, const msg::get_elements& req) {
  auto& st = self->state;
  for (auto it = st.held.begin(); it != st.held.end(); ++it)
    if (it->request.consumer_index == req.consumer_index) {
      it->promise.deliver(st.rounds->committed_reply());
      st.held.erase(it);
      break;
    }
}

// A probe of a (re)started consumer: where its index stands.
caf::result<msg::element_batch> answer_probe(self_ptr self, const msg::get_elements& req) {
  auto& st = self->state;
  auto next = st.rounds->where(req);
  if (!next.ok())
    return msg::to_error(next.status());
  msg::element_batch where;
  where.round_next = *next;
  if (where.round_next > 0)
    log::info(kLog, st.label() + ": consumer_index " + std::to_string(req.consumer_index) +
                      " is back; it was sent local rounds up to " +
                      std::to_string(where.round_next - 1));
  return where;
}

} // namespace

void serve_held_rounds(self_ptr self) {
  auto& st = self->state;
  complete_rounds(self);
  auto now = self->clock().now();
  // A round some consumer never asks for: fail the waiting requests, naming who is missing.
  if (st.rounds->fail_if_stalled(now_ns(self)))
    log::error(kLog, st.rounds->error().message());
  for (auto it = st.held.begin(); it != st.held.end();) {
    auto& h = *it;
    bool done = true;
    if (!st.rounds->error().ok())
      h.promise.deliver(msg::to_error(st.rounds->error()));
    else if (!RoundRobinTaskServer::is_confirm(h.request) &&
             answer_round(
               self, h.request, [&](msg::element_batch b) { h.promise.deliver(std::move(b)); },
               [&](caf::error e) { h.promise.deliver(std::move(e)); }))
      done = true;
    else if (now >= h.deadline || st.rounds->committed_past(h.request)) // (its consumer may wait)
      h.promise.deliver(st.rounds->committed_reply());
    else
      done = false;
    it = done ? st.held.erase(it) : std::next(it);
  }
}

caf::result<msg::element_batch> round_request(self_ptr self, msg::get_elements& req) {
  auto& st = self->state;
  if (!st.start_error.ok())
    return msg::to_error(st.start_error);
  if (Status refused = st.rounds->admit(req); !refused.ok())
    return msg::to_error(refused);
  replace_held(self, req);
  st.rounds->note_reader(req);
  if (RoundRobinTaskServer::is_confirm(req)) { // it has every round below round_first
    if (Status valid = st.rounds->confirm(req); !valid.ok())
      return msg::to_error(valid);
    serve_held_rounds(self); // other consumers' confirms may be answered now
    if (!st.rounds->error().ok())
      return msg::to_error(st.rounds->error());
    return wait_for_rounds(self, req);
  }
  if (req.round_resume && req.round_count == 0) // a (re)started consumer: where it stands
    return answer_probe(self, req);
  if (Status asked = st.rounds->ask(req, now_ns(self)); !asked.ok())
    return msg::to_error(asked);
  serve_held_rounds(self); // completes rounds, answers others waiting for this one
  std::optional<msg::element_batch> batch;
  caf::error error;
  if (answer_round(
        self, req, [&](msg::element_batch b) { batch = std::move(b); },
        [&](caf::error e) { error = std::move(e); })) {
    if (batch)
      return std::move(*batch);
    return error;
  }
  return wait_for_rounds(self, req);
}

} // namespace conveyor::actors::task_detail
