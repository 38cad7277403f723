// JobCore: the job's one bookkeeping (tasks, consumers, DYNAMIC splits), without actors.
#include <doctest/doctest.h>

#include "dispatcher/job_core.hpp"
#include "dynamic_job.hpp"
#include "pipeline/graph/dataset.hpp"

using conveyor::Dataset;
using conveyor::Split;
using conveyor::actors::JobCore;
using conveyor::actors::SplitKey;

using conveyor::test::dynamic_job;

TEST_CASE("job core: a lost task's unfinished splits are handed out again, finished ones not") {
  auto job = dynamic_job(40, 10); // 4 splits
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  job.task_assigned(1);
  job.task_assigned(2);
  auto a = job.get_splits(1, 0, 2);
  REQUIRE(a.ok());
  REQUIRE(a->splits.size() == 2);
  auto b = job.get_splits(2, 0, 2);
  REQUIRE(b->splits.size() == 2);
  job.splits_update(1, {SplitKey{0, 0, 0}}, {}); // task 1 finished split 0, not split 1
  job.task_lost(1, "gone");
  auto again = job.get_splits(2, 0, 4);
  REQUIRE(again->splits.size() == 1);
  CHECK(again->splits[0].index == 1);
  CHECK(job.splits_reissued() == 1);
  // Per-split: the epoch ends only once every split finished.
  auto held = job.get_splits(2, 0, 4);
  CHECK(held->hold);
  job.splits_update(2, {SplitKey{0, 0, 1}, SplitKey{0, 0, 2}, SplitKey{0, 0, 3}}, {});
  auto end = job.get_splits(2, 0, 4);
  CHECK(end->end_of_splits);
  CHECK_FALSE(end->empty_epoch);
}

TEST_CASE("job core: returned splits come back first - an empty epoch says so") {
  auto job = dynamic_job(10, 10); // 1 split
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 4);
  REQUIRE(a->splits.size() == 1);
  job.splits_update(1, {}, {a->splits[0]}); // a draining task hands it back
  auto b = job.get_splits(2, 0, 4);
  REQUIRE(b->splits.size() == 1);
  CHECK(b->splits[0] == a->splits[0]);
  job.splits_update(2, {SplitKey{0, 0, 0}}, {});
  auto end = job.get_splits(2, 0, 4);
  CHECK(end->end_of_splits);
  // Past the last epoch: every epoch is empty for the whole job.
  auto past = job.get_splits(2, 1, 4);
  CHECK(past->end_of_splits);
  CHECK(past->empty_epoch);
}

TEST_CASE("job core: ends with its consumers, never before one joined") {
  JobCore job{nullptr, false};
  CHECK_FALSE(job.consumers_done());
  auto c1 = job.join(0);
  auto c2 = job.join(0);
  CHECK(job.leave(c1, true));
  CHECK_FALSE(job.consumers_done());
  CHECK(job.expire(10, 5) == std::vector<conveyor::msg::consumer_id_t>{c2}); // no heartbeat
  CHECK(job.consumers_done());
  CHECK_FALSE(job.all_finished()); // c2 left without reading to the end
}

TEST_CASE("job core: production ends when every listed task ended - a new task reopens it") {
  JobCore job{nullptr, false};
  job.add_task(1, 1, "a:1");
  CHECK_FALSE(job.production_ended()); // not assigned yet
  job.task_assigned(1);
  job.task_done(1, "");
  CHECK(job.production_ended());
  job.add_task(2, 2, "b:1"); // a worker joined mid-job: it gets a task too
  CHECK_FALSE(job.production_ended());
}

TEST_CASE("job core: a task that ended because its worker drained does not end production") {
  auto job = dynamic_job(40, 10); // 4 splits
  job.add_task(1, 1, "w1");
  job.task_assigned(1);
  auto a = job.get_splits(1, 0, 2);
  REQUIRE(a.ok());
  REQUIRE(a->splits.size() == 2);
  // The drain let both splits finish; the job's other two were never handed out.
  job.splits_update(1, {{0, 0, a->splits[0].index}, {0, 0, a->splits[1].index}}, {});
  job.task_done(1, "", true);
  CHECK_FALSE(job.production_ended());
  // A fresh worker's task takes the rest; its end (the splits ran out) ends production.
  job.add_task(2, 2, "w2");
  job.task_assigned(2);
  auto b = job.get_splits(2, 0, 8);
  REQUIRE(b.ok());
  CHECK(b->splits.size() == 2);
  std::vector<SplitKey> done;
  for (const auto& s : b->splits)
    done.push_back(conveyor::actors::split_key_of(s));
  job.splits_update(2, done, {});
  auto end = job.get_splits(2, 0, 8);
  REQUIRE(end.ok());
  CHECK(end->end_of_splits);
  CHECK_FALSE(job.production_ended());
  job.task_done(2, "");
  CHECK(job.production_ended());
}

TEST_CASE("job core: a lost task's splits wait for a fresh task when the others only drained") {
  auto job = dynamic_job(40, 10, false); // not per-split
  job.add_task(1, 1, "w1");
  job.add_task(2, 2, "w2");
  job.task_assigned(1);
  job.task_assigned(2);
  auto a = job.get_splits(1, 0, 2);
  REQUIRE(a.ok());
  job.task_done(2, "", true); // w2 drained
  job.task_lost(1, "gone");   // w1 crashed: its two splits come back
  CHECK(job.error().empty()); // not stranded: w2's next process takes them
  CHECK_FALSE(job.production_ended());
  job.add_task(3, 2, "w2");
  job.task_assigned(3);
  auto again = job.get_splits(3, 0, 8);
  REQUIRE(again.ok());
  CHECK(again->splits.size() == 4); // the two that came back first, then the rest
}

TEST_CASE(
  "job core: a split lost when every other task ended fails the job loudly (not per-split)") {
  auto job = dynamic_job(20, 10, /*per_split=*/false);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 1);
  auto b = job.get_splits(2, 0, 1);
  auto end = job.get_splits(2, 0, 1);
  CHECK(end->end_of_splits);
  job.task_done(2, "");
  job.task_lost(1, "gone");
  CHECK(job.error().find("cannot be read again") != std::string::npos);
}

TEST_CASE("job core: splits stranded because a task failed fail the job with that task's error "
          "and code, not data_loss") {
  // A memory budget failure used to reach the reader as "data_loss: N split(s) ... cannot be
  // read again", hiding the resource_exhausted that caused it.
  auto job = dynamic_job(20, 10, /*per_split=*/false);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 1);
  auto b = job.get_splits(2, 0, 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  job.task_done(2, "");
  job.task_done(1, "resource_exhausted: shuffle needs 400 bytes beyond the job's memory budget");
  job.task_lost(1, "ended"); // its worker forgets the failed task: its split comes back
  CHECK(job.error_code() == conveyor::ErrorCode::resource_exhausted);
  CHECK(job.error().find("task 1 on worker a:1 failed: resource_exhausted") != std::string::npos);
  CHECK(job.error().find("cannot be read again") == std::string::npos);
}

TEST_CASE("job core: a failed task stranding splits through another task's end names its error") {
  auto job = dynamic_job(20, 10, /*per_split=*/false);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 1);
  auto b = job.get_splits(2, 0, 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  job.task_done(1, "resource_exhausted: batch needs 80000000 bytes");
  job.task_lost(2, "gone"); // b's split comes back; only the failed task is left
  CHECK(job.error_code() == conveyor::ErrorCode::resource_exhausted);
  CHECK(job.error().find("resource_exhausted: batch needs") != std::string::npos);
}

TEST_CASE("is_per_split: source + sequential map/filter/flat_map/repeat only") {
  using conveyor::actors::is_per_split;
  CHECK(is_per_split(Dataset::range(10)));
  CHECK(is_per_split(Dataset::range(10).map("square").filter("is_even").repeat()));
  CHECK_FALSE(is_per_split(Dataset::range(10).batch(2)));
  CHECK_FALSE(is_per_split(Dataset::range(10).shuffle(4, 1)));
  CHECK_FALSE(is_per_split(Dataset::range(10).map("square", 4)));
}

TEST_CASE("job core: a restored job hands out the splits held at the crash first, then goes on") {
  auto job = dynamic_job(40, 10); // 4 splits
  // Before the crash splits 0-2 were handed out; 1 finished; 0 and 2 were held by tasks.
  auto p = conveyor::make_split_provider(Dataset::range(40), [] {
    conveyor::SplitOptions o;
    o.range_split_size = 10;
    return o;
  }());
  REQUIRE(p.ok());
  std::vector<Split> held;
  for (int i = 0; i < 3; ++i) {
    Split s;
    bool end = false;
    REQUIRE((*p)->get_next(s, end).ok());
    if (i != 1)
      held.push_back(s);
  }
  REQUIRE(job.restore_splits(0, 3, conveyor::SplitPosition{0, 3}, held).ok());
  CHECK(job.pending_reissue() == 2);
  job.add_task(7, 1, "a:1");
  job.task_assigned(7);
  CHECK_FALSE(job.production_ended()); // splits wait to be handed out again
  auto a = job.get_splits(7, 0, 8);
  REQUIRE(a.ok());
  REQUIRE(a->splits.size() == 3); // the two held ones, then the provider's next (split 3)
  CHECK(a->splits[0] == held[0]);
  CHECK(a->splits[1] == held[1]);
  CHECK(a->splits[2].index == 3);
  CHECK(a->splits[2].begin == 30);
  job.splits_update(7, {SplitKey{0, 0, 0}, SplitKey{0, 0, 2}, SplitKey{0, 0, 3}}, {});
  auto end = job.get_splits(7, 0, 8);
  CHECK(end->end_of_splits);
  CHECK_FALSE(end->empty_epoch);
}

TEST_CASE("job core: only finished splits the task still owned count as finished for the journal") {
  auto job = dynamic_job(20, 10); // 2 splits
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 2);
  REQUIRE(a->splits.size() == 2);
  job.task_lost(1, "gone");         // both splits go back ...
  auto b = job.get_splits(2, 0, 2); // ... and to task 2
  REQUIRE(b->splits.size() == 2);
  std::vector<SplitKey> accepted;
  job.splits_update(1, {SplitKey{0, 0, 0}}, {}, &accepted); // a late report of the lost task
  CHECK(accepted.empty());
  job.splits_update(2, {SplitKey{0, 0, 0}}, {}, &accepted);
  REQUIRE(accepted.size() == 1);
  CHECK(accepted[0] == SplitKey{0, 0, 0});
}

TEST_CASE("job core: whole-epoch trainers - new on a first consumer, gone with the last") {
  auto job = dynamic_job(40, 10);
  auto a1 = job.join(0), a2 = job.join(0), b = job.join(0);
  CHECK(job.set_trainer(a1, "a"));       // new: the tasks must hear of it
  CHECK_FALSE(job.set_trainer(a2, "a")); // a second reader of trainer "a"
  CHECK(job.set_trainer(b, "b"));
  CHECK(job.trainers() == std::vector<std::string>{"a", "b"});
  CHECK(job.trainer_gone(a1).empty()); // "a" still reads through a2
  CHECK(job.trainer_gone(a2) == "a");
  CHECK(job.trainers() == std::vector<std::string>{"b"});
  CHECK(job.trainer_gone(a2).empty()); // once
}

TEST_CASE("job core: static sharding ends only once every listed worker's shard was produced") {
  JobCore job{nullptr, false};
  job.require_shards({"w0:1", "w1:1", "w2:1"});
  // Workers 0 and 1 registered; the third of the fixed list has not (yet).
  job.add_task(1, 1, "w0:1", 0);
  job.add_task(2, 2, "w1:1", 1);
  job.task_assigned(1);
  job.task_assigned(2);
  job.task_done(1, "");
  job.task_done(2, "");
  CHECK_FALSE(job.production_ended()); // shard 2 would go missing in silence otherwise
  CHECK(job.shards_pending() == std::vector<int64_t>{2});
  CHECK(job.waiting_for().find("shard 2 of 3 (worker w2:1)") != std::string::npos);
  // A drained task did not produce its shard to the end either.
  job.add_task(3, 3, "w2:1", 2);
  job.task_assigned(3);
  CHECK(job.waiting_for().empty()); // its task runs: nothing to report
  job.task_done(3, "", /*drained=*/true);
  CHECK_FALSE(job.production_ended());
  job.add_task(4, 3, "w2:1", 2); // the worker came back
  job.task_assigned(4);
  job.task_done(4, "");
  CHECK(job.production_ended());
  CHECK(job.shards_pending().empty());
}

TEST_CASE("job core: without static sharding no shard is waited for") {
  JobCore job{nullptr, false};
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  job.task_done(1, "");
  CHECK(job.production_ended());
  CHECK(job.waiting_for().empty());
}

TEST_CASE("job core: a task nobody reads takes no split, and ends once its readers used the "
          "dataset up") {
  // Issue 32 (LOCAL DYNAMIC beside remote workers): task 2 is read by no consumer. Its first
  // request is held (the split the job looked at waits for task 1). After task 1 read the only
  // epoch, task 2 (which got nothing in epoch 0) asks for epoch 1: the job must find out that the
  // dataset has no epoch 1 instead of holding it forever (the job then never ended).
  auto job = dynamic_job(30, 10); // 3 splits, one epoch
  job.add_task(1, 1, "local:1");
  job.add_task(2, 2, "remote:1");
  job.task_assigned(1);
  job.task_assigned(2);
  job.require_reader(1);
  job.require_reader(2);
  auto consumer = job.join(0);
  CHECK(job.set_reading(consumer, {1}));
  auto unread = job.get_splits(2, 0, 4);
  REQUIRE(unread.ok());
  CHECK(unread->hold);
  CHECK(unread->splits.empty());
  auto read = job.get_splits(1, 0, 4);
  REQUIRE(read.ok());
  REQUIRE(read->splits.size() == 3);
  CHECK(read->splits[0].index == 0); // the split task 2's request looked at comes first
  job.splits_update(1, {SplitKey{0, 0, 0}, SplitKey{0, 0, 1}, SplitKey{0, 0, 2}}, {});
  auto end1 = job.get_splits(1, 0, 4);
  REQUIRE(end1.ok());
  CHECK(end1->end_of_splits);
  auto end2 = job.get_splits(2, 0, 4);
  REQUIRE(end2.ok());
  CHECK(end2->end_of_splits);
  // Task 2 had no split in epoch 0: it asks for the next epoch, which this dataset does not have.
  auto next = job.get_splits(2, 1, 4);
  REQUIRE(next.ok());
  CHECK_FALSE(next->hold);
  CHECK(next->end_of_splits);
  CHECK(next->empty_epoch);
}

TEST_CASE("job core: with repeat() a task nobody reads keeps waiting - the epoch's splits go to "
          "the read task") {
  conveyor::SplitOptions o;
  o.range_split_size = 10;
  auto p = conveyor::make_split_provider(Dataset::range(20).repeat(), o);
  REQUIRE(p.ok());
  JobCore job{std::move(p).value(), true};
  job.add_task(1, 1, "local:1");
  job.add_task(2, 2, "remote:1");
  job.task_assigned(1);
  job.task_assigned(2);
  job.require_reader(1);
  job.require_reader(2);
  auto consumer = job.join(0);
  job.set_reading(consumer, {1});
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    CAPTURE(epoch);
    auto unread = job.get_splits(2, epoch, 4);
    REQUIRE(unread.ok());
    CHECK(unread->hold);
    auto read = job.get_splits(1, epoch, 4);
    REQUIRE(read.ok());
    REQUIRE(read->splits.size() == 2);
    job.splits_update(1, {SplitKey{0, epoch, 0}, SplitKey{0, epoch, 1}}, {});
    auto end = job.get_splits(1, epoch, 4);
    REQUIRE(end.ok());
    CHECK(end->end_of_splits);
    CHECK_FALSE(end->empty_epoch);
  }
}

// Issue 36: two tasks handed back their surplus (SplitFeed::take_surplus), the later split
// first. The next task to ask got that one and read it before the earlier one, and a
// deterministic reader held the later split whole (1 GB of 1 MiB elements) waiting for it.
TEST_CASE("job core: splits handed back are handed out again in split order, lowest first") {
  auto job = dynamic_job(60, 10); // 6 splits
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  auto a = job.get_splits(1, 0, 2); // splits 0, 1
  auto b = job.get_splits(2, 0, 2); // splits 2, 3
  REQUIRE(a->splits.size() == 2);
  REQUIRE(b->splits.size() == 2);
  job.splits_update(2, {}, {b->splits[1]}); // split 3 back first
  job.splits_update(1, {}, {a->splits[1]}); // then split 1
  auto again = job.get_splits(1, 0, 1);
  REQUIRE(again->splits.size() == 1);
  CHECK(again->splits[0].index == 1);
  auto next = job.get_splits(2, 0, 1);
  REQUIRE(next->splits.size() == 1);
  CHECK(next->splits[0].index == 3);
}
