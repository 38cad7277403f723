// Coordinated reads, the consumer's side (CAF-free): RoundRobinPlanner. See round_robin.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "coordinated/round_schedule.hpp"
#include "messages/protocol.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

// The consumer's side: plans rounds onto tasks, asks each task for its planned local rounds, and
// hands the received elements out in global round order.
class RoundRobinPlanner {
public:
  struct Request {
    msg::task_id_t task = 0;
    int64_t first = 0; // local round
    uint32_t count = 0;
    // Resuming (start_resuming): `probe` asks the task where this consumer_index stands (no
    // rounds); `resume` asks for rounds from `first` on, dropping what the task kept before it.
    bool probe = false;
    bool resume = false;
    // A confirm (no rounds): "I have your local rounds below `first`; answer once every consumer
    // has more than `committed_known` of them" (RoundRobinTaskRounds::committed). A request for
    // rounds with committed_known >= 0 may be answered that way too, without elements.
    bool confirm = false;
    int64_t committed_known = -1;
  };
  struct TaskEntry {
    msg::task_id_t task = 0;
    int64_t start_round = 0;    // -1 = pending (not read yet)
    int64_t end_round = -1;     // retiring: it serves no round >= end_round; -1 = none
    bool gone = false;          // retired and no longer listed (task_list.retired_rounds)
    bool lost = false;          // lost and being settled (task_list.lost_rounds)
    int64_t served_rounds = -1; // lost: the local rounds it served (-1 = not known yet / all)
  };

  // window: rounds planned or handed out and not yet taken by the reader (the consumer's element
  // credit). max_bytes: bytes received and not yet taken, plus what requests in flight may bring
  // (each up to the bytes_per_request given to next_requests), stay within this.
  RoundRobinPlanner(int64_t consumer_index, int64_t num_consumers, int64_t window,
                    int64_t max_bytes = int64_t{1} << 40);

  // A consumer that may have read this job before under its index (a restarted process): before
  // it plans a round it asks every task where its index stands (probe requests), then starts at
  // the first round R from which every task can serve it (the largest of the tasks' next rounds,
  // as global rounds); the rounds before R are not read by this consumer. A consumer new to
  // the job finds every task at its local round 0 and starts at round 0, as without this.
  void start_resuming() { resuming_ = true; }
  bool resuming() const { return resuming_; }
  // A probe's answer: the next local round `task` owes this consumer.
  Status on_probe(const Request& request, int64_t next_local_round);

  // A task list: start and end rounds and the fence (-1 = none). An error when the list would
  // change rounds already planned (a task starting or ending below the planned rounds), or lost
  // a task before this consumer received every round it serves (a retired task that served
  // them all is forgotten, its rounds stay in the schedule).
  // A lost task: no request goes to it any more; once its served_rounds K are known, its rounds
  // from local round K on are skipped. An error when this consumer already handed out one of
  // them, or lacks one of the first K (it would misalign).
  Status on_tasks(const std::vector<TaskEntry>& tasks, int64_t fence);
  // What this consumer knows of the schedule, for a restarted dispatcher's job (start_recovery):
  // tasks serving rounds (end_round -1: none yet), tasks gone (retired, or lost and settled:
  // served_rounds, -1 = all) and lost tasks being settled (served_rounds -1: not known yet).
  struct KnownSchedule {
    std::vector<RoundSpan> active, gone, lost;
  };
  KnownSchedule known_schedule() const;
  // For each lost task not settled yet: how many of its local rounds this consumer received.
  std::vector<LostRoundsReport> lost_reports() const;
  // Plans rounds up to the window and the fence; then the requests to send now: at most one in
  // flight per task, only to tasks `ready(task)` says can be asked (connected).
  template <class Ready>
  std::vector<Request> next_requests(Ready&& ready, uint32_t max_per_request,
                                     int64_t bytes_per_request = 0) {
    std::vector<Request> out;
    if (resuming_) {
      for (auto& [task, t] : tasks_)
        if (!t.probed && !t.in_flight && ready(task)) {
          t.in_flight = true;
          ++in_flight_;
          out.push_back(Request{task, 0, 0, true, false});
        }
      return out;
    }
    plan();
    // The task owing the earliest round this consumer lacks is asked whatever the bytes held:
    // held rounds may wait for its answer (they are handed out in order, once committed).
    const auto urgent = earliest_missing();
    const auto blocking = waiting_for_commit();
    for (auto& [task, t] : tasks_) {
      if (t.in_flight || t.lost || t.requested == t.planned || !ready(task))
        continue;
      // The byte bound; with nothing in flight and nothing held one request always goes.
      const int64_t held = unacked_bytes_ + received_bytes_;
      if ((in_flight_ > 0 || held > 0) && urgent != task &&
          held + (in_flight_ + 1) * bytes_per_request > max_bytes_)
        continue;
      ++in_flight_;
      auto count =
        static_cast<uint32_t>(std::min<int64_t>(t.planned - t.requested, max_per_request));
      out.push_back(Request{task, t.requested, count, false, t.resume});
      // Its round is next to hand out but not committed: answer early, once it is.
      out.back().committed_known = blocking == task ? t.committed : -1;
      t.in_flight = true;
      t.in_flight_count = count;
      t.requested += count; // an empty reply asks for the rest again (below)
    }
    // Confirms: a task with no request of ours in flight whose rounds we hold uncommitted (or a
    // retired one we have all rounds of) learns that we have them, and answers once every
    // consumer has more of them (its drain waits for that too).
    for (auto& [task, t] : tasks_)
      if (!t.in_flight && !t.confirm_in_flight && !t.lost && t.committed < t.received &&
          ready(task)) {
        t.confirm_in_flight = true;
        Request confirm{task, t.received, 0, false, false};
        confirm.confirm = true;
        confirm.committed_known = t.committed;
        out.push_back(confirm);
      }
    return out;
  }
  // The reply to `request`: `elements` are the task's next local rounds for this consumer (fewer
  // than asked is fine; none = ask again). More than asked is an error. `committed`: the task's
  // local rounds every consumer has (-1 = not said); no round at or above it is handed out.
  Status on_reply(const Request& request, std::vector<Element> elements, int64_t committed = -1);
  // The request got no reply (timeout): it is asked again.
  void on_request_failed(const Request& request);
  // Elements of consecutive rounds ready to hand out, in round order; `where` (optional) gets
  // each one's task and local round.
  std::vector<Element> take_ready(std::vector<std::pair<msg::task_id_t, int64_t>>* where = nullptr);
  // The reader took `n` elements (frees window and bytes).
  void on_ack(int64_t n);

  // The task has an end round and this consumer received every round it serves.
  bool served_all(msg::task_id_t task) const;
  int64_t next_round() const { return next_plan_; } // the first round not planned yet
  int64_t fence() const { return fence_; }
  int64_t delivered() const { return next_deliver_; }
  bool waiting_at_fence() const { return fence_ >= 0 && next_plan_ >= fence_; }
  int64_t consumer_index() const { return index_; }

private:
  void plan();
  struct TaskRounds {
    int64_t planned = 0;   // local rounds assigned so far
    int64_t requested = 0; // local rounds asked for (or in flight)
    int64_t received = 0;  // local rounds received
    bool in_flight = false;
    uint32_t in_flight_count = 0;
    bool probed = false;   // resuming: the task said where this consumer stands
    int64_t frontier = 0;  // ... its next local round for this consumer
    bool resume = false;   // the next request rejoins at `requested` (until one is answered)
    int64_t committed = 0; // every consumer has its local rounds below this
    bool confirm_in_flight = false;
    bool lost = false;           // lost: asked no more; its replies are dropped
    int64_t limit = -1;          // lost: it served local rounds [0, limit) (-1 = not known yet)
    std::deque<int64_t> globals; // global round of each local round in [received, planned)
  };
  int64_t index_;
  int64_t num_consumers_;
  int64_t window_;
  RoundSchedule schedule_;
  std::set<msg::task_id_t> listed_;
  std::map<msg::task_id_t, TaskRounds> tasks_;
  int64_t fence_ = -1;
  int64_t next_plan_ = 0;
  int64_t next_deliver_ = 0;
  int64_t unacked_ = 0;
  int64_t max_bytes_;
  int64_t in_flight_ = 0;
  int64_t received_bytes_ = 0;
  int64_t unacked_bytes_ = 0;
  std::deque<int64_t> unacked_sizes_;
  // Rounds [next_deliver_, next_plan_): slot round - next_deliver_ holds its element once it came.
  struct Slot {
    std::optional<Element> element;
    int64_t bytes = 0;       // measured once, when it came
    msg::task_id_t task = 0; // its task and local round: handed out once committed
    int64_t local = 0;
  };
  std::deque<Slot> received_;
  // Rounds nobody hands out: a lost task's rounds from its served_rounds on (and the planted
  // bug hooks::skip_round).
  std::set<int64_t> skipped_;
  std::set<msg::task_id_t> lost_; // lost tasks not settled yet (reported on every poll)
  std::map<msg::task_id_t, int64_t> gone_served_; // lost, settled and forgotten: what it served
  bool resuming_ = false;
  // Resuming: once every task is probed and every lost task has its end round: the start round.
  Status maybe_rebase();
  // Drops a task this consumer holds no rounds of (resuming); settles its request in flight.
  std::map<msg::task_id_t, TaskRounds>::iterator
  forget(std::map<msg::task_id_t, TaskRounds>::iterator it);
  Status rebase();
  // A lost task's served rounds are known: skip its rounds from `limit` on.
  Status apply_limit(msg::task_id_t task, TaskRounds& t, int64_t limit);
  // The task serving the earliest planned round not received yet (none: nothing is missing).
  std::optional<msg::task_id_t> earliest_missing() const;
  // The task whose round is the next to hand out, received but not committed yet (none: no such).
  std::optional<msg::task_id_t> waiting_for_commit() const;
  // A request's answer (or failure) came: its task is no longer in flight. nullptr when the
  // task was forgotten meanwhile.
  TaskRounds* settle(const Request& request);
};

} // namespace conveyor::actors
