// Coordinated (round-robin) reads, without actors: tf.data service's `num_consumers` /
// `consumer_index` (RoundRobinTaskRunner + the client's round handling), as three small state
// machines the job, task and consumer actors drive.
//
// Rounds. A named job read by N consumers (consumer_index 0..N-1) is read in *rounds*: in round r
// every consumer receives exactly one element, all N from the same task, which produced them one
// after the other: consumer i gets the i-th of the task's N elements for that round. So the N
// trainers see aligned global batches (the reference's bucketizing use case).
//
// Which task serves round r is a pure function every party computes alike (RoundSchedule): the
// job gives each task a *start round*; the tasks active at r are those whose start round is <= r,
// in order of (start round, task id); round r goes to active[r mod |active|]. A task counts its
// own rounds as *local* rounds 0, 1, 2, ... (the k-th global round it serves is its local round k).
//
//   consumer i -> task   get_elements{round_first = j, round_count = k, consumer_index = i}: "my
//                        elements of your local rounds j .. j+k-1" (j must be the next local round
//                        the task owes consumer i: a gap = a skipped round, a repeat = a round served
//                        twice; both are errors, never silent).
//   task                 completes local round j once all N consumers asked for it: takes N
//                        elements from its buffer, element i reserved for consumer i
//                        (RoundRobinTaskRounds). A round some consumer does not ask for within
//                        the consumers' round timeout fails the held requests with an error
//                        naming the missing consumer indices.
//   job -> consumers     task_list: every task's start round (-1 = pending) and a *fence*: no
//                        consumer plans a round >= fence while a task is pending.
//   consumer -> job      get_tasks{round = next round it would plan, round_fence = the fence it
//                        knows}: the poll is also the ack of the fence.
//
// New workers (RoundRobinJob). The first tasks start at round 0. A task added later is *pending*:
// the job sets the fence R = (the highest round any consumer reported) + lookahead and waits
// until every joined consumer reported the fence R and a round <= R (then none plans past R
// without the new task). It then gives the pending tasks start round R and lifts the fence. A
// consumer that was already past R makes the job move R further out. No round is skipped or
// repeated, because no consumer ever planned a round >= R under the old schedule.
//
// A restarted consumer (RoundRobinPlanner::start_resuming, RoundRobinTaskRounds::resume): the
// new process of an index asks every task where the index stands and starts at the first round
// every task can serve it; the tasks drop what they kept for the index before that round.
//
// The commit watermark (RoundRobinTaskRounds::committed): every reply of a task says which of its
// local rounds every consumer has (asking for rounds from j, or a *confirm*, says "I have those
// below j"); a consumer hands a round to its reader only below it. So no consumer ever handed
// out a round another consumer may never get.
//
// A lost task (RoundRobinJob::task_lost; its worker crashed or cannot be reached, or it left
// after a drain): its rounds cannot be served elsewhere, so the job *settles* it. It ends behind
// a fence like a draining task (if it had no end round yet); consumers stop asking it and report
// how many of its local rounds they received; the least of those, K, is what it served. Every
// consumer hands out the task's local rounds below K (the watermark was at most K, so none
// handed out more) and skips its later rounds up to its end round alike: the rounds stay aligned
// and only what the lost worker held is lost. A consumer that did hand out more (none should)
// fails loudly (RoundRobinPlanner::on_tasks).
//
// A restarted dispatcher (RoundRobinJob::start_recovery): the schedule lived in the job and in
// every consumer's planner, and only what some consumer saw was ever planned with. The restored
// job decides nothing until every consumer_index joined again and said what its planner knows
// (RoundRobinPlanner::known_schedule -> join_job.known_*; task_list.rounds_recovering meanwhile,
// which the consumers skip while they read on from the tasks they know). The union of those is
// the old job's schedule as far as anyone planned with it: the tasks' start and end rounds, the
// retired and settled tasks, and lost tasks still being settled. Tasks that had not started yet
// (pending) or that nobody saw start join behind a fence again, as new workers do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "messages/protocol.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

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
  std::vector<msg::task_id_t> tasks() const; // every task ever added
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

// The consumer's side: plans rounds onto tasks, asks each task for its planned local rounds, and
// hands the received elements out in global round order.
class RoundRobinPlanner {
public:
  struct Request {
    msg::task_id_t task = 0;
    int64_t first = 0;   // local round
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
    int64_t start_round = 0; // -1 = pending (not read yet)
    int64_t end_round = -1;  // retiring: it serves no round >= end_round; -1 = none
    bool gone = false;       // retired and no longer listed (task_list.retired_rounds)
    bool lost = false;       // lost and being settled (task_list.lost_rounds)
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
      auto count = static_cast<uint32_t>(std::min<int64_t>(t.planned - t.requested,
                                                           max_per_request));
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
  Status on_reply(const Request& request, std::vector<Element> elements,
                  int64_t committed = -1);
  // The request got no reply (timeout): it is asked again.
  void on_request_failed(const Request& request);
  // Elements of consecutive rounds ready to hand out, in round order.
  std::vector<Element> take_ready();
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
    int64_t planned = 0;    // local rounds assigned so far
    int64_t requested = 0;  // local rounds asked for (or in flight)
    int64_t received = 0;   // local rounds received
    bool in_flight = false;
    uint32_t in_flight_count = 0;
    bool probed = false;     // resuming: the task said where this consumer stands
    int64_t frontier = 0;    // ... its next local round for this consumer
    bool resume = false;     // the next request rejoins at `requested` (until one is answered)
    int64_t committed = 0;    // every consumer has its local rounds below this
    bool confirm_in_flight = false;
    bool lost = false;        // lost: asked no more; its replies are dropped
    int64_t limit = -1;       // lost: it served local rounds [0, limit) (-1 = not known yet)
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
    int64_t bytes = 0; // measured once, when it came
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
  std::vector<int64_t> skip_to_; // per consumer: its elements of rounds below are dropped
  std::vector<int64_t> confirmed_; // per consumer: it has every round below
  int64_t completed_ = 0;
  int64_t waiting_since_ns_ = -1; // someone asked for round completed_ and someone did not
  void update_waiting(int64_t now_ns);
};

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
  void new_fence(); // for a first pending or retiring task
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
    std::set<msg::consumer_id_t> waiting; // joined at the loss, not reported yet
    int64_t served = std::numeric_limits<int64_t>::max(); // the least reported so far
  };
  std::map<msg::task_id_t, Lost> lost_;     // lost, being settled
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

// Encodes / decodes one consumer's elements of a coordinated reply (the element_batch payload).
std::string encode_round_elements(const std::vector<Element>& elements, Compression compression);
Status decode_round_elements(std::string_view payload, uint32_t count, std::vector<Element>& out);

} // namespace conveyor::actors
