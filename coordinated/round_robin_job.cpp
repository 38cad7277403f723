#include "coordinated/round_robin_job.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::actors {

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
    out.push_back(
      Span{task, schedule_.start_round(task), schedule_.end_round(task), known ? l.served : -1});
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
                              "disagree on the "} +
                    field + " of task " + std::to_string(span.task) + " (" + std::to_string(had) +
                    " and " + std::to_string(got) + "): the rounds can no longer be aligned"};
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

} // namespace conveyor::actors
