// Where a consumer actor delivers elements: the blocking ElementStream's queue (QueueSink) or a
// user's sink actor (conveyor/async.hpp). The consumer calls push() for every batch and finish()
// exactly once; the sink's reader returns credits to the consumer with (ack_atom, n). Inline
// batches reach the sink still encoded (consumer/ready_elements.hpp): the blocking reader decodes
// them on its own thread, other sinks when they take them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "consumer/ready_elements.hpp"
#include "messages/consumer_api.hpp"
#include "messages/dispatcher_consumer.hpp"
#include "messages/protocol.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class ElementSink {
public:
  virtual ~ElementSink() = default;
  // The consumer actor introduces itself before it pushes anything.
  virtual void attach(const msg::stream_actor&) {}
  // The consumer joined job `job` (before any element of it is pushed); job_details just before,
  // with what the dispatcher said of the job.
  virtual void job_details(const msg::job_info&) {}
  virtual void joined(msg::job_id_t) {}
  // An error (a batch that does not decode) ends the stream with it.
  virtual Status push(ReadyElements&& elements, const msg::stream_stats& stats) = 0;
  // The stream's counters as it ends, just before finish(): they may have moved since the last
  // push (an OFF task lost after its last batch arrived is counted in lost_tasks).
  virtual void final_stats(const msg::stream_stats&) {}
  // OK = end of sequence; otherwise the error that ended the stream.
  virtual void finish(Status status) = 0;
  // Deterministic reads: the job saw these splits finished (after every element of theirs was
  // pushed). Only the blocking reader reorders; other sinks need not know.
  virtual void splits_finished(const std::vector<std::pair<int64_t, int64_t>>&) {}
  // A task joined the read: the read-cursor slot it serves and the number of its first element
  // (task_info.off_slot/off_skip; an OFF cursor counts a slot from which nothing was taken yet).
  virtual void task_slot(int64_t /*slot*/, int64_t /*base*/) {}
  // An OFF task's every element came in: its slot ends at element number `end` (those before
  // it consumed, the slot is ended in the read cursor even if the read goes on).
  virtual void task_slot_end(int64_t /*slot*/, int64_t /*end*/) {}
  // Deterministic reads: the reader's reorder holds more bytes than its budget
  // (DistributeOptions::deterministic_hold_bytes), so the consumer asks only the task of the
  // job's lowest unfinished split (task_list::lowest_split_tasks) for elements.
  virtual bool hold_full() const { return false; }
  // ... and the split (epoch, index) its order waits for: a task the job named that has moved
  // past it is not asked (ConsumerCore::focus_on). None: not known.
  virtual std::optional<std::pair<int64_t, int64_t>> hold_waits_for() const { return std::nullopt; }
};

// A thread-safe queue between the consumer actor and a blocking reader.
class QueueSink : public ElementSink {
public:
  void job_details(const msg::job_info& info) override;
  void joined(msg::job_id_t job) override;
  // What job_details() said (the stream's read cursor needs the fingerprint and split size).
  msg::job_info job_info() const;
  Status push(ReadyElements&& elements, const msg::stream_stats& stats) override; // never decodes
  void final_stats(const msg::stream_stats& stats) override;
  void finish(Status status) override;
  void splits_finished(const std::vector<std::pair<int64_t, int64_t>>& splits) override;
  void task_slot(int64_t slot, int64_t base) override;
  // Every task_slot() so far: slot -> base.
  std::map<int64_t, int64_t> task_slots() const;
  void task_slot_end(int64_t slot, int64_t end) override;
  // Every task_slot_end() so far: slot -> end.
  std::map<int64_t, int64_t> task_slot_ends() const;
  bool hold_full() const override { return hold_full_.load(std::memory_order_acquire); }
  // The reader's side (any thread); the reader wakes the consumer when it turns false.
  void set_hold_full(bool full) { hold_full_.store(full, std::memory_order_release); }
  std::optional<std::pair<int64_t, int64_t>> hold_waits_for() const override {
    std::lock_guard<std::mutex> lock(waits_mu_);
    return waits_for_;
  }
  void set_hold_waits_for(std::pair<int64_t, int64_t> split) {
    std::lock_guard<std::mutex> lock(waits_mu_);
    waits_for_ = split;
  }

  // Waits up to `timeout` until the consumer joined its job or the stream ended. OK: joined
  // (`job` set) or ended without error before joining (a finished named job: nothing to read);
  // otherwise the error that ended the stream, or deadline_exceeded.
  Status wait_joined(std::chrono::milliseconds timeout, msg::job_id_t& job);

  // The reader cancelled the stream (any thread): a waiting take_all() returns `cancelled` at
  // once, and so does every later one, whatever is queued or arrives.
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  enum class Wait { elements, end, error, timeout };
  // Moves every queued element to `out` (waiting up to `timeout` for one), for the reader to
  // decode. `error` fills `status`.
  Wait take_all(ReadyElements& out, std::chrono::milliseconds timeout, Status& status);
  msg::stream_stats stats() const;

private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ReadyElements queue_;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false}; // (set under mu_; read without it on the reader's fast path)
  std::atomic<bool> hold_full_{false};
  mutable std::mutex waits_mu_; // (hold_waits_for: read by the consumer, set by the reader)
  std::optional<std::pair<int64_t, int64_t>> waits_for_;
  std::optional<msg::job_id_t> job_;
  msg::job_info info_;
  Status final_;
  msg::stream_stats stats_;
  std::map<int64_t, int64_t> task_slots_;
  std::map<int64_t, int64_t> task_slot_ends_;
};

} // namespace conveyor::actors
