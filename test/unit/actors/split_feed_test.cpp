// SplitFeed's read-ahead: the window of splits a task takes from the job before its pipeline
// starts them follows what the pipeline reads while an answer is on its way, so a slow task
// leaves the epoch's splits to a task that joins the job later (autoscaling).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "dispatcher/job_core.hpp"
#include "dynamic_job.hpp"
#include "worker/split_feed.hpp"

using conveyor::Split;
using conveyor::actors::JobCore;
using conveyor::actors::SplitFeed;

namespace {

// The pipeline starts its next split; true when one was buffered.
bool start_split(SplitFeed& feed) {
  Split s;
  bool end = false;
  return feed.get_next(s, end).ok() && !end;
}

// A round trip to the job: asks when the feed wants splits and delivers the answer; then hands
// back the splits beyond the window, as the task actor does (report_splits). Returns how many
// it handed back.
std::size_t ask(SplitFeed& feed, JobCore& job, conveyor::msg::task_id_t task) {
  if (!feed.wants_splits())
    return 0;
  feed.request_sent();
  auto a = job.get_splits(task, feed.epoch(), feed.request_max());
  REQUIRE(a.ok());
  if (a->hold) // the epoch's last splits are read elsewhere: the request stays held
    return 0;
  feed.deliver(a->splits, a->end_of_splits, a->empty_epoch);
  auto surplus = feed.take_surplus();
  if (!surplus.empty())
    job.splits_update(task, {}, surplus);
  return surplus.size();
}

// Grows the window the way a slow start does: the pipeline waits for each answer. Returns the
// splits the pipeline started.
int64_t starve_to_max(SplitFeed& feed, JobCore& job, conveyor::msg::task_id_t task) {
  int64_t started = 0;
  for (int i = 0; i < 10 && feed.window() < SplitFeed::kMaxWindow; ++i) {
    while (start_split(feed))
      ++started;
    ask(feed, job, task);
  }
  REQUIRE(feed.window() == SplitFeed::kMaxWindow);
  return started;
}

} // namespace

TEST_CASE("split feed: the window doubles while the pipeline waits for splits") {
  auto job = conveyor::test::dynamic_job(100000, 1);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  SplitFeed feed;
  CHECK(feed.window() == 2);
  CHECK_FALSE(start_split(feed)); // waits: nothing asked yet
  ask(feed, job, 1);
  CHECK(feed.window() == 2); // every pipeline waits for its first split: no reason to grow
  CHECK(feed.buffered() == 2);
  while (start_split(feed)) {
  }
  ask(feed, job, 1); // it read both before the answer to its request ahead came
  CHECK(feed.window() == 4);
  starve_to_max(feed, job, 1);
  // A fast pipeline that reads everything before each answer keeps the largest window.
  for (int i = 0; i < 20; ++i) {
    while (start_split(feed)) {
    }
    ask(feed, job, 1);
    CHECK(feed.window() == SplitFeed::kMaxWindow);
  }
}

TEST_CASE("split feed: a slow pipeline's window shrinks to the split it needs next") {
  auto job = conveyor::test::dynamic_job(100000, 1);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  SplitFeed feed;
  CHECK_FALSE(start_split(feed));
  starve_to_max(feed, job, 1);
  // Answers now come back before the pipeline starts another split: the buffered splits were
  // more than the round trip needed.
  std::size_t handed_back = 0;
  int answers_to_converge = -1;
  for (int i = 0; i < 50; ++i) {
    REQUIRE(start_split(feed)); // never waits
    handed_back += ask(feed, job, 1);
    if (answers_to_converge < 0 && feed.window() == SplitFeed::kMinWindow)
      answers_to_converge = i + 1;
    CHECK(feed.buffered() <= feed.window()); // never more than the window after an answer
  }
  CHECK(feed.window() == SplitFeed::kMinWindow);
  CHECK(feed.buffered() <= 1);
  CHECK(answers_to_converge > 0);
  CHECK(answers_to_converge <= 10);
  CHECK(handed_back > 0); // the splits the start-up took beyond the window went back
  CHECK(job.splits_reissued() == static_cast<int64_t>(handed_back));
  CHECK(feed.peak_buffered() >= 16); // what the start-up wait took
}

TEST_CASE("split feed: no surplus handed back while draining, after the epoch's end, or "
          "without prefetch") {
  auto job = conveyor::test::dynamic_job(100000, 1);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  SplitFeed feed;
  CHECK_FALSE(start_split(feed));
  starve_to_max(feed, job, 1);
  REQUIRE(start_split(feed));
  REQUIRE(feed.wants_splits());
  feed.request_sent();
  std::vector<Split> more;
  for (int64_t i = 0; i < 40; ++i)
    more.push_back(Split{0, 1000 + i, 1000 + i, 1001 + i, ""});
  SUBCASE("after the epoch's end") {
    feed.deliver(more, true, false);
    CHECK(feed.take_surplus().empty());
  }
  SUBCASE("draining") {
    feed.deliver(more, false, false);
    auto all = feed.drain();
    CHECK(all.size() > 40);
    CHECK(feed.take_surplus().empty());
  }
  SUBCASE("beyond the window: the last taken, in split order") {
    feed.deliver(more, false, false);
    const auto before = feed.buffered();
    auto back = feed.take_surplus();
    REQUIRE(back.size() == before - feed.window());
    CHECK(back.back().index == 1039);
    for (std::size_t i = 1; i < back.size(); ++i)
      CHECK(back[i].index == back[i - 1].index + 1);
    CHECK(feed.buffered() == feed.window());
  }
  SUBCASE("a feed that does not prefetch (several sources)") {
    SplitFeed one(1);
    one.set_prefetch(false);
    CHECK_FALSE(start_split(one));
    REQUIRE(one.wants_splits());
    one.request_sent();
    one.deliver({Split{0, 0, 0, 1, ""}, Split{0, 1, 1, 2, ""}}, false, false);
    CHECK(one.take_surplus().empty());
    feed.deliver(more, false, false); // (the request of the outer feed)
  }
}

TEST_CASE("split feed: a window of one grows again when the pipeline waits") {
  auto job = conveyor::test::dynamic_job(100000, 1);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  SplitFeed feed;
  CHECK_FALSE(start_split(feed));
  ask(feed, job, 1);
  for (int i = 0; i < 10; ++i) { // slow: shrinks to one
    REQUIRE(start_split(feed));
    ask(feed, job, 1);
  }
  REQUIRE(feed.window() == 1);
  // The pipeline reads its buffered split before the answer comes: it waits, the window grows.
  REQUIRE(start_split(feed));
  REQUIRE(feed.buffered() == 0);
  CHECK_FALSE(start_split(feed));
  ask(feed, job, 1);
  CHECK(feed.window() == 2);
}

TEST_CASE("split feed: a task joining a running epoch gets a fair share of a slow job's splits") {
  // The first task's window grew at start-up; a second task joins after 10 splits and the two
  // read one split each in turn. Before the window shrank, the first task held 32 splits the
  // second could not take (about a third of these 100).
  auto job = conveyor::test::dynamic_job(100, 1);
  job.add_task(1, 1, "a:1");
  job.task_assigned(1);
  SplitFeed first;
  CHECK_FALSE(start_split(first));
  int64_t by_first = starve_to_max(first, job, 1), by_second = 0;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(start_split(first));
    ++by_first;
    ask(first, job, 1);
  }
  const int64_t left_at_join = 100 - by_first;
  job.add_task(2, 2, "b:1");
  job.task_assigned(2);
  SplitFeed second;
  for (int round = 0; round < 200; ++round) {
    bool any = false;
    if (start_split(first)) {
      ++by_first;
      any = true;
    }
    ask(first, job, 1);
    if (start_split(second)) {
      ++by_second;
      any = true;
    }
    ask(second, job, 2);
    if (!any && first.buffered() == 0 && second.buffered() == 0)
      break;
  }
  CAPTURE(by_first);
  CAPTURE(by_second);
  CAPTURE(left_at_join);
  CHECK(by_first + by_second == 100);    // every split read once
  CHECK(job.unfinished_splits() == 100); // (none finished: this test reports no acks)
  CHECK(job.pending_reissue() == 0);
  // The second task read about half of what was left when it joined (the first task holds
  // at most its window, one split, beyond the one it reads).
  CHECK(by_second * 2 >= left_at_join - 2);
}
