#include "coordinated/round_robin.hpp"

#include <algorithm>
#include <limits>

#include "node/hooks.hpp"

namespace conveyor::actors {

// ---------------------------------------------------------------------------------------------
// RoundSchedule

void RoundSchedule::add(msg::task_id_t task, int64_t start_round) {
  if (!tasks_.emplace(task, Span{start_round, kNoEnd}).second)
    return;
  auto entry = std::make_pair(start_round, task);
  order_.insert(std::upper_bound(order_.begin(), order_.end(), entry), entry);
}

void RoundSchedule::end(msg::task_id_t task, int64_t end_round) {
  if (auto it = tasks_.find(task); it != tasks_.end()) {
    it->second.end = std::max(end_round, it->second.start);
    any_end_ = true;
  }
}

std::vector<msg::task_id_t> RoundSchedule::tasks() const {
  std::vector<msg::task_id_t> out;
  for (const auto& [task, span] : tasks_)
    out.push_back(task);
  return out;
}

int64_t RoundSchedule::start_round(msg::task_id_t task) const {
  auto it = tasks_.find(task);
  return it == tasks_.end() ? -1 : it->second.start;
}

int64_t RoundSchedule::end_round(msg::task_id_t task) const {
  auto it = tasks_.find(task);
  return it == tasks_.end() || it->second.end == kNoEnd ? -1 : it->second.end;
}

std::optional<msg::task_id_t> RoundSchedule::task_for(int64_t round) const {
  // Started by `round`: the prefix of order_ whose start round is <= round.
  auto started_end = std::upper_bound(
    order_.begin(), order_.end(), std::make_pair(round, std::numeric_limits<msg::task_id_t>::max()));
  if (!any_end_) {
    auto active = static_cast<int64_t>(started_end - order_.begin());
    if (active == 0)
      return std::nullopt;
    return order_[static_cast<std::size_t>(round % active)].second;
  }
  int64_t active = 0;
  for (auto it = order_.begin(); it != started_end; ++it)
    active += tasks_.at(it->second).end > round;
  if (active == 0)
    return std::nullopt;
  int64_t pick = round % active;
  for (auto it = order_.begin(); it != started_end; ++it)
    if (tasks_.at(it->second).end > round && pick-- == 0)
      return it->second;
  return std::nullopt;
}

std::optional<int64_t> RoundSchedule::next_served(int64_t round) const {
  if (task_for(round))
    return round;
  std::optional<int64_t> next;
  for (const auto& [start, task] : order_)
    if (start > round && tasks_.at(task).end > start && (!next || start < *next))
      next = start;
  return next;
}

int64_t RoundSchedule::local_rounds(msg::task_id_t task, int64_t until) const {
  auto it = tasks_.find(task);
  if (it == tasks_.end())
    return 0;
  const int64_t first = it->second.start;
  const int64_t last = std::min(until, it->second.end); // exclusive
  if (last <= first)
    return 0;
  // Between breakpoints (every start and end) the active set is constant: there the task is
  // active[p] of k, and serves the rounds r with r mod k == p.
  std::vector<int64_t> cuts{first, last};
  for (const auto& [t, span] : tasks_) {
    for (auto b : {span.start, span.end})
      if (b > first && b < last)
        cuts.push_back(b);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // How many r in [0, x) have r mod k == p.
  auto below = [](int64_t x, int64_t k, int64_t p) { return x > p ? (x - p - 1) / k + 1 : 0; };
  int64_t n = 0;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t a = cuts[i], b = cuts[i + 1];
    int64_t k = 0, p = -1;
    for (const auto& [start, t] : order_) {
      const auto& span = tasks_.at(t);
      if (span.start <= a && span.end > a) {
        if (t == task)
          p = k;
        ++k;
      }
    }
    if (p >= 0)
      n += below(b, k, p) - below(a, k, p);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// RoundRobinPlanner

RoundRobinPlanner::RoundRobinPlanner(int64_t consumer_index, int64_t num_consumers,
                                     int64_t window, int64_t max_bytes)
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
                      " starts at round " + std::to_string(t.start_round) + ", but consumer_index " +
                      std::to_string(index_) + " planned with round " +
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
    return misaligned("had already handed " + std::to_string(delivered) +
                      " of them to its reader");
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
    return Status{ErrorCode::data_loss,
                  "coordinated read: task " + std::to_string(request.task) + " sent " +
                    std::to_string(elements.size()) + " elements for " +
                    std::to_string(request.count) + " rounds"};
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

std::vector<Element> RoundRobinPlanner::take_ready() {
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
    if (auto it = tasks_.find(front.task); it != tasks_.end() && front.local >= it->second.committed)
      break;
    const auto size = received_.front().bytes;
    received_bytes_ -= size;
    unacked_bytes_ += size;
    unacked_sizes_.push_back(size);
    out.push_back(std::move(*received_.front().element));
    received_.pop_front();
    ++next_deliver_;
  }
  unacked_ += static_cast<int64_t>(out.size());
  return out;
}

// ---------------------------------------------------------------------------------------------
// RoundRobinTaskRounds

RoundRobinTaskRounds::RoundRobinTaskRounds(int64_t num_consumers)
  : asked_(static_cast<std::size_t>(std::max<int64_t>(num_consumers, 1)), 0),
    next_(asked_.size(), 0),
    ready_(asked_.size()),
    skip_to_(asked_.size(), 0),
    confirmed_(asked_.size(), 0) {}

void RoundRobinTaskRounds::release(int64_t index) {
  if (check_index(index).ok())
    confirmed_[static_cast<std::size_t>(index)] = std::numeric_limits<int64_t>::max();
}

void RoundRobinTaskRounds::confirm(int64_t index, int64_t below) {
  auto& c = confirmed_[static_cast<std::size_t>(index)];
  c = std::max(c, below);
}

Status RoundRobinTaskRounds::check_index(int64_t index) const {
  const auto n = num_consumers();
  if (index < 0 || index >= n)
    return Status{ErrorCode::invalid_argument,
                  "coordinated read: consumer_index " + std::to_string(index) +
                    " is not in [0, num_consumers) = [0, " + std::to_string(n) + ")"};
  return Status::OK();
}

Status RoundRobinTaskRounds::resume(int64_t index, int64_t first, int64_t now_ns) {
  CONVEYOR_RETURN_IF_ERROR(check_index(index));
  const auto i = static_cast<std::size_t>(index);
  if (first < next_[i])
    return Status{ErrorCode::failed_precondition,
                  "coordinated read: consumer_index " + std::to_string(index) +
                    " rejoins at local round " + std::to_string(first) + ", but this task " +
                    "already sent it rounds up to " + std::to_string(next_[i] - 1)};
  // ready_[i] holds the rounds [next_[i], completed_) kept for the index.
  while (next_[i] < first && !ready_[i].empty()) {
    ready_[i].pop_front();
    ++next_[i];
  }
  next_[i] = first;
  skip_to_[i] = std::max(skip_to_[i], first);
  confirmed_[i] = first; // (it may have been released when the old process left)
  asked_[i] = std::max(asked_[i], first);
  update_waiting(now_ns);
  return Status::OK();
}

void RoundRobinTaskRounds::update_waiting(int64_t now_ns) {
  bool someone_waits = false;
  for (auto a : asked_)
    someone_waits |= a > completed_;
  if (!(someone_waits && completable() == 0))
    waiting_since_ns_ = -1;
  else if (waiting_since_ns_ < 0)
    waiting_since_ns_ = now_ns;
}

Status RoundRobinTaskRounds::ask(int64_t index, int64_t first, uint32_t count, int64_t now_ns) {
  CONVEYOR_RETURN_IF_ERROR(check_index(index));
  const auto i = static_cast<std::size_t>(index);
  if (first < next_[i])
    return Status{ErrorCode::failed_precondition,
                  "coordinated read: consumer_index " + std::to_string(index) +
                    " asked for local round " + std::to_string(first) + ", which this task " +
                    "already served to it (next is " + std::to_string(next_[i]) +
                    "); a restarted consumer rejoins with round_resume"};
  if (first > next_[i])
    return Status{ErrorCode::internal,
                  "coordinated read: consumer_index " + std::to_string(index) +
                    " skipped rounds: it asked for local round " + std::to_string(first) +
                    " but has not received round " + std::to_string(next_[i])};
  asked_[i] = std::max(asked_[i], first + static_cast<int64_t>(count));
  confirm(index, first); // one request per task at a time: the earlier rounds arrived
  if (waiting_since_ns_ < 0 && asked_[i] > completed_ && completable() == 0)
    waiting_since_ns_ = now_ns;
  return Status::OK();
}

int64_t RoundRobinTaskRounds::completable() const {
  return *std::min_element(asked_.begin(), asked_.end()) - completed_;
}

void RoundRobinTaskRounds::complete(std::vector<Element> elements, int64_t now_ns) {
  elements.resize(ready_.size()); // exactly one round
  complete_many(std::move(elements), {}, now_ns);
}

void RoundRobinTaskRounds::complete_many(std::vector<Element> elements,
                                         const std::vector<std::size_t>& sizes, int64_t now_ns) {
  const std::size_t n = ready_.size();
  const auto rounds = static_cast<int64_t>(elements.size() / n);
  for (std::size_t j = 0; j < static_cast<std::size_t>(rounds) * n; ++j) {
    const auto round = completed_ + static_cast<int64_t>(j / n);
    if (round < skip_to_[j % n])
      continue; // a consumer that rejoined after this round: nobody reads it here
    const std::size_t bytes = j < sizes.size() ? sizes[j] : elements[j].byte_size();
    ready_[j % n].push_back(Reserved{std::move(elements[j]), bytes});
  }
  completed_ += rounds;
  bool someone_waits = false;
  for (auto a : asked_)
    someone_waits |= a > completed_;
  waiting_since_ns_ = someone_waits && completable() == 0 ? now_ns : -1;
}

bool RoundRobinTaskRounds::has_ready(int64_t index) const {
  return !ready_[static_cast<std::size_t>(index)].empty();
}

std::vector<Element> RoundRobinTaskRounds::take(int64_t index, uint32_t max, uint64_t max_bytes) {
  auto& q = ready_[static_cast<std::size_t>(index)];
  std::vector<Element> out;
  out.reserve(std::min<std::size_t>(q.size(), max));
  uint64_t bytes = 0;
  while (!q.empty() && out.size() < max) {
    const auto size = q.front().bytes;
    if (!out.empty() && bytes + size > max_bytes)
      break;
    bytes += size;
    out.push_back(std::move(q.front().element));
    q.pop_front();
  }
  next_[static_cast<std::size_t>(index)] += static_cast<int64_t>(out.size());
  return out;
}

std::optional<std::string> RoundRobinTaskRounds::stalled(int64_t now_ns, int64_t timeout_ns) const {
  if (waiting_since_ns_ < 0 || now_ns - waiting_since_ns_ < timeout_ns || completable() > 0)
    return std::nullopt;
  std::string missing;
  for (std::size_t i = 0; i < asked_.size(); ++i)
    if (asked_[i] <= completed_)
      missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  return "coordinated read: round " + std::to_string(completed_) + " of this task waited " +
         std::to_string((now_ns - waiting_since_ns_) / 1000000) + " ms for consumer_index " +
         missing + " of num_consumers " + std::to_string(asked_.size()) +
         " (are all consumers of the job running?)";
}

// ---------------------------------------------------------------------------------------------
// RoundRobinJob

RoundRobinJob::RoundRobinJob(int64_t num_consumers, int64_t lookahead)
  : num_consumers_(num_consumers), lookahead_(std::max<int64_t>(lookahead, 1)) {}

Status RoundRobinJob::join(msg::consumer_id_t consumer, int64_t index) {
  CONVEYOR_RETURN_IF_ERROR(can_join(index));
  consumers_[consumer] = Consumer{index, 0, -1};
  return Status::OK();
}

Status RoundRobinJob::can_join(int64_t index) const {
  if (index < 0 || index >= num_consumers_)
    return Status{ErrorCode::invalid_argument,
                  "`consumer_index` must be in [0, num_consumers) = [0, " +
                    std::to_string(num_consumers_) + "), got " + std::to_string(index)};
  for (const auto& [id, c] : consumers_)
    if (c.index == index)
      return Status{ErrorCode::already_exists,
                    "consumer_index " + std::to_string(index) +
                      " is already read by another consumer of this job (consumer " +
                      std::to_string(id) + "); each of the num_consumers = " +
                      std::to_string(num_consumers_) + " consumers needs its own index"};
  return Status::OK();
}

msg::consumer_id_t RoundRobinJob::holder(int64_t index) const {
  for (const auto& [id, c] : consumers_)
    if (c.index == index)
      return id;
  return 0;
}

bool RoundRobinJob::leave(msg::consumer_id_t consumer) {
  if (!consumers_.erase(consumer))
    return false;
  if (recovering_) {
    reported_.erase(consumer);
    return false;
  }
  bool reported = false;
  for (auto& [task, l] : lost_)
    if (l.waiting.erase(consumer) > 0 && l.waiting.empty()) {
      reported = true; // its served rounds are known now
      ++version_;
    }
  const bool promoted = try_promote();
  return settle_lost() || promoted || reported;
}

void RoundRobinJob::expect(msg::task_id_t task) {
  if (recovering_) {
    recovery_expected_.insert(task);
    return;
  }
  if (!published_ && !schedule_.has(task))
    initial_.insert(task);
}

bool RoundRobinJob::add_task(msg::task_id_t task) {
  if (recovering_) {
    recovery_added_.insert(task);
    return false;
  }
  stop_awaiting(task);
  if (schedule_.has(task) || pending_.count(task))
    return false;
  ++version_;
  if (!published_) { // nobody planned a round yet
    initial_.erase(task);
    schedule_.add(task, 0);
    return true;
  }
  new_fence();
  pending_.insert(task);
  try_promote();
  return true;
}

void RoundRobinJob::new_fence() {
  if (pending_.empty() && retiring_.empty()) // never one a consumer may still echo from before
    fence_ = std::max(max_round_ + lookahead_, fence_ + 1);
}

bool RoundRobinJob::retire(msg::task_id_t task) {
  if (recovering_) {
    recovery_retired_.insert(task);
    return false;
  }
  if (initial_.erase(task) > 0 || pending_.erase(task) > 0) { // it served no round
    ++version_;
    try_promote();
    return true;
  }
  if (!schedule_.has(task) || schedule_.end_round(task) >= 0 || retiring_.count(task))
    return false;
  new_fence();
  retiring_.insert(task);
  ++version_;
  try_promote();
  return true;
}

std::vector<std::pair<msg::task_id_t, int64_t>> RoundRobinJob::take_ended() {
  return std::exchange(ended_, {});
}

void RoundRobinJob::end_later(msg::task_id_t task, int64_t rounds) {
  ended_.emplace_back(task, rounds);
}

std::vector<RoundRobinJob::Span> RoundRobinJob::retired() const {
  std::vector<Span> out;
  for (auto task : gone_) {
    auto served = served_.find(task);
    out.push_back(Span{task, schedule_.start_round(task), schedule_.end_round(task),
                       served == served_.end() ? -1 : served->second});
  }
  return out;
}

std::vector<RoundRobinJob::Span> RoundRobinJob::lost() const {
  std::vector<Span> out;
  for (const auto& [task, l] : lost_) {
    const bool known = l.waiting.empty() && l.served != std::numeric_limits<int64_t>::max();
    out.push_back(Span{task, schedule_.start_round(task), schedule_.end_round(task),
                       known ? l.served : -1});
  }
  return out;
}

bool RoundRobinJob::task_lost(msg::task_id_t task) {
  if (recovering_) {
    recovery_lost_.insert(task);
    recovery_retired_.erase(task);
    return false;
  }
  stop_awaiting(task);
  bool changed = false;
  if (initial_.erase(task) > 0) {
    ++version_; // consumers may start once the other initial tasks are assigned
    changed = true;
  }
  if (pending_.erase(task) > 0) {
    ++version_;
    try_promote();
    changed = true;
  }
  if (!schedule_.has(task) || gone_.count(task) || lost_.count(task))
    return changed;
  // Even a retired task (end round known) may not have served every consumer its last rounds.
  auto& l = lost_[task];
  for (const auto& [id, c] : consumers_)
    l.waiting.insert(id);
  if (schedule_.end_round(task) < 0 && !retiring_.count(task)) {
    new_fence();
    retiring_.insert(task);
  }
  ++version_;
  try_promote();
  settle_lost();
  return true;
}

bool RoundRobinJob::settle_lost() {
  bool changed = false;
  for (auto it = lost_.begin(); it != lost_.end();) {
    const auto task = it->first;
    const auto end = schedule_.end_round(task);
    if (!it->second.waiting.empty() || end < 0) {
      ++it;
      continue;
    }
    const auto total = schedule_.local_rounds(task, end);
    served_[task] = it->second.served < total ? it->second.served : -1;
    gone_.insert(task);
    it = lost_.erase(it);
    changed = true;
  }
  if (changed)
    ++version_;
  return changed;
}

bool RoundRobinJob::on_poll(msg::consumer_id_t consumer, int64_t round, int64_t known_fence,
                            const std::vector<LostRoundsReport>& reports) {
  auto it = consumers_.find(consumer);
  if (it == consumers_.end())
    return false;
  if (recovering_) { // where it stands counts for the first fence after the recovery
    it->second.round = std::max(it->second.round, round);
    max_round_ = std::max(max_round_, round);
    return false;
  }
  bool changed = false;
  for (const auto& r : reports) {
    auto l = lost_.find(r.task);
    if (l == lost_.end() || l->second.waiting.erase(consumer) == 0)
      continue;
    if (r.rounds >= 0)
      l->second.served = std::min(l->second.served, r.rounds);
    if (l->second.waiting.empty()) { // its served rounds are known now
      ++version_;
      changed = true;
    }
  }
  changed |= settle_lost();
  it->second.round = std::max(it->second.round, round);
  it->second.known_fence = known_fence;
  max_round_ = std::max(max_round_, round);
  if (pending_.empty() && retiring_.empty())
    return changed;
  if (round > fence_) { // this consumer went past the fence before it saw it: move it out
    fence_ = std::max(max_round_ + lookahead_, fence_ + 1);
    ++version_;
    return true;
  }
  return try_promote() || changed;
}

bool RoundRobinJob::try_promote() {
  if (pending_.empty() && retiring_.empty())
    return false;
  for (const auto& [id, c] : consumers_)
    if (c.known_fence != fence_ || c.round > fence_)
      return false;
  for (auto task : pending_)
    schedule_.add(task, fence_);
  for (auto task : retiring_) {
    schedule_.end(task, fence_);
    ended_.emplace_back(task, schedule_.local_rounds(task, fence_));
  }
  pending_.clear();
  retiring_.clear();
  ++version_;
  settle_lost(); // lost tasks that only waited for their end round
  return true;
}

Status RoundRobinJob::merge_span(const RoundSpan& span, const char* what) {
  auto [it, fresh] = known_.try_emplace(span.task, Known{span.start_round, -1, false, false, -1});
  auto& k = it->second;
  auto differ = [&](const char* field, int64_t had, int64_t got) {
    return Status{ErrorCode::data_loss,
                  std::string{"coordinated read: after the dispatcher restarted, consumers "
                              "disagree on the "} + field + " of task " + std::to_string(span.task) +
                    " (" + std::to_string(had) + " and " + std::to_string(got) +
                    "): the rounds can no longer be aligned"};
  };
  if (!fresh && k.start != span.start_round)
    return differ("start round", k.start, span.start_round);
  if (span.end_round >= 0) {
    if (k.end >= 0 && k.end != span.end_round)
      return differ("end round", k.end, span.end_round);
    k.end = span.end_round;
  }
  const std::string kind = what;
  if (kind == "gone") {
    k.gone = true;
    k.lost = false;
  } else if (kind == "lost" && !k.gone) {
    k.lost = true;
  }
  if (span.served_rounds >= 0) {
    if (k.served >= 0 && k.served != span.served_rounds)
      return differ("rounds served", k.served, span.served_rounds);
    k.served = span.served_rounds;
  }
  return Status::OK();
}

Expected<bool> RoundRobinJob::recover(msg::consumer_id_t consumer,
                                      const std::vector<RoundSpan>& active,
                                      const std::vector<RoundSpan>& gone,
                                      const std::vector<RoundSpan>& lost) {
  if (!recovering_ || !consumers_.count(consumer))
    return false;
  for (const auto& s : active)
    CONVEYOR_RETURN_IF_ERROR(merge_span(s, "active"));
  for (const auto& s : gone)
    CONVEYOR_RETURN_IF_ERROR(merge_span(s, "gone"));
  for (const auto& s : lost)
    CONVEYOR_RETURN_IF_ERROR(merge_span(s, "lost"));
  reported_.insert(consumer);
  if (static_cast<int64_t>(reported_.size()) < num_consumers_)
    return false;
  finish_recovery();
  return true;
}

void RoundRobinJob::finish_recovery() {
  if (!recovering_)
    return;
  recovering_ = false;
  reported_.clear();
  ++version_;
  for (const auto& [task, k] : known_) {
    schedule_.add(task, k.start);
    if (k.end >= 0)
      schedule_.end(task, k.end);
  }
  published_ = !schedule_.empty();
  for (const auto& [task, k] : known_) {
    if (!k.gone && !k.lost && k.end >= 0) // retired, still serving: tell its task again
      ended_.emplace_back(task, schedule_.local_rounds(task, k.end));
    if (k.gone) {
      gone_.insert(task);
      if (k.served >= 0)
        served_[task] = k.served;
    } else if (k.lost) { // settled again: the consumers report what they received
      auto& l = lost_[task];
      if (k.served >= 0)
        l.served = k.served; // every consumer had reported: known
      else
        for (const auto& [id, c] : consumers_)
          l.waiting.insert(id);
      if (k.end < 0 && !retiring_.count(task)) {
        new_fence();
        retiring_.insert(task);
      }
    }
  }
  for (const auto& [task, k] : known_)
    if (!k.gone && !k.lost)
      awaiting_.insert(task); // until add_task (listed again) or task_lost
  known_.clear();
  for (auto task : std::exchange(recovery_expected_, {}))
    expect(task);
  for (auto task : std::exchange(recovery_added_, {}))
    add_task(task); // not started before (or nobody saw it start): behind a fence
  for (auto task : std::exchange(recovery_lost_, {}))
    task_lost(task);
  for (auto task : std::exchange(recovery_retired_, {}))
    retire(task);
  try_promote();
  settle_lost();
}

int64_t RoundRobinJob::start_round(msg::task_id_t task) const {
  if (schedule_.has(task))
    return schedule_.start_round(task);
  return pending_.count(task) ? -1 : -2;
}

// ---------------------------------------------------------------------------------------------

std::string encode_round_elements(const std::vector<Element>& elements, Compression compression) {
  return encode_batch(elements, compression);
}

Status decode_round_elements(std::string_view payload, uint32_t count, std::vector<Element>& out) {
  if (!out.empty()) { // appending: decode aside
    std::vector<Element> decoded;
    CONVEYOR_RETURN_IF_ERROR(decode_round_elements(payload, count, decoded));
    for (auto& e : decoded)
      out.push_back(std::move(e));
    return Status::OK();
  }
  std::vector<Element>& decoded = out;
  CONVEYOR_RETURN_IF_ERROR(decode_batch(payload, decoded));
  if (decoded.size() != count)
    return Status{ErrorCode::data_loss, "coordinated read: a reply announced " +
                                          std::to_string(count) + " elements and held " +
                                          std::to_string(decoded.size())};
  return Status::OK();
}

} // namespace conveyor::actors
