#include "coordinated/round_robin_planner.hpp"

#include <algorithm>
#include <limits>

#include "node/hooks.hpp"

namespace conveyor::actors {

RoundRobinPlanner::RoundRobinPlanner(int64_t consumer_index, int64_t num_consumers, int64_t window,
                                     int64_t max_bytes)
  : index_(consumer_index), num_consumers_(num_consumers), window_(std::max<int64_t>(window, 1)),
    max_bytes_(max_bytes) {}

void RoundRobinPlanner::on_ack(int64_t n) {
  unacked_ -= n;
  for (; n > 0 && !unacked_sizes_.empty(); --n) {
    unacked_bytes_ -= unacked_sizes_.front();
    unacked_sizes_.pop_front();
  }
}

Status RoundRobinPlanner::on_tasks(const std::vector<TaskEntry>& tasks, int64_t fence) {
  auto misaligned = [&](msg::task_id_t task, const char* what, int64_t round) {
    return Status{ErrorCode::internal,
                  "coordinated read: task " + std::to_string(task) + " " + what + " round " +
                    std::to_string(round) + ", but consumer_index " + std::to_string(index_) +
                    " already planned rounds up to " + std::to_string(next_plan_ - 1) +
                    " without that (rounds would misalign)"};
  };
  std::set<msg::task_id_t> listed;
  std::set<msg::task_id_t> lost;
  for (const auto& t : tasks) {
    if (!t.gone)
      listed.insert(t.task);
    if (t.lost)
      lost.insert(t.task);
    if (t.start_round < 0)
      continue; // pending
    if (schedule_.has(t.task) && schedule_.start_round(t.task) != t.start_round)
      return Status{ErrorCode::internal,
                    "coordinated read: the job says task " + std::to_string(t.task) +
                      " starts at round " + std::to_string(t.start_round) +
                      ", but consumer_index " + std::to_string(index_) + " planned with round " +
                      std::to_string(schedule_.start_round(t.task)) + " (rounds would misalign)"};
    if (!schedule_.has(t.task)) {
      if (t.start_round < next_plan_)
        return misaligned(t.task, "starts at", t.start_round);
      schedule_.add(t.task, t.start_round);
      if (!t.gone)
        tasks_.emplace(t.task, TaskRounds{}); // lost before we knew it: we received none of it
    }
    if (t.end_round >= 0 && schedule_.end_round(t.task) < 0) {
      if (t.end_round < next_plan_)
        return misaligned(t.task, "ends at", t.end_round);
      schedule_.end(t.task, t.end_round);
    }
  }
  // Lost tasks: ask them nothing more; once their served rounds are known, skip the rest.
  for (const auto& t : tasks) {
    if (!t.lost && !(t.gone && t.served_rounds >= 0))
      continue;
    auto it = tasks_.find(t.task);
    if (it == tasks_.end())
      continue;
    if (resuming_) { // holds none of its rounds: it starts after the task's end round
      forget(it);
      continue;
    }
    auto& r = it->second;
    if (!r.lost) {
      r.lost = true;
      if (r.in_flight) // its reply, should one still come, is dropped (on_reply)
        --in_flight_;
      r.in_flight = false;
      r.confirm_in_flight = false;
    }
    if (t.served_rounds >= 0 && r.limit < 0)
      CONVEYOR_RETURN_IF_ERROR(apply_limit(t.task, r, t.served_rounds));
  }
  lost_ = std::move(lost);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const auto task = it->first;
    if (listed.count(task)) {
      ++it;
      continue;
    }
    if (resuming_) { // holds none of its rounds: it starts after the task's end round
      it = forget(it);
      continue;
    }
    if (it->second.limit >= 0 && next_plan_ < schedule_.end_round(task)) {
      ++it; // lost: kept until its rounds up to its end are planned (skipped)
      continue;
    }
    if (!served_all(task)) {
      const auto end = schedule_.end_round(task);
      const auto owed = end < 0 ? -1 : schedule_.local_rounds(task, end);
      return Status{ErrorCode::unavailable,
                    "coordinated read: task " + std::to_string(task) + " left the job" +
                      (end < 0 ? std::string{}
                               : " after its last round (" + std::to_string(end - 1) +
                                   ") before consumer_index " + std::to_string(index_) +
                                   " received its " + std::to_string(owed) + " rounds (got " +
                                   std::to_string(it->second.received) + ")") +
                      "; its rounds cannot be served elsewhere without the consumers' rounds "
                      "going out of step"};
    }
    if (it->second.limit >= 0)
      gone_served_[task] = it->second.limit;
    it = tasks_.erase(it); // retired, every round of it received: the schedule keeps its span
  }
  fence_ = fence;
  return maybe_rebase();
}

std::map<msg::task_id_t, RoundRobinPlanner::TaskRounds>::iterator
RoundRobinPlanner::forget(std::map<msg::task_id_t, TaskRounds>::iterator it) {
  if (it->second.in_flight)
    --in_flight_;
  return tasks_.erase(it);
}

RoundRobinPlanner::KnownSchedule RoundRobinPlanner::known_schedule() const {
  KnownSchedule out;
  for (auto task : schedule_.tasks()) {
    RoundSpan span{task, schedule_.start_round(task), schedule_.end_round(task), -1};
    auto t = tasks_.find(task);
    if (lost_.count(task)) { // being settled (a resuming consumer may have forgotten it)
      if (t != tasks_.end())
        span.served_rounds = t->second.limit;
      out.lost.push_back(span);
    } else if (t == tasks_.end()) { // retired, or lost and settled, and forgotten
      if (auto s = gone_served_.find(task); s != gone_served_.end())
        span.served_rounds = s->second;
      out.gone.push_back(span);
    } else if (t->second.lost) { // settled: the job listed it as gone
      span.served_rounds = t->second.limit;
      out.gone.push_back(span);
    } else {
      out.active.push_back(span);
    }
  }
  return out;
}

std::vector<LostRoundsReport> RoundRobinPlanner::lost_reports() const {
  std::vector<LostRoundsReport> out;
  for (auto task : lost_) {
    auto it = tasks_.find(task);
    out.push_back(LostRoundsReport{task, it == tasks_.end() ? -1 : it->second.received});
  }
  return out;
}

Status RoundRobinPlanner::apply_limit(msg::task_id_t task, TaskRounds& t, int64_t limit) {
  auto misaligned = [&](const std::string& what) {
    return Status{ErrorCode::data_loss,
                  "coordinated read: task " + std::to_string(task) + " was lost; the consumers " +
                    "all received its first " + std::to_string(limit) + " round(s), but " +
                    "consumer_index " + std::to_string(index_) + " " + what +
                    ", so its rounds can no longer be aligned with the others'"};
  };
  const int64_t delivered = schedule_.local_rounds(task, next_deliver_);
  if (delivered > limit)
    return misaligned("had already handed " + std::to_string(delivered) + " of them to its reader");
  if (t.received < limit)
    return misaligned("received only " + std::to_string(t.received));
  t.limit = limit;
  // Its planned rounds from local round `limit` on: nobody hands them out.
  int64_t local = delivered;
  for (int64_t g = next_deliver_; g < next_plan_; ++g) {
    if (schedule_.task_for(g) != task || local++ < limit)
      continue;
    skipped_.insert(g);
    const auto at = static_cast<std::size_t>(g - next_deliver_);
    if (at < received_.size() && received_[at].element) {
      received_bytes_ -= received_[at].bytes;
      received_[at].element.reset();
    }
  }
  t.received = t.requested = t.planned = limit;
  t.committed = limit; // every consumer received them (the job took the least report)
  t.globals.clear();
  return Status::OK();
}

std::optional<msg::task_id_t> RoundRobinPlanner::waiting_for_commit() const {
  if (received_.empty() || !received_.front().element || skipped_.count(next_deliver_))
    return std::nullopt;
  const auto& front = received_.front();
  auto it = tasks_.find(front.task);
  if (it == tasks_.end() || front.local < it->second.committed)
    return std::nullopt;
  return front.task;
}

std::optional<msg::task_id_t> RoundRobinPlanner::earliest_missing() const {
  int64_t g = next_deliver_;
  for (const auto& slot : received_) {
    if (!slot.element && !skipped_.count(g))
      break;
    ++g;
  }
  while (g < next_plan_ && skipped_.count(g))
    ++g;
  if (g >= next_plan_)
    return std::nullopt;
  return schedule_.task_for(g);
}

void RoundRobinPlanner::plan() {
  while (next_plan_ - next_deliver_ + unacked_ < window_) {
    if (fence_ >= 0 && next_plan_ >= fence_)
      return;
    auto task = schedule_.task_for(next_plan_);
    if (!task) {
      // No task serves this round (the tasks serving it retired; the next starts later): every
      // consumer skips the same rounds. Jump once everything before is delivered.
      auto next = schedule_.next_served(next_plan_);
      if (!next || next_deliver_ != next_plan_ || !received_.empty())
        return;
      next_plan_ = next_deliver_ = *next;
      continue;
    }
    // Planted bug (simulator builds of this file only, node/hooks.hpp): the round is counted but
    // never assigned, so this consumer's later rounds on that task come from rounds the others got
    // earlier.
    if (hooks::kCompiledIn && hooks::skip_round(index_, next_plan_)) {
      skipped_.insert(next_plan_);
      ++next_plan_;
      continue;
    }
    auto& t = tasks_[*task];
    if (t.limit >= 0) { // lost: it served all it ever will
      skipped_.insert(next_plan_++);
      continue;
    }
    ++t.planned;
    t.globals.push_back(next_plan_);
    ++next_plan_;
  }
}

bool RoundRobinPlanner::served_all(msg::task_id_t task) const {
  const auto end = schedule_.end_round(task);
  if (end < 0)
    return false;
  auto it = tasks_.find(task);
  if (it == tasks_.end())
    return true;
  auto owed = schedule_.local_rounds(task, end);
  if (it->second.limit >= 0)
    owed = std::min(owed, it->second.limit);
  return it->second.received >= owed;
}

RoundRobinPlanner::TaskRounds* RoundRobinPlanner::settle(const Request& request) {
  auto it = tasks_.find(request.task);
  if (it == tasks_.end())
    return nullptr;
  auto& t = it->second;
  if (request.confirm) {
    t.confirm_in_flight = false;
    return &t;
  }
  if (t.in_flight)
    --in_flight_;
  t.in_flight = false;
  return &t;
}

Status RoundRobinPlanner::on_probe(const Request& request, int64_t next_local_round) {
  auto* found = settle(request);
  if (!found)
    return Status::OK(); // forgotten meanwhile
  auto& t = *found;
  if (!resuming_)
    return Status::OK();
  if (next_local_round < 0)
    return Status{ErrorCode::internal, "coordinated read: task " + std::to_string(request.task) +
                                         " did not say where consumer_index " +
                                         std::to_string(index_) + " stands"};
  t.probed = true;
  t.frontier = next_local_round;
  return maybe_rebase();
}

Status RoundRobinPlanner::maybe_rebase() {
  if (!resuming_ || tasks_.empty())
    return Status::OK(); // (no task yet: nothing to probe)
  for (const auto& [task, t] : tasks_)
    if (!t.probed)
      return Status::OK();
  for (auto task : lost_)
    if (schedule_.end_round(task) < 0)
      return Status::OK(); // it starts after the lost task's end round: wait for it
  return rebase();
}

Status RoundRobinPlanner::rebase() {
  resuming_ = false;
  // Tasks that served this index every round they ever will (retired: gone, or ending and all
  // served): the others went past their end round, so this consumer starts there at the least.
  int64_t floor = 0;
  std::map<msg::task_id_t, bool> done;
  std::size_t found = 0;
  for (auto task : schedule_.tasks()) {
    const auto end = schedule_.end_round(task);
    if (end < 0)
      continue;
    auto t = tasks_.find(task);
    if (t == tasks_.end() || t->second.frontier >= schedule_.local_rounds(task, end)) {
      floor = std::max(floor, end);
      if (t != tasks_.end()) {
        done[task] = true;
        ++found;
      }
    }
  }
  bool fresh = floor == 0;
  for (const auto& [task, t] : tasks_)
    fresh &= t.frontier == 0;
  if (fresh)
    return Status::OK(); // new to the job: round 0, as planned
  // Walk the schedule from round 0: where each task's frontier is as a global round (R is the
  // largest), then how many local rounds of each task lie below R.
  constexpr int64_t kMaxWalk = int64_t{1} << 34;
  std::map<msg::task_id_t, int64_t> below; // local rounds before the round walked to
  int64_t start = floor;
  int64_t r = 0;
  for (; found < tasks_.size(); ++r) {
    if (r >= kMaxWalk)
      return Status{ErrorCode::internal, "coordinated read: cannot find where consumer_index " +
                                           std::to_string(index_) + " rejoins"};
    auto task = schedule_.task_for(r);
    if (!task)
      continue;
    auto live = tasks_.find(*task);
    if (live == tasks_.end())
      continue; // gone: served this index every round
    auto& t = live->second;
    auto& n = below[*task];
    if (!done[*task] && n == t.frontier) {
      done[*task] = true;
      ++found;
      start = std::max(start, r);
    }
    ++n;
  }
  // Counts up to r; go on (or back) to `start`.
  below.clear();
  for (int64_t g = 0; g < start; ++g)
    if (auto task = schedule_.task_for(g))
      ++below[*task];
  next_plan_ = next_deliver_ = start;
  received_.clear();
  for (auto& [task, t] : tasks_) {
    const int64_t local = below[task];
    if (local < t.frontier)
      return Status{ErrorCode::internal, "coordinated read: rejoin round " + std::to_string(start) +
                                           " is before what task " + std::to_string(task) +
                                           " already served"};
    t.planned = t.requested = t.received = local;
    t.globals.clear();
    t.resume = true;
  }
  return Status::OK();
}

Status RoundRobinPlanner::on_reply(const Request& request, std::vector<Element> elements,
                                   int64_t committed) {
  auto* found = settle(request);
  if (!found || found->lost)
    return Status::OK(); // forgotten meanwhile, or lost (what it served is settled by the job)
  auto& t = *found;
  t.committed = std::max(t.committed, committed);
  if (request.confirm)
    return Status::OK();
  if (elements.size() > request.count)
    return Status{ErrorCode::data_loss, "coordinated read: task " + std::to_string(request.task) +
                                          " sent " + std::to_string(elements.size()) +
                                          " elements for " + std::to_string(request.count) +
                                          " rounds"};
  // What was asked and did not come is asked again (from the first missing round).
  t.requested = request.first + static_cast<int64_t>(elements.size());
  t.resume = false; // the task took the rejoin
  for (auto& e : elements) {
    const auto bytes = static_cast<int64_t>(e.byte_size());
    received_bytes_ += bytes;
    const auto slot = static_cast<std::size_t>(t.globals.front() - next_deliver_);
    if (received_.size() <= slot)
      received_.resize(slot + 1);
    received_[slot].element = std::move(e);
    received_[slot].bytes = bytes;
    received_[slot].task = request.task;
    received_[slot].local = t.received;
    t.globals.pop_front();
    ++t.received;
  }
  return Status::OK();
}

void RoundRobinPlanner::on_request_failed(const Request& request) {
  auto* t = settle(request);
  if (t && !request.probe && !request.confirm)
    t->requested = request.first;
}

std::vector<Element>
RoundRobinPlanner::take_ready(std::vector<std::pair<msg::task_id_t, int64_t>>* where) {
  std::vector<Element> out;
  while (true) {
    if (skipped_.count(next_deliver_)) {
      skipped_.erase(next_deliver_);
      if (!received_.empty())
        received_.pop_front();
      ++next_deliver_;
      continue;
    }
    if (received_.empty() || !received_.front().element)
      break;
    // Only a round every consumer has: should its task be lost, no consumer has handed out a
    // round another never got (a task that is gone was drained: every consumer had it all).
    const auto& front = received_.front();
    if (auto it = tasks_.find(front.task);
        it != tasks_.end() && front.local >= it->second.committed)
      break;
    const auto size = received_.front().bytes;
    received_bytes_ -= size;
    unacked_bytes_ += size;
    unacked_sizes_.push_back(size);
    out.push_back(std::move(*received_.front().element));
    if (where)
      where->emplace_back(front.task, front.local);
    received_.pop_front();
    ++next_deliver_;
  }
  unacked_ += static_cast<int64_t>(out.size());
  return out;
}

} // namespace conveyor::actors
