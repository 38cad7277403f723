// Deterministic reads without actors: the job's window and finished-split log (JobCore) and the
// consumer's reorder (OrderedReads) fed as the stream feeds it — elements of splits run by
// several workers in any interleaving, the job's finishes behind each split's elements.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "consumer/ordered_reads.hpp"
#include "dispatcher/job_core.hpp"
#include "dynamic_job.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/tensor/tensor.hpp"

using conveyor::Dataset;
using conveyor::Element;
using conveyor::Expected;
using conveyor::ReadCursor;
using conveyor::actors::DeliveredOrigin;
using conveyor::actors::JobCore;
using conveyor::actors::OrderedReads;
using conveyor::actors::SplitKey;
using conveyor::actors::SplitRun;

namespace {

using conveyor::test::dynamic_job;

std::vector<int64_t> indices(const std::vector<conveyor::Split>& splits) {
  std::vector<int64_t> out;
  for (const auto& s : splits)
    out.push_back(s.index);
  return out;
}

Element value(int64_t v) { return Element{conveyor::Tensor::scalar(v)}; }

int64_t value_of(const Element& e) { return e[0].as_int64(); }

// One decoded element as a run (what a bulk frame makes).
SplitRun one(Element e, DeliveredOrigin origin) {
  SplitRun run;
  run.first = origin;
  run.count = 1;
  run.bytes = static_cast<int64_t>(e.byte_size());
  run.decoded = std::move(e);
  return run;
}

// A run's values, decoded.
std::vector<int64_t> values_of(SplitRun& run) {
  std::vector<int64_t> out;
  while (!run.done()) {
    Element e;
    DeliveredOrigin origin;
    REQUIRE(run.next(e, origin).ok());
    out.push_back(value_of(e));
  }
  return out;
}

Expected<bool> arrive(OrderedReads& order, Element e, DeliveredOrigin origin) {
  SplitRun run = one(std::move(e), origin);
  return order.arrived(run);
}

} // namespace

TEST_CASE("job core, deterministic: no split more than the window past the lowest unfinished") {
  auto job = dynamic_job(200, 10); // 20 splits
  job.set_deterministic(4);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  job.task_assigned(1);
  job.task_assigned(2);
  auto a = job.get_splits(1, 0, 100);
  REQUIRE(a.ok());
  CHECK(indices(a->splits) == std::vector<int64_t>{0, 1, 2, 3, 4});
  auto held = job.get_splits(2, 0, 100);
  REQUIRE(held.ok());
  CHECK(held->hold);                             // split 5 is 5 past split 0
  job.splits_update(1, {SplitKey{0, 0, 1}}, {}); // 0 is still the lowest unfinished
  CHECK(job.get_splits(2, 0, 100)->hold);
  job.splits_update(1, {SplitKey{0, 0, 0}}, {});
  CHECK(indices(job.get_splits(2, 0, 100)->splits) == std::vector<int64_t>{5, 6});
  // The finished log, in the order they finished; the consumer's known entries are forgotten.
  CHECK(job.finished_since(0) == std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 0}});
  CHECK(job.finished_next() == 2);
  job.forget_finished(1);
  CHECK(job.finished_since(0) == std::vector<std::pair<int64_t, int64_t>>{{0, 0}});
  // A lost task's splits come back whatever the window: they are behind it.
  job.task_lost(1, "gone");
  CHECK(indices(job.get_splits(2, 0, 100)->splits) == std::vector<int64_t>{2, 3, 4});
}

TEST_CASE("job core, deterministic: the task of the lowest unfinished split, and a finished log "
          "restored after a dispatcher restart") {
  auto job = dynamic_job(200, 10);
  job.set_deterministic(4);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  job.task_assigned(1);
  job.task_assigned(2);
  CHECK(job.lowest_split_owners().empty()); // nothing handed out yet
  REQUIRE(job.get_splits(1, 0, 1).ok());    // split 0
  REQUIRE(job.get_splits(2, 0, 2).ok());    // splits 1 and 2
  CHECK(job.lowest_split_owners() == std::vector<conveyor::msg::task_id_t>{1});
  job.splits_update(1, {SplitKey{0, 0, 0}}, {});
  CHECK(job.lowest_split_owners() == std::vector<conveyor::msg::task_id_t>{2});
  // Task 2 is lost: its splits wait to be handed out again, by a task not known yet.
  job.task_lost(2, "gone");
  CHECK(job.lowest_split_owners().empty());

  // A restarted dispatcher's job serves its journaled log from entry 0 again.
  auto restored = dynamic_job(200, 10);
  restored.set_deterministic(4);
  restored.restore_finished({SplitKey{0, 0, 3}, SplitKey{0, 0, 2}});
  CHECK(restored.finished_since(0) == std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {0, 2}});
  CHECK(restored.finished_next() == 2);
}

TEST_CASE("ordered reads: what is held is counted in bytes too, and its peak kept") {
  OrderedReads order(16, nullptr);
  auto big = [](int64_t n) {
    return Element{
      conveyor::Tensor::from_values<uint8_t>(conveyor::Shape{n}, std::vector<uint8_t>(n, 7))
        .value()};
  };
  // Split 1 arrives first (held), then split 0 (handed out at once).
  for (int64_t seq = 0; seq < 3; ++seq) {
    REQUIRE_FALSE(*arrive(order, big(1000), DeliveredOrigin{0, 1, seq, seq == 2}));
  }
  CHECK(order.held() == 3);
  CHECK(order.held_bytes() >= 3000);
  CHECK(order.held_bytes() < 3300);
  const int64_t peak = order.held_bytes();
  CHECK(*arrive(order, big(10), DeliveredOrigin{0, 0, 0, true}));
  for (int i = 0; i < 3; ++i)
    REQUIRE(order.pop().has_value());
  CHECK(order.held() == 0);
  CHECK(order.held_bytes() == 0);
  CHECK(order.peak_held() == 3);
  CHECK(order.peak_held_bytes() == peak);
}

TEST_CASE("job core: without deterministic no window and no finished log") {
  auto job = dynamic_job(200, 10);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  CHECK(job.get_splits(1, 0, 100)->splits.size() == 20);
  job.splits_update(1, {SplitKey{0, 0, 0}}, {});
  CHECK(job.finished_since(0).empty());
  CHECK(job.finished_next() == 0);
}

namespace {

// A deterministic read of `epochs` epochs of splits of these sizes, run by `workers` workers that
// take splits dynamically and send their elements interleaved at random; a split's worker
// sometimes marks its last element, and the job's finish of each split comes (in finishing
// order, at a random later point) after its elements. Values: epoch * 10000 + split * 100 + seq.
std::vector<int64_t> run_ordered(const std::vector<int64_t>& sizes, int epochs, int workers,
                                 std::mt19937& rng,
                                 std::shared_ptr<const ReadCursor> resumed = {}) {
  struct Event {
    bool finish = false;
    std::pair<int64_t, int64_t> split; // (epoch, index)
    int64_t seq = 0;
    bool split_end = false;
  };
  std::vector<Event> events;
  for (int e = 0; e < epochs; ++e) {
    // Each worker's queue of elements (its splits in the order it took them).
    std::vector<std::deque<Event>> queues(static_cast<std::size_t>(workers));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto& q = queues[rng() % queues.size()];
      const bool mark = rng() % 2 == 0;
      for (int64_t k = 0; k < sizes[i]; ++k)
        q.push_back(Event{false, {e, static_cast<int64_t>(i)}, k, mark && k + 1 == sizes[i]});
      q.push_back(Event{true, {e, static_cast<int64_t>(i)}, 0, false}); // its finish, after it
    }
    // Interleaved; a finish goes to the log, which the reader gets later, in order.
    std::deque<Event> log;
    for (;;) {
      std::vector<std::size_t> live;
      for (std::size_t w = 0; w < queues.size(); ++w)
        if (!queues[w].empty())
          live.push_back(w);
      if (live.empty())
        break;
      auto& q = queues[live[rng() % live.size()]];
      Event ev = q.front();
      q.pop_front();
      if (ev.finish)
        log.push_back(ev);
      else
        events.push_back(ev);
      if (!log.empty() && rng() % 3 == 0) {
        events.push_back(log.front());
        log.pop_front();
      }
    }
    // The epoch ends once every split finished: the next epoch's elements come after its log.
    events.insert(events.end(), log.begin(), log.end());
  }
  OrderedReads order(static_cast<int64_t>(sizes.size()), std::move(resumed));
  std::vector<int64_t> got;
  auto pop_all = [&] {
    for (int i = 0; i < 100000; ++i) {
      auto e = order.pop();
      if (!e)
        return;
      for (int64_t v : values_of(*e))
        got.push_back(v);
    }
    FAIL("pop() never ran dry");
  };
  for (const auto& ev : events) {
    if (ev.finish) {
      order.finished({ev.split});
    } else {
      const int64_t v = ev.split.first * 10000 + ev.split.second * 100 + ev.seq;
      auto next = arrive(order, value(v),
                         DeliveredOrigin{ev.split.first, ev.split.second, ev.seq, ev.split_end});
      REQUIRE(next.ok());
      if (*next)
        got.push_back(v);
    }
    pop_all();
  }
  for (auto& run : order.drain())
    for (int64_t v : values_of(run))
      got.push_back(v);
  return got;
}

} // namespace

TEST_CASE("ordered reads: 1, 2 and 4 workers at random, empty splits, 2 epochs - one order") {
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  std::vector<int64_t> sizes(30);
  for (auto& s : sizes)
    s = std::uniform_int_distribution<int64_t>{0, 4}(rng); // 0: a split filter emptied
  sizes.back() = 0;                                        // the epoch's last split too
  std::vector<int64_t> expected;
  for (int64_t e = 0; e < 2; ++e)
    for (std::size_t i = 0; i < sizes.size(); ++i)
      for (int64_t k = 0; k < sizes[i]; ++k)
        expected.push_back(e * 10000 + static_cast<int64_t>(i) * 100 + k);
  for (int workers : {1, 2, 4}) {
    INFO(workers << " worker(s)");
    CHECK(run_ordered(sizes, 2, workers, rng) == expected);
  }
}

TEST_CASE("ordered reads: a resumed read continues after its cursor's consumed prefix") {
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  const std::vector<int64_t> sizes{3, 2, 0, 4, 1};
  // The first attempt consumed splits 0 and 1 and 2 elements of split 3 (in order).
  auto cursor = std::make_shared<ReadCursor>("fp", 10);
  for (int64_t k = 0; k < 3; ++k)
    cursor->consume(0, 0, k, k == 2);
  for (int64_t k = 0; k < 2; ++k)
    cursor->consume(0, 1, k, k == 1);
  cursor->consume(0, 3, 0, false);
  cursor->consume(0, 3, 1, false);
  // Its resumed job hands out only splits 2, 3 and 4, and the workers skip 3's prefix: here the
  // whole epoch arrives and the elements the cursor covers stand for the repeats the consumer
  // core drops (it never hands covered elements on).
  auto got = run_ordered(sizes, 1, 2, rng, cursor);
  got.erase(std::remove_if(got.begin(), got.end(),
                           [&](int64_t v) { return cursor->covers(0, v / 100, v % 100); }),
            got.end());
  CHECK(got == std::vector<int64_t>{302, 303, 400});
}

TEST_CASE("ordered reads: an element without its split is refused") {
  OrderedReads order(4, nullptr);
  auto r = arrive(order, value(1), DeliveredOrigin{});
  CHECK(r.status().code() == conveyor::ErrorCode::failed_precondition);
}

TEST_CASE("ordered reads: a worker's end mark moves the order past a split without the job's log") {
  OrderedReads order(16, nullptr);
  // Split 0's elements come without a mark on the last one (it went out before the worker's
  // pipeline moved past the split): handed out, then split 1's are held...
  for (int64_t seq = 0; seq < 2; ++seq)
    CHECK(*arrive(order, value(seq), DeliveredOrigin{0, 0, seq, false}));
  for (int64_t seq = 0; seq < 2; ++seq)
    CHECK_FALSE(*arrive(order, value(10 + seq), DeliveredOrigin{0, 1, seq, false}));
  CHECK_FALSE(order.pop().has_value());
  // ...until the end mark says split 0 had 2 elements: no finished log needed.
  order.split_ended({0, 0}, 2);
  auto a = order.pop();
  REQUIRE(a.has_value());
  CHECK(values_of(*a) == std::vector<int64_t>{10});
  REQUIRE(order.pop().has_value());
  CHECK(order.held() == 0);
  order.split_ended({0, 1}, 2);
  // A mark ahead of its split's last element: the order waits for that element.
  order.split_ended({0, 2}, 2);
  CHECK_FALSE(*arrive(order, value(21), DeliveredOrigin{0, 2, 1, false}));
  CHECK_FALSE(*arrive(order, value(30), DeliveredOrigin{0, 3, 0, false}));
  CHECK_FALSE(order.pop().has_value());
  CHECK(*arrive(order, value(20), DeliveredOrigin{0, 2, 0, false}));
  auto early = order.pop();
  REQUIRE(early.has_value());
  CHECK(values_of(*early) == std::vector<int64_t>{21});
  auto later = order.pop(); // split 2 is over: on to split 3
  REQUIRE(later.has_value());
  CHECK(values_of(*later) == std::vector<int64_t>{30});
  CHECK(order.held() == 0);
}
