// The job actor's splits (DYNAMIC): handing them out to tasks (held while none is ready),
// their updates, and the journal records of what was handed out and finished.
#include "dispatcher/job_actor_state.hpp"
#include "node/log.hpp"

namespace conveyor::actors::job_detail {

// Answers a get_splits now, or returns false when it must wait.
bool try_splits(self_ptr self, const msg::get_splits& req,
                caf::typed_response_promise<msg::splits_reply>& promise) {
  auto& st = self->state;
  auto answer = st.core().get_splits(req.task, req.epoch, req.max, req.source);
  if (!answer.ok()) {
    promise.deliver(msg::to_error(answer.status().with_context(st.label())));
    return true;
  }
  if (answer->hold)
    return false;
  msg::splits_reply reply{std::move(answer->splits), answer->end_of_splits, answer->empty_epoch};
  if constexpr (hooks::kCompiledIn) { // simulator builds of this file only (node/hooks.hpp)
    if (reply.end_of_splits) {
      Split extra;
      bool end = true;
      st.planted_bug.apply(req.task, extra, end);
      if (!end) {
        reply.end_of_splits = false;
        reply.splits.push_back(extra);
      }
    } else {
      bool end = false;
      st.planted_bug.apply(req.task, reply.splits.back(), end);
    }
  }
  if (!st.start.journal_splits || reply.splits.empty()) {
    promise.deliver(std::move(reply));
    return true;
  }
  // Journal hook: the hand-out position after this answer is durable before its splits leave
  // (a restarted dispatcher resumes the job's split provider there).
  auto& core = st.core();
  auto pos = core.position(req.source);
  msg::SplitPositionRecord record{
    st.start.id,
    core.epoch(req.source),
    pos.epoch,
    pos.next_index,
    core.splits_handed_out(),
    std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now().time_since_epoch())
      .count(),
    {},
    {},
    req.source};
  for (const auto& s : reply.splits)
    record.handed.push_back(to_journal(s));
  self->request(st.start.dispatcher, st.start.request_timeout, msg::persist_splits{record})
    .then([promise, reply](caf::ok_atom) mutable { promise.deliver(std::move(reply)); },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
  return true;
}

// Journal hook: splits finished (every element acknowledged) are no longer handed out again
// after a dispatcher restart. Nothing waits for this record: if it is lost in a crash, the
// restarted job hands those splits out again and the consumer drops the repeats.
void journal_finished(self_ptr self, const std::vector<SplitKey>& finished) {
  auto& st = self->state;
  msg::SplitPositionRecord record;
  record.job = st.start.id;
  record.time_us =
    std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now().time_since_epoch())
      .count();
  for (const auto& [source, epoch, index] : finished)
    record.finished.push_back(msg::JournalSplitKey{epoch, index, source});
  if (st.core().deterministic_window() > 0) { // the entries JobCore::splits_update just logged
    record.finished_first = st.core().finished_next() - static_cast<int64_t>(finished.size());
    record.finished_known = st.core().finished_base();
  }
  self->request(st.start.dispatcher, st.start.request_timeout, msg::persist_splits{record})
    .then([](caf::ok_atom) {},
          [self](caf::error& err) {
            log::warning(kLog, self->state.label() + ": could not journal finished splits (" +
                                 caf::to_string(err) +
                                 "); after a dispatcher restart they are read again");
          });
}

void serve_held_splits(self_ptr self) {
  auto& held = self->state.held_splits;
  for (auto it = held.begin(); it != held.end();)
    it = try_splits(self, it->request, it->promise) ? held.erase(it) : std::next(it);
}

// A task asks for splits: answered now, or held until splits come back or the hold ends.
caf::result<msg::splits_reply> on_get_splits(self_ptr self, msg::get_splits& req) {
  auto& st = self->state;
  auto promise = self->make_response_promise<msg::splits_reply>();
  if (!try_splits(self, req, promise)) {
    auto token = st.next_token++;
    auto hold = caf::timespan{std::max<int64_t>(req.hold_ns, 1000000)};
    auto due = self->clock().now() + hold;
    st.held_splits.push_back(HeldSplits{promise, req, token, due});
    wake_at(self, due, msg::expire_atom_v, token);
  }
  return promise;
}

// A task reports finished and returned splits.
void on_splits_update(self_ptr self, msg::splits_update& up) {
  auto& st = self->state;
  auto v = list_version(st);
  std::vector<SplitKey> finished(up.finished.begin(), up.finished.end());
  std::vector<SplitKey> accepted;
  if (st.core().splits_update(up.task, finished, up.returned, &accepted))
    changed(self, v);
  if (st.start.journal_splits && !accepted.empty())
    journal_finished(self, accepted);
}

} // namespace conveyor::actors::job_detail
