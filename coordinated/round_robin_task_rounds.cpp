#include "coordinated/round_robin_task_rounds.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::actors {

RoundRobinTaskRounds::RoundRobinTaskRounds(int64_t num_consumers)
  : asked_(static_cast<std::size_t>(std::max<int64_t>(num_consumers, 1)), 0),
    next_(asked_.size(), 0), ready_(asked_.size()), skip_to_(asked_.size(), 0),
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
    return Status{ErrorCode::internal, "coordinated read: consumer_index " + std::to_string(index) +
                                         " skipped rounds: it asked for local round " +
                                         std::to_string(first) + " but has not received round " +
                                         std::to_string(next_[i])};
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

} // namespace conveyor::actors
