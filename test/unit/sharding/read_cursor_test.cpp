// Read cursors (issue 36): what consume() records, the blob's round trip and its refusals, and
// the resuming split provider (complete splits skipped, partial ones with their skip).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/split_provider.hpp"

using namespace conveyor;

namespace {

std::unique_ptr<SplitProvider> range_provider(int64_t n, int64_t split_size) {
  SplitOptions options;
  options.range_split_size = split_size;
  auto made = make_split_provider(Dataset::range(n), options);
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  return std::move(*made);
}

// Splits up to the next end_of_splits (bounded).
std::vector<Split> one_epoch(SplitProvider& provider) {
  std::vector<Split> out;
  for (int i = 0; i < 1000; ++i) {
    Split s;
    bool end = false;
    Status st = provider.get_next(s, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(s);
  }
  FAIL("no end of splits within 1000 splits");
  return out;
}

} // namespace

TEST_CASE("read cursor: consumed prefixes, gaps, and a split complete once its end is known") {
  ReadCursor c{"fp", 4};
  CHECK(c.consume(0, 0, 0, false));
  CHECK(c.consume(0, 0, 1, false));
  CHECK_FALSE(c.consume(0, 0, 1, false)); // a repeat
  CHECK(c.skip(0, 0) == 2);
  CHECK_FALSE(c.complete(0, 0));
  // Out of order (a re-issued split's repeats): a gap, then filled.
  CHECK(c.consume(0, 1, 2, false));
  CHECK(c.covers(0, 1, 2));
  CHECK_FALSE(c.covers(0, 1, 0));
  CHECK(c.skip(0, 1) == 0);
  CHECK(c.consume(0, 1, 0, false));
  CHECK(c.consume(0, 1, 1, false));
  CHECK(c.skip(0, 1) == 3);
  // The split's last element says so: complete, kept as an interval.
  CHECK(c.consume(0, 0, 2, false));
  CHECK(c.consume(0, 0, 3, true));
  CHECK(c.complete(0, 0));
  CHECK(c.skip(0, 0) == ReadCursor::kSkipAll);
  CHECK(c.covers(0, 0, 99));
  CHECK(c.consume(0, 1, 3, true));
  CHECK(c.complete(0, 1));
  CHECK(c.partial_splits() == 0);
  CHECK(c.complete_splits() == 2);
  CHECK(c.consumed() == 8);
  // The end may be known before the gap is filled.
  CHECK(c.consume(1, 5, 1, true));
  CHECK_FALSE(c.complete(1, 5));
  CHECK(c.consume(1, 5, 0, false));
  CHECK(c.complete(1, 5));
}

TEST_CASE("read cursor: the blob round-trips and stays small for a mostly complete epoch") {
  ReadCursor c{"abc123", 64};
  for (int64_t split = 0; split < 1000; ++split)
    for (int64_t seq = 0; seq < 3; ++seq)
      c.consume(0, split, seq, seq == 2);
  c.consume(0, 1000, 0, false);
  c.consume(0, 1000, 2, false);
  const std::string blob = c.encode();
  CHECK(blob.size() < 200); // one interval, one partial split
  auto back = ReadCursor::decode(blob, "`resume_from`");
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK(back->fingerprint() == "abc123");
  CHECK(back->split_size() == 64);
  CHECK(back->consumed() == c.consumed());
  CHECK(back->complete_splits() == 1000);
  CHECK(back->skip(0, 1000) == 1);
  CHECK(back->covers(0, 1000, 2));
  CHECK_FALSE(back->covers(0, 1000, 1));
  CHECK(back->encode() == blob);
  // Consuming goes on from the decoded cursor.
  CHECK(back->consume(0, 1000, 1, true));
  CHECK(back->complete(0, 1000));
}

TEST_CASE("read cursor: a blob that is not a cursor is refused naming the argument") {
  for (std::string bad :
       {std::string{}, std::string{"hello"}, std::string{"conveyor-read-cursor 99\n"},
        std::string{"conveyor-read-cursor 1\nsplit_size 4\n"},
        std::string{"conveyor-read-cursor 1\nfingerprint f\nsplit_size 0\n"},
        std::string{"conveyor-read-cursor 1\nfingerprint f\nsplit_size 4\ncomplete 0 5-3\n"},
        std::string{"conveyor-read-cursor 1\nfingerprint f\nsplit_size 4\npartial 0 1 x\n"},
        std::string{"conveyor-read-cursor 1\nfingerprint f\nsplit_size 4\nwhat 1\n"}}) {
    auto c = ReadCursor::decode(bad, "`resume_from`");
    INFO(bad);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == ErrorCode::invalid_argument);
    CHECK(c.status().message().find("`resume_from`") != std::string::npos);
  }
}

TEST_CASE("read cursor: a resumed provider skips complete splits and marks partial ones") {
  auto cursor = std::make_shared<ReadCursor>("fp", 4);
  // range(20) in splits of 4: 0..4. Split 0 and 2 complete, split 3 consumed up to 2.
  for (int64_t s : {0, 2})
    for (int64_t seq = 0; seq < 4; ++seq)
      cursor->consume(0, s, seq, seq == 3);
  cursor->consume(0, 3, 0, false);
  cursor->consume(0, 3, 1, false);
  auto p = resuming_split_provider(range_provider(20, 4), cursor);
  auto splits = one_epoch(*p);
  REQUIRE(splits.size() == 3);
  CHECK(splits[0].index == 1);
  CHECK(splits[0].skip == 0);
  CHECK(splits[1].index == 3);
  CHECK(splits[1].skip == 2);
  CHECK(splits[1].begin == 12); // the split is the same range: the task skips in its output
  CHECK(splits[2].index == 4);
  // Past the only epoch: end for good.
  CHECK(one_epoch(*p).empty());
}

TEST_CASE("read cursor: an epoch consumed whole still hands out one split that produces nothing") {
  auto cursor = std::make_shared<ReadCursor>("fp", 5);
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t seq = 0; seq < 5; ++seq)
      cursor->consume(0, s, seq, seq == 4);
  SplitOptions options;
  options.range_split_size = 5;
  auto made = make_split_provider(Dataset::range(10).repeat(2), options);
  REQUIRE(made.ok());
  auto p = resuming_split_provider(std::move(*made), cursor);
  auto first = one_epoch(*p); // epoch 0: every split complete
  REQUIRE(first.size() == 1);
  CHECK(first[0].epoch == 0);
  CHECK(first[0].skip == ReadCursor::kSkipAll);
  auto second = one_epoch(*p); // epoch 1: untouched
  REQUIRE(second.size() == 2);
  CHECK(second[0].epoch == 1);
  CHECK(second[0].skip == 0);
}

TEST_CASE("read cursor: a copied or moved cursor goes on consuming (its split cache is its own)") {
  ReadCursor a{"fp", 8};
  CHECK(a.consume(0, 3, 0, false)); // caches split 3
  ReadCursor b = a;                 // copy
  CHECK(b.consume(0, 3, 1, false));
  CHECK(b.skip(0, 3) == 2);
  CHECK(a.skip(0, 3) == 1);
  ReadCursor c = std::move(b); // move
  CHECK(c.consume(0, 3, 2, false));
  CHECK(c.skip(0, 3) == 3);
  auto decoded = ReadCursor::decode(c.encode(), "`resume_from`");
  REQUIRE(decoded.ok());
  ReadCursor d = std::move(decoded).value();
  for (int64_t seq = 3; seq < 8; ++seq)
    CHECK(d.consume(0, 3, seq, seq == 7));
  CHECK(d.complete(0, 3));
  CHECK(d.consumed() == 8);
}

TEST_CASE("read cursor: OFF slots count each task's consumed elements and round-trip") {
  ReadCursor c = ReadCursor::off("fp");
  CHECK(c.mode() == ShardingPolicy::off);
  c.add_slot(7, 0);  // a task nothing was taken from yet
  c.add_slot(9, 40); // a resumed slot: its task starts at element 40
  for (int64_t seq = 0; seq < 5; ++seq)
    CHECK(c.consume(0, 7, seq, false));
  CHECK_FALSE(c.consume(0, 7, 2, false)); // a repeat
  CHECK(c.consume(0, 9, 40, false));
  CHECK(c.consume(0, 9, 41, true)); // the task's last element
  c.add_slot(7, 0);                 // known: kept
  REQUIRE(c.slots().size() == 2);
  CHECK(c.slots().at(7).consumed == 5);
  CHECK_FALSE(c.slots().at(7).ended);
  CHECK(c.slots().at(9).consumed == 42);
  CHECK(c.slots().at(9).ended);
  CHECK(c.consumed() == 7);
  auto back = ReadCursor::decode(c.encode(), "`resume_from`");
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK(back->mode() == ShardingPolicy::off);
  CHECK(back->fingerprint() == "fp");
  CHECK(back->consumed() == 7);
  REQUIRE(back->slots().size() == 2);
  CHECK(back->slots().at(7).consumed == 5);
  CHECK(back->slots().at(9).ended);
  back->end_slot(7);
  CHECK(back->slots().at(7).ended);
  // A DYNAMIC cursor says its mode too.
  ReadCursor d{"fp", 4};
  auto dyn = ReadCursor::decode(d.encode(), "`resume_from`");
  REQUIRE(dyn.ok());
  CHECK(dyn->mode() == ShardingPolicy::dynamic);
  CHECK(d.encode().find("mode dynamic\n") != std::string::npos);
}

TEST_CASE("read cursor: a version 1 blob (DYNAMIC, no mode line) still decodes") {
  const std::string v1 = "conveyor-read-cursor 1\nfingerprint abc\nsplit_size 8\nconsumed 10\n"
                         "complete 0 0-1\npartial 0 1 2 -1\n";
  auto c = ReadCursor::decode(v1, "`resume_from`");
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  CHECK(c->mode() == ShardingPolicy::dynamic);
  CHECK(c->split_size() == 8);
  CHECK(c->complete(0, 0));
  CHECK(c->skip(0, 1) == 2);
  CHECK(c->consumed() == 10);
}

TEST_CASE("read cursor: bad OFF blobs are refused naming the argument") {
  for (std::string bad :
       {std::string{"conveyor-read-cursor 2\nfingerprint f\nslot 1 2 0\n"}, // no mode line
        std::string{"conveyor-read-cursor 2\nmode sideways\nfingerprint f\n"},
        std::string{"conveyor-read-cursor 2\nmode off\nfingerprint f\nslot 1 -2 0\n"},
        std::string{"conveyor-read-cursor 2\nmode off\nfingerprint f\nslot 1 2 5\n"},
        std::string{"conveyor-read-cursor 2\nmode off\nfingerprint f\nslot 1 2 0\nslot 1 3 0\n"},
        std::string{"conveyor-read-cursor 2\nmode off\nfingerprint f\nsplit_size 4\n"},
        std::string{"conveyor-read-cursor 2\nmode dynamic\nfingerprint f\nsplit_size 4\nslot 1 "
                    "2 0\n"},
        std::string{"conveyor-read-cursor 1\nfingerprint f\nsplit_size 4\nslot 1 2 0\n"},
        std::string{"conveyor-read-cursor 4\nmode off\nfingerprint f\n"},
        std::string{"conveyor-read-cursor 2\nmode off\n"}}) {
    auto c = ReadCursor::decode(bad, "`resume_from`");
    INFO(bad);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == ErrorCode::invalid_argument);
    CHECK(c.status().message().find("`resume_from`") != std::string::npos);
  }
}

TEST_CASE("read cursor: a cursor of one mode is refused for the other, naming both") {
  CHECK(resume_mode_refusal(ShardingPolicy::off, ShardingPolicy::off).empty());
  CHECK(resume_mode_refusal(ShardingPolicy::dynamic, ShardingPolicy::dynamic).empty());
  auto why = resume_mode_refusal(ShardingPolicy::dynamic, ShardingPolicy::off);
  CHECK(why.find("`resume_from`") != std::string::npos);
  CHECK(why.find("DYNAMIC") != std::string::npos);
  CHECK(why.find("OFF") != std::string::npos);
  why = resume_mode_refusal(ShardingPolicy::off, ShardingPolicy::dynamic);
  CHECK(why.find("is the cursor of an OFF (parallel_epochs) read, but this read is DYNAMIC") !=
        std::string::npos);
  CHECK(resume_mode_refusal(ShardingPolicy::off, ShardingPolicy::file).find("FILE") !=
        std::string::npos);
}

TEST_CASE("read cursor: an OFF read resumes only pipelines whose output is a function of the "
          "dataset") {
  CHECK(off_resume_refusal(Dataset::range(10)).empty());
  CHECK(off_resume_refusal(Dataset::range(10).shuffle(4, 7)).empty()); // seeded
  CHECK(off_resume_refusal(Dataset::range(10).shuffle(4)).find("`shuffle` without a seed") !=
        std::string::npos);
  CHECK(off_resume_refusal(Dataset::random()).find("`random` without a seed") != std::string::npos);
}

TEST_CASE("read cursor: a worker's end mark completes a split only once all of it was consumed") {
  ReadCursor c{"fp", 4};
  CHECK(c.consume(0, 0, 0, false));
  CHECK(c.consume(0, 0, 1, false));
  c.split_ended(0, 0, 3); // (its last element is still on its way)
  CHECK_FALSE(c.complete(0, 0));
  CHECK(c.consume(0, 0, 2, false));
  CHECK(c.complete(0, 0));
  // Told after the last element was consumed: complete at once.
  CHECK(c.consume(0, 1, 0, false));
  c.split_ended(0, 1, 1);
  CHECK(c.complete(0, 1));
  // A split `filter` emptied has nothing to consume.
  c.split_ended(0, 2, 0);
  CHECK(c.complete(0, 2));
  CHECK(c.consumed() == 4);
  CHECK(c.partial_splits() == 0);
}
