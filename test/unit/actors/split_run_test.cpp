// Deterministic reads take elements as runs of one split, still encoded (consumer/split_run.hpp):
// ReadyElements cuts a batch into runs at its origin runs and at dropped elements, OrderedReads
// holds a run as one entry (counted in elements and in its share of the batch's bytes) and hands
// it out whole when the order reaches it, and a read cursor fed element by element from a run
// resumes in its middle.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "consumer/ordered_reads.hpp"
#include "consumer/ready_elements.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/tensor.hpp"

using conveyor::Compression;
using conveyor::Element;
using conveyor::ReadCursor;
using conveyor::Tensor;
using conveyor::actors::DeliveredOrigin;
using conveyor::actors::OrderedReads;
using conveyor::actors::ReadyElements;
using conveyor::actors::SplitRun;
using conveyor::msg::origin_run;

namespace {

// A batch of int64 scalars `first`, `first` + 1, ... in ReadyElements, tagged by `origins`.
void add_batch(ReadyElements& ready, int64_t first, uint32_t count, std::vector<origin_run> origins,
               std::vector<bool> keep = {}) {
  std::vector<Element> elements;
  for (uint32_t i = 0; i < count; ++i)
    elements.push_back(Element{Tensor::scalar(first + i)});
  ready.add_encoded(conveyor::encode_batch(elements, Compression::none), count, std::move(keep),
                    "worker w", std::move(origins));
}

std::vector<SplitRun> all_runs(ReadyElements& ready) {
  std::vector<SplitRun> out;
  for (int i = 0; i < 1000; ++i) { // bounded
    SplitRun run;
    bool got = false;
    REQUIRE(ready.next_run(run, got).ok());
    if (!got)
      return out;
    out.push_back(std::move(run));
  }
  FAIL("next_run() never ran dry");
  return out;
}

struct Taken {
  std::vector<int64_t> values;
  std::vector<int64_t> seqs;
};

// Decodes up to `most` of the run's elements.
Taken take(SplitRun& run, uint32_t most = 1u << 30) {
  Taken out;
  for (uint32_t i = 0; i < most && !run.done(); ++i) {
    Element e;
    DeliveredOrigin origin;
    REQUIRE(run.next(e, origin).ok());
    out.values.push_back(e[0].as_int64());
    out.seqs.push_back(origin.seq);
  }
  return out;
}

} // namespace

TEST_CASE("split runs: a batch is cut at its origin runs, and at elements the consumer dropped") {
  ReadyElements ready;
  // The end of split 3 (seqs 4, 5; its last) and the start of split 4 in one batch.
  add_batch(ready, 100, 6, {origin_run{0, 3, 4, 2, true}, origin_run{0, 4, 0, 4, false}});
  // Split 5's seqs 0..5 with 0 and 3 dropped (repeats).
  add_batch(ready, 200, 6, {origin_run{0, 5, 0, 6, false}}, {false, true, true, false, true, true});
  CHECK(ready.size() == 10);
  auto runs = all_runs(ready);
  CHECK(ready.empty());
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].first.index == 3);
  CHECK(runs[0].first.seq == 4);
  CHECK(runs[0].count == 2);
  CHECK(runs[0].first.split_end);
  CHECK(runs[1].first.index == 4);
  CHECK(runs[1].count == 4);
  CHECK_FALSE(runs[1].first.split_end);
  CHECK(runs[0].bytes + runs[1].bytes > 0);
  CHECK(runs[0].batch == runs[1].batch); // one buffer, shared
  CHECK(take(runs[0]).values == std::vector<int64_t>{100, 101});
  auto split4 = take(runs[1]);
  CHECK(split4.values == std::vector<int64_t>{102, 103, 104, 105});
  CHECK(split4.seqs == std::vector<int64_t>{0, 1, 2, 3});
  auto a = take(runs[2]), b = take(runs[3]);
  CHECK(a.values == std::vector<int64_t>{201, 202});
  CHECK(a.seqs == std::vector<int64_t>{1, 2});
  CHECK(b.values == std::vector<int64_t>{204, 205});
  CHECK(b.seqs == std::vector<int64_t>{4, 5});
}

TEST_CASE("split runs: the reorder holds a later split's run whole and encoded, counted in "
          "elements and bytes, and hands it out after the split before it") {
  OrderedReads order(16, nullptr);
  ReadyElements ready;
  // Split 1 arrives first (its last element marked), then split 0 ends in a batch that also
  // starts split 2.
  add_batch(ready, 10, 4, {origin_run{0, 1, 0, 4, true}});
  add_batch(ready, 0, 5, {origin_run{0, 0, 0, 3, true}, origin_run{0, 2, 0, 2, false}});
  auto runs = all_runs(ready);
  REQUIRE(runs.size() == 3);
  CHECK_FALSE(*order.arrived(runs[0])); // held: split 0 has not come
  CHECK(order.held() == 4);
  CHECK(order.held_bytes() > 0);
  const int64_t split1_bytes = order.held_bytes();
  CHECK_FALSE(order.pop().has_value());
  CHECK(*order.arrived(runs[1])); // split 0: next in order, handed out whole
  CHECK(take(runs[1]).values == std::vector<int64_t>{0, 1, 2});
  CHECK_FALSE(*order.arrived(runs[2])); // split 2 waits for split 1 (held)
  CHECK(order.held() == 6);
  auto held = order.pop(); // split 0 ended (marked): split 1 is next
  REQUIRE(held.has_value());
  CHECK(order.held() == 2);
  CHECK(order.held_bytes() < split1_bytes + runs[2].bytes + 1);
  CHECK(take(*held).values == std::vector<int64_t>{10, 11, 12, 13});
  auto split2 = order.pop(); // split 1 ended (marked)
  REQUIRE(split2.has_value());
  CHECK(take(*split2).values == std::vector<int64_t>{3, 4});
  CHECK(order.held() == 0);
  CHECK(order.held_bytes() == 0);
  CHECK(order.peak_held() == 6);
  CHECK_FALSE(order.pop().has_value());
  CHECK(order.next_split() == std::pair<int64_t, int64_t>{0, 2});
}

TEST_CASE("split runs: a cursor taken in the middle of a held run resumes at its next element") {
  // The first read: split 1's run was held, then handed out; the reader took two of its four
  // elements when the cursor was taken.
  auto cursor = std::make_shared<ReadCursor>("fp", 4);
  {
    OrderedReads order(16, nullptr);
    ReadyElements ready;
    add_batch(ready, 10, 4, {origin_run{0, 1, 0, 4, true}});
    add_batch(ready, 0, 2, {origin_run{0, 0, 0, 2, true}});
    auto runs = all_runs(ready);
    REQUIRE(runs.size() == 2);
    CHECK_FALSE(*order.arrived(runs[0]));
    REQUIRE(*order.arrived(runs[1]));
    auto consume = [&](SplitRun& run, uint32_t most) {
      for (uint32_t i = 0; i < most && !run.done(); ++i) {
        Element e;
        DeliveredOrigin o;
        REQUIRE(run.next(e, o).ok());
        cursor->consume(o.epoch, o.index, o.seq, o.split_end);
      }
    };
    consume(runs[1], 2);
    auto held = order.pop();
    REQUIRE(held.has_value());
    consume(*held, 2);
  }
  CHECK(cursor->complete(0, 0));
  CHECK(cursor->covers(0, 1, 1));
  CHECK_FALSE(cursor->covers(0, 1, 2));
  // The resumed read: the consumer core drops what the cursor covers (keep), and the order
  // starts after it.
  OrderedReads order(16, std::make_shared<const ReadCursor>(*cursor));
  ReadyElements ready;
  add_batch(ready, 10, 4, {origin_run{0, 1, 0, 4, true}}, {false, false, true, true});
  add_batch(ready, 20, 1, {origin_run{0, 2, 0, 1, true}});
  auto runs = all_runs(ready);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].first.seq == 2);
  CHECK(*order.arrived(runs[0])); // next in order: split 0 and split 1's first two are consumed
  auto rest = take(runs[0]);
  CHECK(rest.values == std::vector<int64_t>{12, 13});
  CHECK(rest.seqs == std::vector<int64_t>{2, 3});
  CHECK(*order.arrived(runs[1]));
  CHECK(take(runs[1]).values == std::vector<int64_t>{20});
}

TEST_CASE("split runs: a corrupt batch fails the run that reaches it, naming where it came from") {
  std::vector<Element> elements;
  for (int64_t i = 0; i < 3; ++i)
    elements.push_back(Element{Tensor::scalar(i)});
  std::string bytes = conveyor::encode_batch(elements, Compression::none);
  // The second element's length (after the 24-byte header and the first element, each element
  // a length varint and its bytes; no pads for 8-byte payloads) says more bytes than remain.
  const std::size_t each = (bytes.size() - 24) / 3;
  REQUIRE(bytes.size() == 24 + 3 * each);
  bytes[24 + each] = 0x7f;
  ReadyElements ready;
  ready.add_encoded(std::move(bytes), 3, {}, "worker w", {origin_run{0, 0, 0, 3, true}});
  SplitRun run;
  bool got = false;
  REQUIRE(ready.next_run(run, got).ok()); // (a whole batch's run: nothing is decoded yet)
  REQUIRE(got);
  Element e;
  DeliveredOrigin origin;
  conveyor::Status st;
  for (int i = 0; i < 3 && st.ok(); ++i)
    st = run.next(e, origin);
  CHECK(st.code() == conveyor::ErrorCode::data_loss);
  CHECK(st.message().find("worker w") != std::string::npos);
  // A batch announced with another count is refused when its run is cut.
  ReadyElements wrong;
  wrong.add_encoded(conveyor::encode_batch(elements, Compression::none), 4, {}, "worker v",
                    {origin_run{0, 0, 0, 4, true}});
  auto refused = wrong.next_run(run, got);
  CHECK(refused.code() == conveyor::ErrorCode::data_loss);
  CHECK(refused.message().find("announced 4") != std::string::npos);
}
