// "Why is my trainer waiting": a consumer's waiting time, attributed to a cause. CAF-free; the
// consumer actor calls advance() at every event (a reply, an ack, a poll) with the state it is
// in *from now on*, and the time since the previous call is charged to the previous state:
//
//   not starving   the reader has elements it has not taken yet (nothing is charged)
//   worker         starving, requests are in flight, and the last reply was empty: the tasks
//                  held the request with nothing ready (pipeline compute, or the worker's split
//                  wait, which the worker's metrics show as conveyor_task_split_wait_seconds)
//   network        starving, requests are in flight, replies carried data and credits are free:
//                  transfer time
//   credit         starving while every credit is in use (nothing more can be asked for:
//                  `max_outstanding_requests` is too small to cover the round trip)
//   (not charged)  starving with no request in flight and credits free: joining the job,
//                  connecting to workers, or no task listed yet
//
// "Starving" is the consumer's view: every element it delivered was acknowledged by the reader
// (acks are sent when the reader's local queue runs empty), so the reader is blocked in next().
#pragma once

#include <chrono>
#include <cstdint>

#include "messages/status.hpp"

namespace conveyor::actors {

class WaitStats {
public:
  // The consumer passes its actor clock's time (steady; virtual in the simulator).
  using Clock = std::chrono::steady_clock;
  enum class State : unsigned char { not_starving, worker, network, credit };

  void start(Clock::time_point now) {
    started_ = last_ = now;
    running_ = true;
  }
  // Charges the time since the previous call to the previous state, then switches to `next`.
  void advance(Clock::time_point now, State next) {
    if (!running_)
      start(now);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    switch (state_) {
      case State::worker: worker_ns_ += ns; break;
      case State::network: network_ns_ += ns; break;
      case State::credit: credit_ns_ += ns; break;
      default: break;
    }
    last_ = now;
    state_ = next;
  }
  // The state a consumer is in, from what it knows.
  static State classify(int64_t unacked_elements, std::size_t requests_in_flight,
                        bool last_reply_empty, bool credits_exhausted) {
    if (unacked_elements > 0)
      return State::not_starving;
    if (requests_in_flight == 0)
      return credits_exhausted ? State::credit : State::not_starving;
    if (last_reply_empty)
      return State::worker;
    return credits_exhausted ? State::credit : State::network;
  }

  void fill(msg::consumer_progress& p, Clock::time_point now) const {
    p.wait_worker_ns = worker_ns_;
    p.wait_network_ns = network_ns_;
    p.wait_credit_ns = credit_ns_;
    p.elapsed_ns =
      running_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_).count() : 0;
  }

private:
  bool running_ = false;
  State state_ = State::not_starving;
  Clock::time_point started_{};
  Clock::time_point last_{};
  int64_t worker_ns_ = 0;
  int64_t network_ns_ = 0;
  int64_t credit_ns_ = 0;
};

} // namespace conveyor::actors
