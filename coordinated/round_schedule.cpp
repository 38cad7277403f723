#include "coordinated/round_schedule.hpp"

#include <algorithm>

namespace conveyor::actors {

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
  auto started_end =
    std::upper_bound(order_.begin(), order_.end(),
                     std::make_pair(round, std::numeric_limits<msg::task_id_t>::max()));
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

} // namespace conveyor::actors
