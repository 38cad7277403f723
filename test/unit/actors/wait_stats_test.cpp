// The consumer's waiting-time attribution (consumer/wait_stats.hpp).
#include <doctest/doctest.h>

#include "consumer/wait_stats.hpp"

using namespace conveyor::actors;
using S = WaitStats::State;

TEST_CASE("wait stats: classification of the consumer's state") {
  CHECK(WaitStats::classify(5, 1, true, true) == S::not_starving);   // the reader has elements
  CHECK(WaitStats::classify(0, 0, false, false) == S::not_starving); // setup: not charged
  CHECK(WaitStats::classify(0, 0, false, true) == S::credit);
  CHECK(WaitStats::classify(0, 2, true, false) == S::worker); // tasks held the request
  CHECK(WaitStats::classify(0, 2, false, false) == S::network);
  CHECK(WaitStats::classify(0, 2, false, true) == S::credit);
}

TEST_CASE("wait stats: time is charged to the state it was spent in") {
  WaitStats w;
  const auto t0 = WaitStats::Clock::time_point{} + std::chrono::seconds(100);
  w.start(t0);
  w.advance(t0 + std::chrono::milliseconds(10), S::worker);       // 10 ms not starving
  w.advance(t0 + std::chrono::milliseconds(40), S::network);      // 30 ms worker
  w.advance(t0 + std::chrono::milliseconds(45), S::credit);       // 5 ms network
  w.advance(t0 + std::chrono::milliseconds(65), S::not_starving); // 20 ms credit
  w.advance(t0 + std::chrono::milliseconds(100), S::not_starving);
  conveyor::msg::consumer_progress p;
  w.fill(p, t0 + std::chrono::milliseconds(100));
  CHECK(p.wait_worker_ns == 30'000'000);
  CHECK(p.wait_network_ns == 5'000'000);
  CHECK(p.wait_credit_ns == 20'000'000);
  CHECK(p.elapsed_ns == 100'000'000);
}
