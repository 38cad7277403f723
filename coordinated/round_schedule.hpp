// Coordinated reads: the schedule every party computes alike (round -> task) and the span and
// report types the job, planner and task exchange. See round_robin.hpp for the protocol.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "messages/protocol.hpp"

namespace conveyor::actors {

// A consumer's report on a lost task: how many of its local rounds it received (-1: it is
// rejoining and holds none; it does not bound what the task served).
struct LostRoundsReport {
  msg::task_id_t task = 0;
  int64_t rounds = -1;
};

// A task's global rounds [start_round, end_round) (end_round -1: none yet) and, for a lost task,
// the local rounds it served (-1: all, or not known yet): the wire's type itself.
using RoundSpan = msg::round_span;

// Which task serves which global round. A task is active in [start round, end round); round r
// goes to active[r mod |active|], the active tasks in order of (start round, task id).
class RoundSchedule {
public:
  static constexpr int64_t kNoEnd = std::numeric_limits<int64_t>::max();
  // Adds an active task from `start_round` on. A task starting at a round some earlier-planned
  // round already passed would change history: the caller checks that (see RoundRobinPlanner).
  void add(msg::task_id_t task, int64_t start_round);
  // The task serves no round >= end_round (its worker drained). The same check as for add.
  void end(msg::task_id_t task, int64_t end_round);
  bool has(msg::task_id_t task) const { return tasks_.count(task) > 0; }
  bool empty() const { return order_.empty(); }
  std::vector<msg::task_id_t> tasks() const;      // every task ever added
  int64_t start_round(msg::task_id_t task) const; // -1 unknown
  int64_t end_round(msg::task_id_t task) const;   // -1 unknown or none
  // The task serving `round`; nullopt when no task is active at that round.
  std::optional<msg::task_id_t> task_for(int64_t round) const;
  // The first round >= `round` some task serves; nullopt when none ever will (as known now).
  std::optional<int64_t> next_served(int64_t round) const;
  // How many rounds before `until` the task serves: its local rounds below global round `until`.
  int64_t local_rounds(msg::task_id_t task, int64_t until) const;

private:
  struct Span {
    int64_t start = 0;
    int64_t end = kNoEnd;
  };
  std::map<msg::task_id_t, Span> tasks_;
  std::vector<std::pair<int64_t, msg::task_id_t>> order_; // sorted (start round, task)
  bool any_end_ = false; // without ends, the active tasks at r are a prefix of order_
};

} // namespace conveyor::actors
