// JobCore with several splittable sources (zip, concatenate): one provider per source, each with
// its own epochs and re-issue queue, splits keyed by (source, epoch, index).
#include <doctest/doctest.h>

#include <set>

#include "dispatcher/job_core.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/sharding/multi_source.hpp"

using conveyor::Dataset;
using conveyor::Split;
using conveyor::SplitPosition;
using conveyor::actors::JobCore;
using conveyor::actors::split_key_of;
using conveyor::actors::SplitKey;

namespace {

// zip(range(a), range(b)) cut into splits of 10.
JobCore zip_job(int64_t a, int64_t b) {
  conveyor::SplitOptions o;
  o.range_split_size = 10;
  auto providers =
    conveyor::make_split_providers(Dataset::zip({Dataset::range(a), Dataset::range(b)}), o);
  REQUIRE(providers.ok());
  REQUIRE(providers->size() == 2);
  return JobCore{std::move(providers).value(), false};
}

} // namespace

TEST_CASE("job core, several sources: each source hands out its own splits once, stamped with it") {
  auto job = zip_job(30, 20); // source 0: 3 splits, source 1: 2
  CHECK(job.num_sources() == 2);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  std::set<SplitKey> seen;
  for (int64_t source = 0; source < 2; ++source) {
    for (;;) {
      auto a = job.get_splits(1, job.epoch(source), 1, source);
      REQUIRE(a.ok());
      if (a->end_of_splits)
        break;
      REQUIRE(a->splits.size() == 1);
      CHECK(a->splits[0].source == source);
      CHECK(seen.insert(split_key_of(a->splits[0])).second);
    }
  }
  CHECK(seen.size() == 5);
  CHECK(seen.count(SplitKey{1, 0, 1}) == 1);
  CHECK(seen.count(SplitKey{1, 0, 2}) == 0);
  CHECK(job.epoch(0) == 1);
  CHECK(job.epoch(1) == 1);
  // Each provider stands at its own place: source 0 past 3 splits, source 1 past 2.
  CHECK(job.position(0) == SplitPosition{1, 0}); // (the end of epoch 0 moved it to epoch 1)
  CHECK(job.position(1) == SplitPosition{1, 0});
  CHECK(job.splits_handed_out() == 5);
  // A source the dataset does not have is refused, naming it.
  auto bad = job.get_splits(1, 0, 1, 2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("source 2") != std::string::npos);
}

TEST_CASE("job core, several sources: a lost task's splits go back to their own source") {
  auto job = zip_job(20, 20);
  job.add_task(1, 1, "a:1");
  job.add_task(2, 2, "b:1");
  job.task_assigned(1);
  job.task_assigned(2);
  auto a0 = job.get_splits(1, 0, 1, 0); // (0, 0, 0)
  auto a1 = job.get_splits(1, 0, 1, 1); // (1, 0, 0)
  REQUIRE(a0->splits.size() == 1);
  REQUIRE(a1->splits.size() == 1);
  // Same (epoch, index) in both sources: two splits, not one.
  CHECK(job.unfinished_splits() == 2);
  job.task_lost(1, "gone");
  CHECK(job.pending_reissue() == 2);
  CHECK_FALSE(job.production_ended());
  auto b1 = job.get_splits(2, 0, 4, 1);
  REQUIRE(b1->splits.size() == 2); // the re-issued one first, then the next new one
  CHECK(b1->splits[0] == a1->splits[0]);
  CHECK(b1->splits[0].source == 1);
  CHECK(b1->splits[1].source == 1);
  CHECK(job.pending_reissue() == 1); // source 0's still waits for a source-0 request
  auto b0 = job.get_splits(2, 0, 1, 0);
  REQUIRE(b0->splits.size() == 1);
  CHECK(b0->splits[0] == a0->splits[0]);
  // Finished keys carry their source: finishing source 1's (0, 0) leaves source 0's alone.
  job.splits_update(2, {SplitKey{1, 0, 0}}, {});
  CHECK(job.unfinished_splits() == 2);
  CHECK(job.task(2)->unfinished.count(SplitKey{0, 0, 0}) == 1);
}

TEST_CASE("job core, several sources: production ends with the tasks, not with every source") {
  // The longer input of a zip is not read to its end (tf.data): the job ends when its tasks did.
  auto job = zip_job(10, 40);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  REQUIRE(job.get_splits(1, 0, 1, 0)->splits.size() == 1);
  REQUIRE(job.get_splits(1, 0, 1, 1)->splits.size() == 1);
  CHECK(job.get_splits(1, 0, 1, 0)->end_of_splits);
  job.splits_update(1, {SplitKey{0, 0, 0}, SplitKey{1, 0, 0}}, {});
  job.task_done(1, "");
  CHECK(job.production_ended());
  CHECK(job.error().empty());
}

TEST_CASE("job core, several sources: a restart restores each source's position and held splits") {
  auto job = zip_job(30, 30);
  job.add_task(7, 1, "a:1");
  job.task_assigned(7);
  // Before the crash: source 0 handed out splits 0-1 (1 unfinished), source 1 split 0.
  Split held0{0, 1, 10, 20, "", 0, 0};
  REQUIRE(job.restore_splits(0, 3, SplitPosition{0, 2}, {held0}).ok());
  REQUIRE(job.restore_source(1, 0, SplitPosition{0, 1}).ok());
  CHECK_FALSE(job.restore_source(2, 0, SplitPosition{0, 0}).ok());
  auto s0 = job.get_splits(7, 0, 4, 0);
  REQUIRE(s0->splits.size() == 2);
  CHECK(s0->splits[0] == held0);   // the held one first
  CHECK(s0->splits[1].index == 2); // then where source 0 stood
  auto s1 = job.get_splits(7, 0, 4, 1);
  REQUIRE(s1->splits.size() == 2); // source 1 continues at its own position
  CHECK(s1->splits[0].index == 1);
  CHECK(s1->splits[0].source == 1);
  CHECK(s1->splits[0].begin == 10);
}

namespace {

// range(a).concatenate(range(b)) cut into splits of 10, per-split as the dispatcher makes it.
JobCore concatenate_job(int64_t a, int64_t b) {
  conveyor::SplitOptions o;
  o.range_split_size = 10;
  auto dataset = Dataset::range(a).concatenate(Dataset::range(b));
  REQUIRE(conveyor::actors::is_per_split_concatenation(dataset));
  auto providers = conveyor::make_split_providers(dataset, o);
  REQUIRE(providers.ok());
  REQUIRE(providers->size() == 2);
  return JobCore{std::move(providers).value(), true};
}

} // namespace

TEST_CASE("is_per_split_concatenation: concatenate of per-split inputs only, never zip") {
  using conveyor::actors::is_per_split;
  using conveyor::actors::is_per_split_concatenation;
  auto a = Dataset::range(10);
  auto b = Dataset::range(20).map("square").filter("is_even");
  CHECK(is_per_split_concatenation(a.concatenate(b)));
  CHECK(is_per_split_concatenation(a.concatenate(b).map("square").repeat(2)));
  CHECK(is_per_split_concatenation(a.concatenate(b.concatenate(Dataset::range(5)))));
  CHECK_FALSE(is_per_split(a.concatenate(b))); // the one-source rule stays as it was
  CHECK_FALSE(is_per_split_concatenation(Dataset::zip({a, b})));
  CHECK_FALSE(is_per_split_concatenation(a.concatenate(b).batch(2)));
  CHECK_FALSE(is_per_split_concatenation(a.concatenate(b.shuffle(4, 1))));
  CHECK_FALSE(is_per_split_concatenation(a.concatenate(b).map("square", 4)));
  CHECK_FALSE(is_per_split_concatenation(a)); // one source: is_per_split's business
  // An input without a splittable source is read whole by every task: outside any split.
  CHECK_FALSE(is_per_split_concatenation(a.concatenate(b).concatenate(Dataset::random(7))));
  CHECK_FALSE(is_per_split_concatenation(a.concatenate(b).concatenate(Dataset::zip({a, b}))));
}

TEST_CASE("job core, per-split concatenation: a task at the end of `a` is held until every split "
          "of `a` finished, and takes a lost task's split of `a`") {
  auto job = concatenate_job(20, 20); // a: 2 splits, b: 2
  job.add_task(1, 1, "w:1");
  job.add_task(2, 2, "w:2");
  job.task_assigned(1);
  job.task_assigned(2);
  auto t1 = job.get_splits(1, 0, 1, 0);
  auto t2 = job.get_splits(2, 0, 1, 0);
  REQUIRE(t1->splits.size() == 1);
  REQUIRE(t2->splits.size() == 1);
  job.splits_update(2, {split_key_of(t2->splits[0])}, {});
  // Task 2 read its split of `a`; `a` has none left, but task 1's may still come back: held,
  // not moved on to `b` (where it could never take it again).
  auto held = job.get_splits(2, 0, 1, 0);
  REQUIRE(held.ok());
  CHECK(held->hold);
  CHECK_FALSE(held->end_of_splits);
  // Task 1's worker dies: its split of `a` goes to task 2, which still reads `a`.
  job.task_lost(1, "SIGKILL");
  CHECK(job.error().empty());
  auto again = job.get_splits(2, 0, 1, 0);
  REQUIRE(again->splits.size() == 1);
  CHECK(again->splits[0] == t1->splits[0]);
  job.splits_update(2, {split_key_of(again->splits[0])}, {});
  // Now `a` is over for the job, and task 2 moves on to `b`.
  CHECK(job.get_splits(2, 0, 1, 0)->end_of_splits);
  auto b = job.get_splits(2, 0, 1, 1);
  REQUIRE(b->splits.size() == 1);
  CHECK(b->splits[0].source == 1);
  CHECK(job.error().empty());
}

TEST_CASE("job core, concatenation that is not per-split: a split of `a` lost after every other "
          "task moved on to `b` fails the job, naming it") {
  // The bound per-split concatenation removes (above): without the hold, task 2 ends `a`.
  conveyor::SplitOptions o;
  o.range_split_size = 10;
  auto providers =
    conveyor::make_split_providers(Dataset::range(20).concatenate(Dataset::range(20)), o);
  REQUIRE(providers.ok());
  JobCore job{std::move(providers).value(), false};
  job.add_task(1, 1, "w:1");
  job.add_task(2, 2, "w:2");
  job.task_assigned(1);
  job.task_assigned(2);
  REQUIRE(job.get_splits(1, 0, 1, 0)->splits.size() == 1);
  REQUIRE(job.get_splits(2, 0, 1, 0)->splits.size() == 1);
  CHECK(job.get_splits(2, 0, 1, 0)->end_of_splits);
  for (int i = 0; i < 10 && !job.get_splits(2, 0, 1, 1)->end_of_splits; ++i) {
  }
  job.task_done(2, "");
  job.task_lost(1, "SIGKILL");
  CHECK(job.error().find("cannot be read again") != std::string::npos);
}

TEST_CASE("job core, repeat above a zip of unequal lengths: a task's next repetition ends the "
          "longer source's epoch for the job (tf.data resets every provider)") {
  // zip(range(20), range(40)).repeat(2): the first repetition reads `a`'s 2 splits and `b`'s
  // first 2 of 4; the next starts `b` over at its split 0, never reading splits 2-3 of epoch 0.
  conveyor::SplitOptions o;
  o.range_split_size = 10;
  auto providers = conveyor::make_split_providers(
    Dataset::zip({Dataset::range(20), Dataset::range(40)}).repeat(2), o);
  REQUIRE(providers.ok());
  JobCore job{std::move(providers).value(), false};
  job.add_task(1, 1, "w:1");
  job.add_task(2, 2, "w:2");
  job.task_assigned(1);
  job.task_assigned(2);
  // Repetition 0: each task reads one split of `a` and one of `b`.
  for (conveyor::msg::task_id_t t : {1, 2}) {
    REQUIRE(job.get_splits(t, 0, 1, 0)->splits.size() == 1);
    auto b = job.get_splits(t, 0, 1, 1);
    REQUIRE(b->splits.size() == 1);
    CHECK(b->splits[0].epoch == 0);
  }
  // `a` is over for task 1: its zip ends, its repeat begins the next pass.
  CHECK(job.get_splits(1, 0, 1, 0)->end_of_splits);
  CHECK(job.epoch(0) == 1);
  CHECK(job.epoch(1) == 0); // `b` has splits 2-3 of epoch 0 left
  REQUIRE(job.get_splits(1, 1, 1, 0)->splits.size() == 1);
  // Task 1 asks `b` for epoch 1: `b`'s epoch 0 ends, its unread splits are skipped.
  auto next = job.get_splits(1, 1, 1, 1);
  REQUIRE(next.ok());
  REQUIRE(next->splits.size() == 1);
  CHECK(next->splits[0].epoch == 1);
  CHECK(next->splits[0].index == 0);
  CHECK(next->splits[0].begin == 0);
  CHECK(job.epoch(1) == 1);
  // Task 2, still in repetition 0, finds `b`'s epoch 0 over.
  auto late = job.get_splits(2, 0, 1, 1);
  REQUIRE(late.ok());
  CHECK(late->end_of_splits);
  CHECK_FALSE(late->empty_epoch);
  // Two epochs ahead is still refused.
  CHECK_FALSE(job.get_splits(2, 3, 1, 1).ok());
}
