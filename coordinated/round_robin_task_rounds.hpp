// Coordinated reads, the task's side (CAF-free): RoundRobinTaskRounds. See round_robin.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

// The task's side: which local rounds each consumer asked for, which rounds are complete, and
// the elements reserved per consumer.
class RoundRobinTaskRounds {
public:
  explicit RoundRobinTaskRounds(int64_t num_consumers);

  // Consumer `index` asks for local rounds [first, first + count). Error: a bad index, a gap (a
  // skipped round) or a round already served to it.
  Status ask(int64_t index, int64_t first, uint32_t count, int64_t now_ns);
  // A (restarted) consumer `index` rejoins at local round `first` (>= next_for(index), else an
  // error): rounds before it kept for the index are dropped, and rounds before it no longer
  // wait for it (its element of those rounds is dropped when they complete).
  Status resume(int64_t index, int64_t first, int64_t now_ns);
  // How many rounds can complete now (every consumer asked for them), before elements.
  int64_t completable() const;
  // Completes the next round with these N elements (element i for consumer i).
  void complete(std::vector<Element> elements, int64_t now_ns);
  // Completes the next k rounds at once with k * N elements, round by round (element j goes to
  // consumer j mod N); `sizes` (optional, one per element) are their byte sizes, so that take()
  // need not measure them again. At most completable() rounds.
  void complete_many(std::vector<Element> elements, const std::vector<std::size_t>& sizes,
                     int64_t now_ns);
  // Up to `max` reserved elements of consumer `index`, in round order, about `max_bytes` (at
  // least one).
  std::vector<Element> take(int64_t index, uint32_t max, uint64_t max_bytes);
  bool has_ready(int64_t index) const;
  // A round some consumer asked for and another has not, for longer than `timeout_ns`: the
  // error to fail the waiting requests with. (The task checks on every request and produce
  // step, so the error comes within the timeout plus the consumers' request timeout.)
  std::optional<std::string> stalled(int64_t now_ns, int64_t timeout_ns) const;

  int64_t num_consumers() const { return static_cast<int64_t>(asked_.size()); }
  // invalid_argument unless 0 <= index < num_consumers().
  Status check_index(int64_t index) const;
  int64_t completed() const { return completed_; }
  int64_t next_for(int64_t index) const { return next_[static_cast<std::size_t>(index)]; }
  // Consumer `index` has every round below local round `below` (it asks for the next one, or
  // says so with a confirm).
  void confirm(int64_t index, int64_t below);
  // Consumer `index` left the job: the others' rounds no longer wait for its confirms (until a
  // new process of the index rejoins: resume).
  void release(int64_t index);
  // Every consumer has its elements of local rounds [0, rounds): not just sent (a reply may be
  // in flight), confirmed. A retired task is then drained.
  bool all_confirmed(int64_t rounds) const { return committed() >= rounds; }
  // Every consumer has the local rounds below this (the least confirmed).
  int64_t committed() const { return *std::min_element(confirmed_.begin(), confirmed_.end()); }

private:
  std::vector<int64_t> asked_; // per consumer: local rounds < asked_[i] were asked for
  std::vector<int64_t> next_;  // per consumer: the next local round it gets
  struct Reserved {
    Element element;
    std::size_t bytes = 0;
  };
  std::vector<std::deque<Reserved>> ready_;
  std::vector<int64_t> skip_to_;   // per consumer: its elements of rounds below are dropped
  std::vector<int64_t> confirmed_; // per consumer: it has every round below
  int64_t completed_ = 0;
  int64_t waiting_since_ns_ = -1; // someone asked for round completed_ and someone did not
  void update_waiting(int64_t now_ns);
};

} // namespace conveyor::actors
