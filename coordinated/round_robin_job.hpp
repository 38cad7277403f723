// Coordinated reads, the job's side (CAF-free): RoundRobinJob. See round_robin.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "coordinated/round_schedule.hpp"
#include "messages/protocol.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// The job's side: start rounds, the fence, and the consumers' acks.
class RoundRobinJob {
public:
  RoundRobinJob(int64_t num_consumers, int64_t lookahead = 256);

  int64_t num_consumers() const { return num_consumers_; }
  // A consumer joins with its index: an error when the index is out of range or a live consumer
  // already has it (can_join checks without joining).
  Status can_join(int64_t index) const;
  Status join(msg::consumer_id_t consumer, int64_t index);
  // The consumer that holds `index` (0 = none).
  msg::consumer_id_t holder(int64_t index) const;
  // Returns whether the list changed (a pending task could be promoted).
  bool leave(msg::consumer_id_t consumer);
  // The dispatcher created a task (not assigned yet). Before any list with an active task went
  // out, it is an *initial* task: consumers plan nothing (fence 0) until every initial task is
  // assigned or lost, and all of them start at round 0.
  void expect(msg::task_id_t task);
  // A task becomes listed (assigned): an initial one is active at round 0; a later one is
  // pending behind a fence. Returns true (the list changed).
  bool add_task(msg::task_id_t task);
  // A listed task was lost (no drain, or during one). One serving rounds is settled: it ends
  // behind a fence (unless it has an end round already), every consumer joined now reports how
  // many of its local rounds it received (on_poll), and the least of those is what it served
  // (the consumers skip its later rounds). Returns whether the list changed.
  bool task_lost(msg::task_id_t task);
  // The task's worker drains: the task gets an end round as a new task gets its start round,
  // behind a fence every consumer acknowledged. A task not serving rounds yet is dropped.
  // Returns whether the list changed.
  bool retire(msg::task_id_t task);
  // Tasks given an end round since the last call, with how many local rounds they serve in all
  // (the job tells each its count: it is drained once every consumer took them).
  std::vector<std::pair<msg::task_id_t, int64_t>> take_ended();
  // An ended task whose worker the job cannot reach yet (a restarted dispatcher's task whose
  // worker has not registered again): handed out by the next take_ended() again.
  void end_later(msg::task_id_t task, int64_t rounds);
  using Span = RoundSpan; // lost(): end_round -1 = not known yet
  // Retired tasks that are gone, for the consumers' schedules.
  std::vector<Span> retired() const;
  // Lost tasks being settled.
  std::vector<Span> lost() const;
  // A consumer's poll: its next round to plan, the fence it knows and its reports on lost
  // tasks. Returns whether the list changed (fence moved, pending tasks promoted, a lost task
  // settled).
  bool on_poll(msg::consumer_id_t consumer, int64_t round, int64_t known_fence,
               const std::vector<LostRoundsReport>& reports = {});
  // The job was restored by a restarted dispatcher: until every consumer_index joined again
  // with what it knows (recover) or finish_recovery() is called, the job decides no round: tasks
  // added, lost or retired meanwhile are applied once the schedule is rebuilt.
  // Lists say rounds_recovering until then and until every task that was serving rounds is
  // listed again (its worker registered again) or lost: a consumer never sees one missing.
  void start_recovery() { recovering_ = true; }
  bool recovering() const { return recovering_ || !awaiting_.empty(); }
  // Still waiting for consumers to say what they know (recover / finish_recovery).
  bool waiting_for_consumers() const { return recovering_; }
  // A consumer that joined (join) during recovery says what its planner knows. An error when it
  // contradicts what another consumer said (a start or end round). Returns whether the
  // recovery ended (a consumer of every index said it).
  Expected<bool> recover(msg::consumer_id_t consumer, const std::vector<RoundSpan>& active,
                         const std::vector<RoundSpan>& gone, const std::vector<RoundSpan>& lost);
  // Ends the recovery with what the consumers said so far (those that did not come back within
  // the job's time for it planned nothing the others do not know, or fail loudly on the list).
  void finish_recovery();
  // A list with these start rounds is going out.
  void published() {
    if (!schedule_.empty() && initial_.empty())
      published_ = true;
  }

  int64_t start_round(msg::task_id_t task) const; // -1 pending, -2 unknown
  int64_t end_round(msg::task_id_t task) const { return schedule_.end_round(task); } // -1 none
  int64_t fence() const {
    return !initial_.empty() ? 0 : pending_.empty() && retiring_.empty() ? -1 : fence_;
  }
  uint64_t version() const { return version_; }
  std::size_t pending() const { return pending_.size(); }
  std::size_t retiring() const { return retiring_.size(); }

private:
  bool try_promote();
  void new_fence();   // for a first pending or retiring task
  bool settle_lost(); // lost tasks every consumer reported on and with an end round: gone
  Status merge_span(const RoundSpan& span, const char* what);
  struct Consumer {
    int64_t index = 0;
    int64_t round = 0;
    int64_t known_fence = -1;
  };
  int64_t num_consumers_;
  int64_t lookahead_;
  std::map<msg::consumer_id_t, Consumer> consumers_;
  RoundSchedule schedule_; // the tasks with a start round (and the retired ones' end rounds)
  std::set<msg::task_id_t> pending_;
  std::set<msg::task_id_t> retiring_; // waiting for their end round (the fence)
  std::set<msg::task_id_t> gone_;     // retired and lost, settled
  struct Lost {
    std::set<msg::consumer_id_t> waiting;                 // joined at the loss, not reported yet
    int64_t served = std::numeric_limits<int64_t>::max(); // the least reported so far
  };
  std::map<msg::task_id_t, Lost> lost_;      // lost, being settled
  std::map<msg::task_id_t, int64_t> served_; // gone after a loss: local rounds it served (-1 all)
  std::vector<std::pair<msg::task_id_t, int64_t>> ended_; // for take_ended
  std::set<msg::task_id_t> initial_; // created before the first list, not assigned yet
  int64_t fence_ = -1;
  int64_t max_round_ = 0; // the highest round any consumer reported
  bool published_ = false;
  uint64_t version_ = 0;
  // Recovery (start_recovery): what the consumers said, and what happened meanwhile.
  bool recovering_ = false;
  struct Known {
    int64_t start = 0;
    int64_t end = -1;
    bool gone = false;
    bool lost = false;
    int64_t served = -1;
  };
  std::map<msg::task_id_t, Known> known_;
  std::set<msg::consumer_id_t> reported_; // joined and said what they know
  std::set<msg::task_id_t> recovery_expected_, recovery_added_, recovery_lost_, recovery_retired_;
  std::set<msg::task_id_t> awaiting_; // serving rounds before the restart, not listed again yet
  void stop_awaiting(msg::task_id_t task) {
    if (awaiting_.erase(task) > 0 && awaiting_.empty())
      ++version_; // lists stop saying rounds_recovering
  }
};

} // namespace conveyor::actors
