// Coordinated reads, the task actor's side of the wire (CAF-free): which get_elements requests
// of a coordinated task are valid, what each is answered with, and when the task's rounds have
// failed for good. It owns the task's RoundRobinTaskRounds; the task actor (worker/) only holds
// the requests that must wait, takes elements from its pipeline and sends the replies. See
// round_robin.hpp for the protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinated/round_robin_task_rounds.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::actors {

class RoundRobinTaskServer {
public:
  // `label` names the task in errors ("task 3 (job 1)").
  RoundRobinTaskServer(int64_t num_consumers, std::string label, Compression compression);

  const RoundRobinTaskRounds& rounds() const { return rounds_; }
  int64_t num_consumers() const { return rounds_.num_consumers(); }
  // Final: once set, every later request gets it.
  const Status& error() const { return error_; }

  // A confirm: "I have every local round below round_first" (no rounds asked for); answered when
  // the task's committed rounds pass what the consumer knows.
  static bool is_confirm(const msg::get_elements& req) {
    return req.round_count == 0 && !req.round_resume;
  }
  // The request asks to be answered (without elements, if need be) once the committed rounds
  // pass round_committed_known: its consumer holds rounds of this task it cannot hand out before.
  bool committed_past(const msg::get_elements& req) const {
    return req.round_committed_known >= 0 && rounds_.committed() > req.round_committed_known;
  }
  // A reply without elements that says how far every consumer has this task's rounds.
  msg::element_batch committed_reply() const;

  // A request that names no consumer_index, or comes from a consumer the job dropped: the
  // error it is refused with (OK: go on).
  Status admit(const msg::get_elements& req) const;
  // Notes the consumers' round timeout and which consumer reads the request's index now.
  void note_reader(const msg::get_elements& req);
  // A confirm: records that its consumer has the rounds below round_first.
  Status confirm(const msg::get_elements& req);
  // A probe of a (re)started consumer: the next local round the task owes its index.
  Expected<int64_t> where(const msg::get_elements& req) const;
  // A request for rounds: rejoins (round_resume) and asks for them. An error is the request's.
  Status ask(const msg::get_elements& req, int64_t now_ns);

  // How many rounds can complete from `buffered` elements in the pipeline's buffer (0 once
  // failed); complete() takes them (N per round).
  int64_t completable(std::size_t buffered) const;
  void complete(std::vector<Element> elements, const std::vector<std::size_t>& sizes,
                int64_t now_ns);
  // The request's consumer has elements reserved: its reply (nullopt: none yet).
  std::optional<msg::element_batch> take_reply(const msg::get_elements& req);
  // The pipeline failed or ended (an infinite dataset is needed) with fewer elements than a
  // round: the rounds fail for good. True when they did.
  bool fail_if_short(bool failed, bool ended, std::size_t buffered, const Status& pipeline_error);
  // A round some consumer never asks for within the consumers' round timeout fails the rounds,
  // naming who is missing. True when it did (now).
  bool fail_if_stalled(int64_t now_ns);

  // The job dropped `consumer` (leave_job). Unless it finished, a request of it that comes back
  // is refused. True when its index's confirms were released (held requests may be answered).
  bool consumer_left(msg::consumer_id_t consumer, bool finished);
  // The worker drains: the task serves `local_rounds` rounds in all (end_rounds).
  void end(int64_t local_rounds) { end_ = local_rounds; }
  // Retired and every consumer confirmed every round it serves.
  bool drained() const { return end_ >= 0 && rounds_.all_confirmed(end_); }

private:
  RoundRobinTaskRounds rounds_;
  std::string label_;
  Compression compression_;
  // A draining worker: the local rounds this task serves in all (the job's end_rounds); -1 =
  // not retired (yet).
  int64_t end_ = -1;
  Status error_;
  // Which consumer reads each consumer_index now (from its requests); its leaving (leave_job
  // from the job) releases the index's confirms.
  std::map<int64_t, msg::consumer_id_t> readers_;
  // Consumers the job dropped (leave_job). Their rounds went to the others, and the job may
  // have changed the schedule without them (a task added behind a fence they never
  // acknowledged): one that comes back is refused, so that it hands out no round it planned
  // under the old schedule.
  std::set<msg::consumer_id_t> left_;
  int64_t round_timeout_ns_ = 0; // the consumers' (from their requests)
};

} // namespace conveyor::actors
