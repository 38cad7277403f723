// Coordinated read cursors (issue 36, version 3 of the blob): a trainer's share of the rounds
// per task slot, the blob's round trip, and the refusals (another num_consumers or index). How
// the N trainers' cursors make one resumed job: test/unit/journal (dispatcher/coordinated_resume).
#include <doctest/doctest.h>

#include <string>

#include "pipeline/sharding/read_cursor.hpp"

using namespace conveyor;

namespace {

// Consumer `index` of 2 consumed `rounds` rounds of a job whose 2 tasks (slots 5 and 6) served
// them in turn, as a read of that job saves it.
ReadCursor after_rounds(int64_t index, int64_t rounds) {
  ReadCursor c = ReadCursor::coordinated("fp", 2, index);
  for (int64_t r = 0; r < rounds; ++r)
    REQUIRE(c.consume(0, 5 + r % 2, r / 2, false));
  c.set_job(17);
  return c;
}

} // namespace

TEST_CASE("coordinated cursor: rounds per slot, the global step, and the blob's round trip") {
  ReadCursor c = after_rounds(1, 7);
  CHECK(c.coordinated());
  CHECK(c.mode() == ShardingPolicy::off);
  CHECK(c.consumed() == 7); // the global step: rounds this trainer consumed
  REQUIRE(c.slots().size() == 2);
  CHECK(c.slots().at(5).consumed == 4); // local rounds 0..3
  CHECK(c.slots().at(6).consumed == 3);
  CHECK_FALSE(c.consume(0, 5, 3, false)); // a round it has: a resumed trainer ahead drops it
  const std::string blob = c.encode();
  CHECK(blob.rfind("conveyor-read-cursor 3\n", 0) == 0);
  CHECK(blob.find("mode coordinated\n") != std::string::npos);
  CHECK(blob.find("consumers 2 1 17\n") != std::string::npos);
  auto back = ReadCursor::decode(blob, "`resume_from`");
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK(back->coordinated());
  CHECK(back->num_consumers() == 2);
  CHECK(back->consumer_index() == 1);
  CHECK(back->job() == 17);
  CHECK(back->consumed() == 7);
  CHECK(back->slots().at(5).consumed == 4);
  CHECK(back->slots().at(6).consumed == 3);
  CHECK(back->encode() == blob);
  // An OFF cursor is not coordinated, and a version 2 OFF blob still decodes.
  CHECK_FALSE(ReadCursor::off("fp").coordinated());
  auto v2 = ReadCursor::decode("conveyor-read-cursor 2\nmode off\nfingerprint f\nslot 1 2 0\n",
                               "`resume_from`");
  REQUIRE(v2.ok());
  CHECK_FALSE(v2->coordinated());
}

TEST_CASE("coordinated cursor: bad blobs are refused naming the argument") {
  for (std::string bad :
       {// version 2 knows no coordinated mode
        std::string{"conveyor-read-cursor 2\nmode coordinated\nfingerprint f\nconsumers 2 0 1\n"},
        // no consumers line
        std::string{"conveyor-read-cursor 3\nmode coordinated\nfingerprint f\nslot 1 2 0\n"},
        // an index out of range, no consumers, a negative job
        std::string{"conveyor-read-cursor 3\nmode coordinated\nfingerprint f\nconsumers 2 2 1\n"},
        std::string{"conveyor-read-cursor 3\nmode coordinated\nfingerprint f\nconsumers 0 0 1\n"},
        std::string{"conveyor-read-cursor 3\nmode coordinated\nfingerprint f\nconsumers 2 0 -1\n"},
        // a consumers line in a cursor that is not coordinated
        std::string{"conveyor-read-cursor 3\nmode off\nfingerprint f\nconsumers 2 0 1\n"},
        // splits in a coordinated cursor
        std::string{"conveyor-read-cursor 3\nmode coordinated\nfingerprint f\nconsumers 2 0 "
                    "1\nsplit_size 4\n"}}) {
    INFO(bad);
    auto c = ReadCursor::decode(bad, "`resume_from`");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == ErrorCode::invalid_argument);
    CHECK(c.status().message().find("`resume_from`") != std::string::npos);
  }
}

TEST_CASE("coordinated cursor: another number of trainers or another index is refused, naming "
          "both") {
  const ReadCursor c = after_rounds(1, 4);
  CHECK(coordinated_resume_refusal(c, 2, 1).empty());
  auto why = coordinated_resume_refusal(c, 3, 1);
  CHECK(why.find("`resume_from`") != std::string::npos);
  CHECK(why.find("coordinated read by 2 consumers") != std::string::npos);
  CHECK(why.find("this read has num_consumers 3") != std::string::npos);
  why = coordinated_resume_refusal(c, 2, 0);
  CHECK(why.find("consumer_index 1") != std::string::npos);
  CHECK(why.find("this read has consumer_index 0") != std::string::npos);
  why = coordinated_resume_refusal(c, 0, 0);
  CHECK(why.find("this read is not coordinated") != std::string::npos);
  // An OFF cursor for a coordinated read, and for a plain one (fine).
  why = coordinated_resume_refusal(ReadCursor::off("fp"), 2, 0);
  CHECK(why.find("was not coordinated") != std::string::npos);
  CHECK(why.find("num_consumers 2") != std::string::npos);
  CHECK(coordinated_resume_refusal(ReadCursor::off("fp"), 0, 0).empty());
}
