// Job-side split hand-out (TF's GetSplit(repetition) epoch logic) and the task-side feed.
#include <doctest/doctest.h>

#include <set>

#include "actors/split_assigner.hpp"
#include "actors/split_feed.hpp"
#include "pipeline/dataset.hpp"

using namespace conveyor;
using namespace conveyor::actors;

namespace {

SplitAssigner assigner_for(const Dataset& d, int64_t split_size) {
  SplitOptions options;
  options.range_split_size = split_size;
  auto p = make_split_provider(d, options);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  return SplitAssigner{std::move(p).value()};
}

} // namespace

TEST_CASE("every split of an epoch goes out once; a task behind the job gets end_of_splits") {
  auto a = assigner_for(Dataset::range(10).repeat(2), 4); // splits [0,4) [4,8) [8,10) per epoch
  Split s;
  bool end = false;
  // Task A takes two splits, task B one, of epoch 0.
  REQUIRE(a.next(0, s, end).ok());
  CHECK((!end && s.begin == 0 && s.end == 4 && s.epoch == 0));
  REQUIRE(a.next(0, s, end).ok());
  CHECK((!end && s.begin == 4));
  REQUIRE(a.next(0, s, end).ok());
  CHECK((!end && s.begin == 8 && s.end == 10));
  // Epoch 0 exhausted: the first asker moves the job to epoch 1...
  REQUIRE(a.next(0, s, end).ok());
  CHECK(end);
  CHECK(a.epoch() == 1);
  // ...the other task, still in epoch 0, just gets end_of_splits.
  REQUIRE(a.next(0, s, end).ok());
  CHECK(end);
  CHECK(a.epoch() == 1);
  // Epoch 1 hands the same ranges out again.
  REQUIRE(a.next(1, s, end).ok());
  CHECK((!end && s.begin == 0 && s.epoch == 1));
  // A task cannot be ahead of the job.
  auto ahead = a.next(5, s, end);
  CHECK(ahead.code() == ErrorCode::failed_precondition);
  CHECK(ahead.message() == "a task asked for a split of epoch 5 but the job is only in epoch 1");
  CHECK(a.splits_handed_out() == 4);
}

TEST_CASE("past the last epoch every answer is end_of_splits") {
  auto a = assigner_for(Dataset::range(3), 64);
  Split s;
  bool end = false;
  REQUIRE(a.next(0, s, end).ok());
  CHECK_FALSE(end);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    REQUIRE(a.next(epoch, s, end).ok());
    CHECK(end);
  }
}

TEST_CASE("the split feed is resumable: unavailable until a split arrives, then one end per epoch") {
  SplitFeed feed{2};
  Split s;
  bool end = false;
  CHECK_FALSE(feed.wants_split()); // the pipeline has not asked yet
  auto st = feed.get_next(s, end);
  CHECK(st.code() == ErrorCode::unavailable);
  REQUIRE(feed.wants_split());
  feed.request_sent();
  CHECK_FALSE(feed.wants_split()); // one request at a time
  feed.deliver(Split{0, 0, 0, 4, ""});
  CHECK(feed.wants_split()); // prefetch a second
  feed.request_sent();
  feed.deliver_end_of_splits();
  CHECK_FALSE(feed.wants_split()); // nothing past the end of the epoch
  REQUIRE(feed.get_next(s, end).ok());
  CHECK((!end && s.end == 4));
  REQUIRE(feed.get_next(s, end).ok());
  CHECK(end);
  CHECK(feed.epoch() == 1);
  CHECK_FALSE(feed.wants_split()); // a pipeline without repeat never asks again
  CHECK(feed.get_next(s, end).code() == ErrorCode::unavailable);
  CHECK(feed.wants_split()); // ...but one with repeat does
  feed.request_sent();
  feed.fail(Status{ErrorCode::unavailable, "job gone"});
  auto failed = feed.get_next(s, end);
  CHECK(failed.message() == "job gone");
}
