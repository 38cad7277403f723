#include "coordinated/round_robin_task_server.hpp"

#include <algorithm>
#include <utility>

#include "coordinated/round_elements.hpp"

namespace conveyor::actors {

RoundRobinTaskServer::RoundRobinTaskServer(int64_t num_consumers, std::string label,
                                           Compression compression)
  : rounds_(num_consumers), label_(std::move(label)), compression_(compression) {}

msg::element_batch RoundRobinTaskServer::committed_reply() const {
  msg::element_batch b;
  b.round_committed = rounds_.committed();
  return b;
}

Status RoundRobinTaskServer::admit(const msg::get_elements& req) const {
  if (req.consumer_index < 0)
    return Status{ErrorCode::invalid_argument,
                  label_ + " belongs to a coordinated job (num_consumers " +
                    std::to_string(rounds_.num_consumers()) +
                    "): requests must name their consumer_index and round"};
  // A consumer the job dropped (see left_): refused before its request can displace a new
  // reader of its index.
  if (left_.count(req.consumer) > 0)
    return Status{ErrorCode::failed_precondition,
                  label_ + ": coordinated read: consumer " + std::to_string(req.consumer) +
                    " (consumer_index " + std::to_string(req.consumer_index) +
                    ") was dropped from the job (no heartbeat within its client timeout); "
                    "its rounds went to the others: a reader of that index starts again"};
  return Status::OK();
}

void RoundRobinTaskServer::note_reader(const msg::get_elements& req) {
  if (req.round_timeout_ns > 0)
    round_timeout_ns_ = req.round_timeout_ns;
  readers_[req.consumer_index] = req.consumer;
}

Status RoundRobinTaskServer::confirm(const msg::get_elements& req) {
  if (Status valid = rounds_.check_index(req.consumer_index); !valid.ok())
    return valid.with_context(label_);
  rounds_.confirm(req.consumer_index, req.round_first);
  return Status::OK();
}

Expected<int64_t> RoundRobinTaskServer::where(const msg::get_elements& req) const {
  if (!error_.ok())
    return error_;
  if (Status valid = rounds_.check_index(req.consumer_index); !valid.ok())
    return valid.with_context(label_);
  return rounds_.next_for(req.consumer_index);
}

Status RoundRobinTaskServer::ask(const msg::get_elements& req, int64_t now_ns) {
  if (!error_.ok()) // (answered with the error by the caller's next step)
    return Status::OK();
  if (req.round_resume) {
    Status resumed = rounds_.resume(req.consumer_index, req.round_first, now_ns);
    if (!resumed.ok())
      return resumed.with_context(label_);
  }
  Status asked = rounds_.ask(req.consumer_index, req.round_first, req.round_count, now_ns);
  if (!asked.ok())
    return asked.with_context(label_);
  return Status::OK();
}

int64_t RoundRobinTaskServer::completable(std::size_t buffered) const {
  if (!error_.ok())
    return 0;
  const auto n = static_cast<std::size_t>(rounds_.num_consumers());
  // Every round that can complete from the buffer, at once: one take, one vector.
  return std::min<int64_t>(rounds_.completable(), static_cast<int64_t>(buffered / n));
}

void RoundRobinTaskServer::complete(std::vector<Element> elements,
                                    const std::vector<std::size_t>& sizes, int64_t now_ns) {
  rounds_.complete_many(std::move(elements), sizes, now_ns);
}

std::optional<msg::element_batch> RoundRobinTaskServer::take_reply(const msg::get_elements& req) {
  if (!rounds_.has_ready(req.consumer_index))
    return std::nullopt;
  auto elements = rounds_.take(req.consumer_index, req.round_count, req.max_bytes);
  msg::element_batch b;
  b.num_elements = static_cast<uint32_t>(elements.size());
  b.payload = encode_round_elements(elements, compression_);
  b.num_chunks = 1;
  b.round_committed = rounds_.committed();
  return b;
}

bool RoundRobinTaskServer::fail_if_short(bool failed, bool ended, std::size_t buffered,
                                         const Status& pipeline_error) {
  const auto n = static_cast<std::size_t>(rounds_.num_consumers());
  if (!(failed || ended) || buffered >= n)
    return false;
  error_ = failed ? pipeline_error
                  : Status{ErrorCode::out_of_range,
                           label_ + ": the dataset ended, but coordinated reads need "
                                    "an infinite dataset (rounds would go out of step)"};
  return true;
}

bool RoundRobinTaskServer::fail_if_stalled(int64_t now_ns) {
  if (!error_.ok() || round_timeout_ns_ <= 0)
    return false;
  auto why = rounds_.stalled(now_ns, round_timeout_ns_);
  if (!why)
    return false;
  error_ = Status{ErrorCode::failed_precondition, label_ + ": " + *why};
  return true;
}

bool RoundRobinTaskServer::consumer_left(msg::consumer_id_t consumer, bool finished) {
  if (!finished)
    left_.insert(consumer);
  for (auto it = readers_.begin(); it != readers_.end(); ++it)
    if (it->second == consumer) { // (not a new process of the index that rejoined)
      rounds_.release(it->first); // others' rounds no longer wait for its confirms
      readers_.erase(it);
      return true;
    }
  return false;
}

} // namespace conveyor::actors
