// The invariants a simulated run must hold, as pure checks over what the harness recorded
// (no actors): each failure is one readable sentence naming the consumer, worker or element.
//
//   OFF      without faults: every worker's stream is the whole dataset (in dataset order
//            when the pipeline is deterministic); with faults: every element is one of the
//            dataset's (a worker that registers again restarts the job under its old address).
//   DYNAMIC  always: no element delivered more often than the dataset holds it; without
//            faults: none missing.
//   always   every stream ended before the time limit; without faults, with OK; consumer
//            memory (elements delivered but not yet taken) within the credits; no job, task or
//            consumer actor left once the job ended; nothing the network could not carry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/element.hpp"
#include "pipeline/sharding.hpp"
#include "pipeline/status.hpp"

namespace conveyor::sim {

struct ObservedStream {
  std::string consumer;             // "consumer-0"
  std::vector<Element> elements;
  std::vector<std::string> sources; // worker address per element
  Status status;
  bool ended = false;
  bool crashed = false; // its node crashed: the stream ends there
  int64_t max_unacked = 0;
};

struct Observation {
  ShardingPolicy policy = ShardingPolicy::off;
  int workers = 0;
  std::vector<Element> reference; // the dataset, collected locally
  bool reference_ordered = true;  // the pipeline gives the same order every time
  bool faults = false;            // any fault fired
  int64_t credits = 0;            // max_outstanding_requests
  std::vector<ObservedStream> streams;
  std::vector<std::string> leaks;      // live protocol actors after the job ended
  std::vector<std::string> violations; // the simulator's own findings (serialization...)
  bool timed_out = false;
  std::string time_limit;              // for the liveness message
};

std::vector<std::string> check_invariants(const Observation& o);

} // namespace conveyor::sim
