// The dispatcher's worker estimate (dispatcher/worker_estimate.hpp).
#include <doctest/doctest.h>

#include "dispatcher/worker_estimate.hpp"

using namespace conveyor::actors;

TEST_CASE("worker estimate: consumption over per-worker production, from the wait share") {
  // 2 workers, readers waiting on them half of the time: they consume twice what 2 make.
  CHECK(workers_needed(2, 1, 0.5, 0.0) == 4);
  // A tolerated wait share lowers the need: 3 workers at 40% wait, 5% tolerated: 3*0.95/0.6.
  CHECK(workers_needed(3, 4, 0.4, 0.05) == 5);
  // Workers that keep up: the consumers cannot see how idle they are; the count stays.
  CHECK(workers_needed(6, 2, 0.03, 0.05) == 6);
  CHECK(workers_needed(6, 2, 0.0, 0.0) == 6);
  // No readers: nothing needed; readers and no worker: one, before anything can be measured.
  CHECK(workers_needed(3, 0, 0.9, 0.05) == 0);
  CHECK(workers_needed(0, 1, 0.0, 0.05) == 1);
  // Readers that only wait: capped (x20 per observation), not a division by ~0.
  CHECK(workers_needed(1, 1, 1.0, 0.05) == 19);
  // Just above the tolerance: the one more worker that brings it under.
  CHECK(workers_needed(4, 1, 0.06, 0.05) == 5);
}

TEST_CASE("worker estimate: windows over the observations, per job and in total") {
  WorkerEstimator est{0.0};
  CHECK(est.total() == -1);
  // 50% waiting so far (30% for the worker, 20% in transfer: both count)
  JobCounters a{1, false, 1, 2, 1000, 3'000'000'000, 2'000'000'000, 10'000'000'000};
  JobCounters b{2, false, 2, 2, 400, 0, 0, 20'000'000'000}; // never waiting
  est.observe(100.0, {a, b});
  REQUIRE(est.job(1) != nullptr);
  CHECK(est.job(1)->wait_share == doctest::Approx(0.5));
  CHECK(est.job(1)->desired == 4);
  CHECK(est.job(1)->elements_per_s == doctest::Approx(100.0)); // 1000 over its reader's 10 s
  CHECK(est.job(2)->desired == 2);
  CHECK(est.total() == 4); // the largest job's need: a worker serves every job
  CHECK(est.max_wait_share() == doctest::Approx(0.5));
  CHECK(est.has_readers());

  // The next window only: job 1 stopped waiting (more workers came), job 2 waits 75%.
  a.tasks = 4;
  a.elements += 2000;
  a.elapsed_ns += 10'000'000'000;
  b.wait_worker_ns += 15'000'000'000;
  b.elapsed_ns += 20'000'000'000; // 2 readers x 10 s
  b.elements += 100;
  est.observe(110.0, {a, b});
  CHECK(est.job(1)->wait_share == doctest::Approx(0.0));
  CHECK(est.job(1)->desired == 4);
  CHECK(est.job(1)->elements_per_s == doctest::Approx(200.0));
  CHECK(est.job(2)->wait_share == doctest::Approx(0.75));
  CHECK(est.job(2)->desired == 8);
  CHECK(est.total() == 8);

  // Finished jobs and jobs without readers need nothing; a job gone is forgotten.
  a.finished = true;
  b.consumers = 0;
  est.observe(120.0, {a, b});
  CHECK(est.job(1) == nullptr);
  CHECK(est.job(2) == nullptr);
  CHECK(est.total() == 0);
  CHECK_FALSE(est.has_readers());
}

TEST_CASE("worker estimate: a job's counters that went back (a restarted job) start a new window") {
  WorkerEstimator est{0.0};
  est.observe(0.0, {JobCounters{7, false, 1, 1, 100, 9'000'000'000, 0, 10'000'000'000}});
  CHECK(est.job(7)->desired == 10);
  // Counters smaller than last time: measured over their own life, not as a negative window.
  est.observe(5.0, {JobCounters{7, false, 1, 1, 10, 0, 0, 1'000'000'000}});
  CHECK(est.job(7)->wait_share == doctest::Approx(0.0));
  CHECK(est.job(7)->desired == 1);
}

TEST_CASE(
  "worker estimate: a capped tenant's job needs at most its cap, and at it drives nothing") {
  WorkerEstimator est{0.0};
  // Capped at 2, on 1 worker, waiting 90%: it could use 2, not the 10 the formula gives.
  JobCounters capped{7, false, 1, 1, 100, 9'000'000'000, 0, 10'000'000'000, 2};
  est.observe(0.0, {capped});
  CHECK(est.job(7)->desired == 2);
  CHECK(est.total() == 2);
  CHECK(est.max_wait_share() == doctest::Approx(0.9));
  // At its cap: its wait is no signal for the autoscaler (another worker would not serve it).
  WorkerEstimator at_cap{0.0};
  capped.tasks = 2;
  JobCounters other{8, false, 1, 3, 100, 1'000'000'000, 0, 10'000'000'000};
  at_cap.observe(0.0, {capped, other});
  CHECK(at_cap.job(7)->desired == 2);
  CHECK(at_cap.job(7)->wait_share == doctest::Approx(0.9));
  CHECK(at_cap.max_wait_share() == doctest::Approx(0.1));
  CHECK(at_cap.total() == 4); // the uncapped job: 3 x 1 / 0.9, rounded up
}
