// Coordinated reads, the consumer actor's side of the wire (CAF-free): what a consumer's
// RoundRobinPlanner puts into its job polls, joins and get_elements requests, and how it takes
// the task lists and element batches that answer them. The consumer actor (consumer/) only
// sends and receives; the round logic stays here, beside the planner. See round_robin.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "coordinated/round_robin_planner.hpp"
#include "messages/job_consumer.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

class RoundRobinReader {
public:
  // The planner's window: the consumer's element credit, at most 8192 rounds ahead (a new
  // worker joins a little beyond the rounds the consumers planned: keep that near), and its
  // byte budget (max_buffered_bytes). It may be a restarted process of an index that read this
  // job before: it asks the tasks where its index stands before it plans a round.
  RoundRobinReader(int64_t consumer_index, int64_t num_consumers, int64_t max_outstanding,
                   int64_t max_bytes);

  RoundRobinPlanner& planner() { return planner_; }
  const RoundRobinPlanner& planner() const { return planner_; }

  // The poll to the job: the next round this consumer would plan, the fence it knows (the ack)
  // and its reports on lost tasks.
  void fill_poll(msg::get_tasks& req) const;
  // A restarted dispatcher's job rebuilds the rounds from what this consumer knows.
  void fill_join(msg::join_job& req) const;
  // A task list that is not rounds_recovering: the planner checks it against the rounds it
  // planned (a retired task that left must have served this consumer every round it owed).
  Status on_task_list(const msg::task_list& list);
  // The round fields of the request for `r` (the caller fills the rest: consumer, limits, hold).
  void fill_request(const RoundRobinPlanner::Request& r, int64_t consumer_index,
                    int64_t round_timeout_ns, msg::get_elements& req) const;
  // The reply to a request for rounds (not a probe): decodes its elements and hands them to the
  // planner. An error is final for the read.
  Status on_batch(const RoundRobinPlanner::Request& r, const msg::element_batch& batch);
  // Elements of consecutive complete rounds, in round order (counted as delivered).
  // `rounds` (optional) gets each one's place for the read cursor: (task slot, the slot's round),
  // from the slots the task lists named (note_slots).
  std::vector<Element> take_ready(std::vector<std::pair<int64_t, int64_t>>* rounds = nullptr);
  // The read-cursor slot of each listed task and its first local round (a resumed read's task
  // skips the rounds its slot's trainers consumed: task_info.off_slot, off_skip = rounds * N).
  void note_slots(const msg::task_list& list);

  // What this consumer received through rounds (for its stats).
  int64_t elements() const { return elements_; }
  int64_t bytes() const { return bytes_; }
  int64_t messages() const { return messages_; }

private:
  RoundRobinPlanner planner_;
  int64_t num_consumers_;
  std::map<msg::task_id_t, std::pair<int64_t, int64_t>> slots_; // task -> (slot, base round)
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  int64_t messages_ = 0;
};

} // namespace conveyor::actors
