// TaskRunner: the task's pipeline, buffer and batching without actors.
#include <doctest/doctest.h>

#include <algorithm>

#include <memory>

#include "net/bulk_frame.hpp"
#include "worker/task_runner.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/graph/text_form.hpp"

using namespace conveyor;
using namespace conveyor::actors;

namespace {

std::vector<int64_t> decode_ints(const std::string& payload) {
  std::vector<Element> out;
  auto st = decode_batch(payload, out);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  std::vector<int64_t> v;
  for (const auto& e : out)
    v.push_back(e[0].as_int64());
  return v;
}

Dataset parse(const char* text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return *d;
}

} // namespace

TEST_CASE("OFF: the whole dataset in batches, then end_of_sequence") {
  TaskRunner r{ShardingPolicy::off, Compression::none};
  REQUIRE(r.start(Dataset::range(5), nullptr).ok());
  CHECK_FALSE(r.take(1, 10, 1 << 20)); // nothing produced yet: hold
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto b = r.take(1, 3, 1 << 20);
  REQUIRE(b);
  CHECK(b->num_elements == 3);
  CHECK(b->num_chunks == 1);
  CHECK(decode_ints(b->payload) == std::vector<int64_t>{0, 1, 2});
  auto c = r.take(2, 100, 1 << 20); // another consumer gets the rest
  REQUIRE(c);
  CHECK(decode_ints(c->payload) == std::vector<int64_t>{3, 4});
  auto end = r.take(1, 100, 1 << 20);
  REQUIRE(end);
  CHECK(end->end_of_sequence);
  CHECK(end->num_chunks == 0);
}

TEST_CASE(
  "OFF: a batch counts as delivered once its consumer acknowledges it (what a drain waits for)") {
  TaskRunner r{ShardingPolicy::off, Compression::none};
  REQUIRE(r.start(Dataset::range(5), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto a = r.take(1, 3, 1 << 20);
  auto b = r.take(2, 100, 1 << 20);
  REQUIRE(a);
  REQUIRE(b);
  // The buffer is empty, but both batches may still be on the way.
  CHECK(r.buffered_elements() == 0);
  CHECK_FALSE(r.all_acknowledged());
  r.ack(1, {a->batch_seq});
  CHECK_FALSE(r.all_acknowledged());
  r.forget_unacknowledged(2); // a consumer that left: nothing waits for its acknowledgements
  CHECK(r.all_acknowledged());
  // Acknowledged batches are forgotten: nothing grows with a long OFF read.
  CHECK_FALSE(r.awaits_ack(1));
}

TEST_CASE("an endless OFF task retires: it drops its buffer, hands out nothing more, and is "
          "drained once acknowledged") {
  // What a draining worker does with an OFF task of an infinite dataset, which has no end to
  // drain to (task_actor's drain_atom).
  TaskRunner r{ShardingPolicy::off, Compression::none};
  REQUIRE(r.start(parse("range(10).repeat()"), nullptr).ok());
  CHECK(r.endless());
  CHECK(r.produce() == TaskRunner::Step::progress);
  auto a = r.take(1, 3, 1 << 20);
  REQUIRE(a);
  CHECK(decode_ints(a->payload) == std::vector<int64_t>{0, 1, 2});
  REQUIRE(r.buffered_elements() > 0);
  r.retire();
  CHECK(r.retired());
  CHECK(r.buffered_elements() == 0);
  CHECK(r.buffered_bytes() == 0);
  CHECK(r.produce() == TaskRunner::Step::buffer_full); // produces nothing more
  CHECK(r.buffered_elements() == 0);
  CHECK_FALSE(r.take(1, 10, 1 << 20)); // hands out nothing more
  CHECK_FALSE(r.take(2, 10, 1 << 20));
  CHECK_FALSE(r.all_acknowledged()); // batch a may still be on the way
  r.ack(1, {a->batch_seq});
  CHECK(r.all_acknowledged());
}

TEST_CASE("only an infinite dataset is endless: a long finite one drains to its end") {
  for (const char* finite : {"range(5)", "range(1000000000000)", "range(10).repeat(3)"}) {
    TaskRunner r{ShardingPolicy::off, Compression::none};
    REQUIRE(r.start(parse(finite), nullptr).ok());
    CHECK_MESSAGE(!r.endless(), finite);
  }
  TaskRunner r{ShardingPolicy::off, Compression::none};
  REQUIRE(r.start(parse("range(10).map(square).repeat()"), nullptr).ok());
  CHECK(r.endless());
}

TEST_CASE("the buffer is bounded and a step is bounded") {
  TaskLimits limits;
  limits.buffer_elements = 10;
  limits.step_elements = 4;
  TaskRunner r{ShardingPolicy::off, Compression::automatic, limits};
  REQUIRE(r.start(Dataset::range(100), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::progress);
  CHECK(r.buffered_elements() == 4);
  CHECK(r.produce() == TaskRunner::Step::progress);
  CHECK(r.produce() == TaskRunner::Step::buffer_full);
  CHECK(r.buffered_elements() == 10);
  REQUIRE(r.take(1, 5, 1 << 20));
  CHECK_FALSE(r.buffer_full());
  int stop_after = 0;
  CHECK(r.produce([&] { return ++stop_after >= 2; }) == TaskRunner::Step::progress);
  CHECK(r.buffered_elements() == 7);
}

// The buffer (a deque of 256-item blocks) fills and drains across its blocks, in part and
// wholly: every element still comes out once and in order.
TEST_CASE("the buffer's blocks fill and drain without losing or reordering an element") {
  TaskLimits limits;
  limits.buffer_elements = 5000;
  limits.step_elements = 700;
  TaskRunner r{ShardingPolicy::off, Compression::none, limits};
  REQUIRE(r.start(Dataset::range(30000), nullptr).ok());
  int64_t expected = 0;
  bool drained_once = false;
  for (int round = 0; round < 1000 && expected < 30000; ++round) {
    for (int s = 0; s < 1 + round % 9; ++s) // 700 to 6300 elements: up to a full buffer
      r.produce();
    // Mostly part of the buffer (a block's middle); every fifth round all of it.
    const uint32_t n = round % 5 == 4 ? 1000000u : 333u + static_cast<uint32_t>(round % 7) * 200u;
    auto b = r.take(1, n, 1 << 30);
    REQUIRE(b);
    if (b->end_of_sequence)
      break;
    for (int64_t v : decode_ints(b->payload))
      REQUIRE(v == expected++);
    drained_once = drained_once || r.buffered_elements() == 0;
  }
  CHECK(expected == 30000);
  CHECK(drained_once);
}

TEST_CASE("a batch larger than a chunk travels in chunks to the same consumer") {
  TaskLimits limits;
  limits.chunk_bytes = 1000;
  TaskRunner r{ShardingPolicy::off, Compression::none, limits};
  REQUIRE(r.start(parse("range(2).map(bytes(size=2500))"), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto first = r.take(7, 1, 1 << 20);
  REQUIRE(first);
  CHECK(first->num_chunks == 3);
  CHECK(first->chunk_index == 0);
  CHECK(first->payload.size() == 1000);
  // Another consumer is not given the rest of consumer 7's batch.
  auto other = r.take(8, 1, 1 << 20);
  REQUIRE(other);
  CHECK(other->batch_seq != first->batch_seq);
  std::string whole = first->payload;
  for (uint32_t i = 1; i < 3; ++i) {
    auto next = r.take(7, 0, 1 << 20); // continuation requests ask for no new elements
    REQUIRE(next);
    CHECK(next->batch_seq == first->batch_seq);
    CHECK(next->chunk_index == i);
    whole += next->payload;
  }
  std::vector<Element> out;
  REQUIRE(decode_batch(whole, out).ok());
  REQUIRE(out.size() == 1);
  CHECK(out[0][0].strings()[0].size() == 2500);
  auto none = r.take(7, 0, 1 << 20); // nothing pending: an empty answer at once
  REQUIRE(none);
  CHECK(none->num_chunks == 0);
}

TEST_CASE("DYNAMIC: the pipeline waits for splits and resumes") {
  TaskRunner r{ShardingPolicy::dynamic, Compression::none};
  REQUIRE(r.start(Dataset::range(10), nullptr).ok());
  REQUIRE(r.split_feed());
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
  REQUIRE(r.split_feed()->wants_splits());
  r.split_feed()->request_sent();
  r.split_feed()->deliver({Split{0, 0, 2, 5, ""}}, false, false);
  r.split_feed()->request_sent();
  r.split_feed()->deliver({}, true, false);
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto b = r.take(1, 100, 1 << 20);
  REQUIRE(b);
  CHECK(decode_ints(b->payload) == std::vector<int64_t>{2, 3, 4});
  // Per-split: the batch carries its origin; the split finishes once the consumer acks it.
  REQUIRE(b->origins.size() == 1);
  CHECK(b->origins[0].index == 0);
  CHECK(b->origins[0].first_seq == 0);
  CHECK(b->origins[0].count == 3);
  CHECK(r.take_finished().empty());
  r.ack(1, {b->batch_seq});
  CHECK(r.take_finished() == std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 0}});
}

// Issue 36: a batch cut while the pipeline had not moved past its split yet (the step ended on
// the split's last element) cannot mark that element the split's last; its consumer's reorder
// then waited for the job's finished-split log. The split's end now follows in an end mark.
TEST_CASE("DYNAMIC: a split whose last element went out before the pipeline moved past it gets an "
          "end mark with the consumer's next reply, and the last split with end_of_sequence") {
  TaskLimits limits;
  limits.step_elements = 3;
  TaskRunner r{ShardingPolicy::dynamic, Compression::none, limits};
  REQUIRE(r.start(Dataset::range(10), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
  r.split_feed()->request_sent();
  r.split_feed()->deliver({Split{0, 0, 0, 3, ""}, Split{0, 1, 3, 6, ""}}, false, false);
  CHECK(r.produce() == TaskRunner::Step::progress); // split 0 whole, not yet moved past
  auto a = r.take(1, 100, 1 << 20);
  REQUIRE(a);
  CHECK(decode_ints(a->payload) == std::vector<int64_t>{0, 1, 2});
  REQUIRE(a->origins.size() == 1);
  CHECK_FALSE(a->origins[0].split_end);             // (not known when the batch was cut)
  CHECK(r.produce() == TaskRunner::Step::progress); // past split 0: split 1's elements
  auto b = r.take(1, 100, 1 << 20);
  REQUIRE(b);
  CHECK(decode_ints(b->payload) == std::vector<int64_t>{3, 4, 5});
  REQUIRE(b->origins.size() == 2);
  CHECK(b->origins[0].index == 1);
  CHECK(b->origins[0].count == 3);
  CHECK_FALSE(b->origins[0].split_end);
  // The mark: split 0 had 3 elements; it tags none of this batch's.
  CHECK(b->origins[1].index == 0);
  CHECK(b->origins[1].count == 0);
  CHECK(b->origins[1].first_seq == 3);
  CHECK(b->origins[1].split_end);
  CHECK_FALSE(r.take(2, 100, 1 << 20)); // another consumer gets no mark of this one's splits
  r.split_feed()->request_sent();
  r.split_feed()->deliver({}, true, false);
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto end = r.take(1, 100, 1 << 20);
  REQUIRE(end);
  CHECK(end->end_of_sequence);
  REQUIRE(end->origins.size() == 1);
  CHECK(end->origins[0].index == 1);
  CHECK(end->origins[0].first_seq == 3);
  CHECK(end->origins[0].count == 0);
  CHECK(end->origins[0].split_end);
  // Marks count for no split: the acknowledgements finish both.
  r.ack(1, {a->batch_seq, b->batch_seq});
  auto finished = r.take_finished();
  std::sort(finished.begin(), finished.end());
  CHECK(finished == std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 0}, {0, 0, 1}});
}

TEST_CASE("DYNAMIC: a split that filter emptied gets an end mark of 0 elements, to whoever asks") {
  TaskRunner r{ShardingPolicy::dynamic, Compression::none};
  REQUIRE(r.start(parse("range(10).filter(mod_eq(m=100, r=0))"), nullptr).ok());
  REQUIRE(r.per_split());
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
  r.split_feed()->request_sent();
  r.split_feed()->deliver({Split{0, 0, 5, 8, ""}}, false, false);
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split); // split 0 made nothing
  auto b = r.take(7, 100, 1 << 20);
  REQUIRE(b); // an empty reply, for the mark
  CHECK(b->num_elements == 0);
  REQUIRE(b->origins.size() == 1);
  CHECK(b->origins[0].first_seq == 0);
  CHECK(b->origins[0].count == 0);
  CHECK(b->origins[0].split_end);
  CHECK_FALSE(r.take(7, 100, 1 << 20)); // then nothing: the request is held
}

TEST_CASE("DYNAMIC concatenation: per-split, each element's origin names its source") {
  TaskRunner r{ShardingPolicy::dynamic, Compression::none};
  REQUIRE(r.start(Dataset::range(10).concatenate(Dataset::range(100, 110)), nullptr).ok());
  CHECK(r.per_split());
  REQUIRE(r.split_feeds().size() == 2);
  auto& a = *r.split_feeds()[0];
  auto& b = *r.split_feeds()[1];
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
  REQUIRE(a.wants_splits());
  a.request_sent();
  a.deliver({Split{0, 0, 2, 4, "", 0, 0}}, false, false);
  r.produce(); // (its elements, then `a` asks again)
  REQUIRE(a.wants_splits());
  a.request_sent();
  a.deliver({}, true, false);
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split); // then `b`
  REQUIRE(b.wants_splits());
  b.request_sent();
  // The same (epoch, index) as `a`'s split: told apart by the source.
  b.deliver({Split{0, 0, 5, 7, "", 0, 1}}, false, false);
  r.produce();
  REQUIRE(b.wants_splits());
  b.request_sent();
  b.deliver({}, true, false);
  CHECK(r.produce() == TaskRunner::Step::ended);
  auto batch = r.take(1, 100, 1 << 20);
  REQUIRE(batch);
  CHECK(decode_ints(batch->payload) == std::vector<int64_t>{2, 3, 105, 106});
  REQUIRE(batch->origins.size() == 2);
  CHECK(batch->origins[0].source == 0);
  CHECK(batch->origins[0].count == 2);
  CHECK(batch->origins[0].split_end);
  CHECK(batch->origins[1].source == 1);
  CHECK(batch->origins[1].index == 0);
  CHECK(batch->origins[1].first_seq == 0);
  CHECK(batch->origins[1].count == 2);
  CHECK(r.take_finished().empty());
  r.ack(1, {batch->batch_seq});
  auto finished = r.take_finished();
  std::sort(finished.begin(), finished.end());
  CHECK(finished == std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 0}, {1, 0, 0}});
}

TEST_CASE("DYNAMIC zip: not per-split, elements carry no origin") {
  TaskRunner r{ShardingPolicy::dynamic, Compression::none};
  REQUIRE(r.start(Dataset::zip({Dataset::range(10), Dataset::range(10)}), nullptr).ok());
  CHECK_FALSE(r.per_split());
}

TEST_CASE("errors: a bad dataset fails start, a failing pipeline fails after its buffer") {
  TaskRunner bad{ShardingPolicy::off, Compression::none};
  auto st = bad.start(Dataset::range(3).map("no_such_function"), nullptr);
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("no_such_function") != std::string::npos);

  TaskRunner r{ShardingPolicy::off, Compression::none};
  // bytes(size=-1) fails on the first element.
  REQUIRE(r.start(parse("range(3).map(bytes(size=-1))"), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::failed);
  CHECK(r.failed());
  CHECK(r.error().message().find("`size` must be >= 0") != std::string::npos);
  CHECK_FALSE(r.take(1, 10, 1 << 20)); // the actor answers with error()
}

TEST_CASE(
  "batches are packed by encoded size: exactly-1 MiB elements never split into 4 MiB + 60 B") {
  // Inline path (no bulk channel): 64 KiB elements, 4 MiB requests.
  TaskLimits limits;
  limits.bulk_min_bytes = std::size_t{1} << 30; // keep everything inline
  TaskRunner inl{ShardingPolicy::off, Compression::none, limits};
  REQUIRE(inl.start(parse("range(128).map(bytes(size=65536))"), nullptr).ok());
  while (inl.produce() == TaskRunner::Step::progress) {
  }
  auto b = inl.take(1, 1000, msg::kMaxChunkBytes);
  REQUIRE(b);
  CHECK(b->num_chunks == 1); // fits one message
  CHECK(b->payload.size() <= msg::kMaxChunkBytes);
  CHECK(b->num_elements == 63); // 64 x (64 KiB + a few bytes) would exceed 4 MiB
}

TEST_CASE("large elements are encoded once when produced and taken as bulk frames") {
  TaskRunner r{ShardingPolicy::off, Compression::none};
  REQUIRE(r.start(parse("range(5).map(bytes(size=1048576))"), nullptr).ok());
  while (r.produce() == TaskRunner::Step::progress) {
  }
  std::vector<GatherBuffer> frames;
  auto b = r.take(1, 100, 3u << 20, &frames, 77);
  REQUIRE(b);
  CHECK(b->bulk_frames == 2); // two 1 MiB frames fit 3 MiB, a third does not
  CHECK(b->num_elements == 2);
  CHECK(b->payload.empty());
  REQUIRE(frames.size() == 2);
  for (uint32_t i = 0; i < 2; ++i) {
    bulk::FrameHeader h;
    REQUIRE_FALSE(bulk::read_frame_header(frames[i].own.data(), bulk::kFrameHeaderBytes, h));
    CHECK(h.task == 77);
    CHECK(h.batch_seq == b->batch_seq);
    CHECK(h.index == i);
    CHECK(h.count == 2);
    CHECK(h.length == frames[i].size() - bulk::kFrameHeaderBytes);
    // Encoding copied no payload byte: the tensor is a view of its storage.
    REQUIRE(frames[i].views.size() == 1);
    CHECK(frames[i].views[0].size == 1048576);
    CHECK(frames[i].own.size() < 100);
    const std::vector<char> whole = frames[i].flatten();
    std::vector<Element> out;
    REQUIRE(decode_batch({whole.data() + bulk::kFrameHeaderBytes, h.length}, out).ok());
    REQUIRE(out.size() == 1);
    CHECK(out[0][0].byte_size() == 1048576);
  }
  // Without a bulk channel the same elements go inline, one per batch (chunked above 4 MiB).
  auto inl = r.take(2, 100, 3u << 20);
  REQUIRE(inl);
  CHECK(inl->bulk_frames == 0);
  CHECK(inl->num_elements == 1);
  std::vector<Element> out;
  REQUIRE(decode_batch(inl->payload, out).ok());
  CHECK(out.size() == 1);
}

TEST_CASE("large elements are encoded ahead only within a window - the rest when taken") {
  auto drain = [](TaskRunner& r, std::size_t expect_per_take) {
    std::size_t got = 0;
    for (int guard = 0; guard < 100; ++guard) {
      std::vector<GatherBuffer> frames;
      auto b = r.take(1, 100, 64u << 20, &frames, 5);
      REQUIRE(b);
      if (b->end_of_sequence)
        break;
      REQUIRE(frames.size() == b->bulk_frames);
      CHECK(frames.size() <= expect_per_take);
      for (auto& frame : frames) {
        const std::vector<char> f = frame.flatten();
        std::vector<Element> out;
        REQUIRE(decode_batch(
                  {f.data() + bulk::kFrameHeaderBytes, f.size() - bulk::kFrameHeaderBytes}, out)
                  .ok());
        REQUIRE(out.size() == 1);
        CHECK(out[0][0].byte_size() == 1048576);
      }
      got += frames.size();
      r.produce();
    }
    return got;
  };
  SUBCASE("default window: 4 MiB of frames encoded ahead, about 4 MiB taken per request") {
    TaskRunner r{ShardingPolicy::off, Compression::none};
    REQUIRE(r.start(parse("range(10).map(bytes(size=1048576))"), nullptr).ok());
    while (r.produce() == TaskRunner::Step::progress) {
    }
    CHECK(r.frames_encoded_ahead() == 4); // 4 x (1 MiB + a header) reach 4 MiB
    CHECK(drain(r, 3) == 10);             // 3 x (1 MiB + a header) + another exceed 4 MiB
    CHECK(r.frames_encoded_ahead() == 0);
  }
  SUBCASE("a window smaller than a frame still encodes and takes 2 at a time") {
    TaskLimits limits;
    limits.bulk_encode_ahead_bytes = 1;
    TaskRunner r{ShardingPolicy::off, Compression::none, limits};
    REQUIRE(r.start(parse("range(7).map(bytes(size=1048576))"), nullptr).ok());
    while (r.produce() == TaskRunner::Step::progress) {
    }
    CHECK(r.frames_encoded_ahead() == 2);
    CHECK(drain(r, 2) == 7);
  }
  SUBCASE("elements not encoded ahead still go inline without a bulk channel") {
    TaskLimits limits;
    limits.bulk_encode_ahead_bytes = 1;
    TaskRunner r{ShardingPolicy::off, Compression::none, limits};
    REQUIRE(r.start(parse("range(4).map(bytes(size=1048576))"), nullptr).ok());
    while (r.produce() == TaskRunner::Step::progress) {
    }
    int inline_elements = 0;
    for (int i = 0; i < 4; ++i) {
      auto b = r.take(1, 100, 64u << 20);
      REQUIRE(b);
      CHECK(b->bulk_frames == 0);
      std::vector<Element> out;
      REQUIRE(decode_batch(b->payload, out).ok());
      REQUIRE(out.size() == 1);
      CHECK(out[0][0].byte_size() == 1048576);
      inline_elements += 1;
    }
    CHECK(inline_elements == 4);
    CHECK(r.frames_encoded_ahead() == 0);
  }
}

TEST_CASE("frame headers: hostile lengths and indexes are refused") {
  std::vector<char> f(bulk::kFrameHeaderBytes + 4);
  bulk::write_frame_header(f, bulk::FrameHeader{1, 2, 0, 1, 0});
  bulk::FrameHeader h;
  CHECK_FALSE(bulk::read_frame_header(f.data(), f.size() - 4, h));
  CHECK(h.length == 4);
  std::vector<char> huge(bulk::kFrameHeaderBytes);
  bulk::write_frame_header(huge, bulk::FrameHeader{1, 2, 0, 1, 0});
  for (int i = 0; i < 8; ++i)
    huge[32 + i] = static_cast<char>(0xff); // a length of 2^64 - 1
  auto bad = bulk::read_frame_header(huge.data(), huge.size(), h);
  REQUIRE(bad);
  CHECK(bad->find("payload bytes") != std::string::npos);
  bulk::write_frame_header(f, bulk::FrameHeader{1, 2, 3, 2, 0}); // index 3 of 2
  CHECK(bulk::read_frame_header(f.data(), bulk::kFrameHeaderBytes, h));
}

// DYNAMIC with the cross-trainer cache: each produced element counts once for its split, for the
// trainer whose read made it (moved it into the cache); another trainer's read of the same
// element is sharing, not a delivery. So the splits finish when that trainer acknowledges, and
// go back to the job when it reconnected without acknowledging.
TEST_CASE(
  "DYNAMIC + cross-trainer cache: a split counts the first trainer's read of each element") {
  auto setup = [](TaskRunner& r) {
    REQUIRE(r.enable_cross_trainer_cache().ok());
    REQUIRE(r.start(Dataset::range(10), nullptr).ok());
    CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
    r.split_feed()->request_sent();
    r.split_feed()->deliver({Split{0, 0, 2, 5, ""}, Split{0, 1, 5, 7, ""}}, false, false);
    r.split_feed()->request_sent();
    r.split_feed()->deliver({}, true, false);
    CHECK(r.produce() == TaskRunner::Step::ended);
  };
  TaskRunner r{ShardingPolicy::dynamic, Compression::none};
  setup(r);
  auto a = r.take(1, 100, 1 << 20, nullptr, 0, "trainer A");
  REQUIRE(a);
  CHECK(decode_ints(a->payload) == std::vector<int64_t>{2, 3, 4, 5, 6});
  CHECK(a->origins.empty()); // a trainer's stream is the cache's sequence
  auto b = r.take(2, 100, 1 << 20, nullptr, 0, "trainer B");
  REQUIRE(b);
  CHECK(decode_ints(b->payload) == std::vector<int64_t>{2, 3, 4, 5, 6});
  r.ack(2, {b->batch_seq}); // B's read made nothing
  CHECK(r.take_finished().empty());
  SUBCASE("the first reader acknowledges: both splits finish") {
    r.ack(1, {a->batch_seq});
    auto finished = r.take_finished();
    std::sort(finished.begin(), finished.end());
    CHECK(finished == std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 0}, {0, 0, 1}});
  }
  SUBCASE("the first reader reconnected without acknowledging: both splits go back") {
    r.consumer_reconnected(1);
    CHECK(r.take_lost().size() == 2);
  }
}

// Whole-epoch sharing (beyond the reference): a finite dataset; each trainer reads every element
// once, the task makes each once, and a trainer at the end waits while the cache is full of
// elements the other has not read, instead of either skipping.
TEST_CASE(
  "cross-trainer cache, whole epoch: every trainer reads the finite epoch once, then its end") {
  TaskLimits limits;
  limits.cross_trainer_cache_bytes = 3 * 8; // three int64 elements
  TaskRunner r{ShardingPolicy::off, Compression::none, limits};
  REQUIRE(r.enable_cross_trainer_cache(true).ok());
  REQUIRE(r.start(Dataset::range(10), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::ended);
  std::map<std::string, std::vector<int64_t>> got;
  auto take = [&](msg::consumer_id_t c, const std::string& trainer, uint32_t n) {
    auto b = r.take(c, n, 1 << 20, nullptr, 0, trainer);
    if (!b)
      return std::string{"held"};
    if (b->end_of_sequence)
      return std::string{"end"};
    for (auto v : decode_ints(b->payload))
      got[trainer].push_back(v);
    return std::string{"batch"};
  };
  CHECK(take(1, "a", 1) == "batch"); // both trainers known before anything is evicted
  CHECK(take(2, "b", 1) == "batch");
  CHECK(take(1, "a", 100) == "batch"); // 1, 2, and 3 (evicting 0, which "b" read)
  CHECK(got["a"] == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(take(1, "a", 100) == "held");  // full of what "b" has not read: "a" waits
  CHECK(take(2, "b", 100) == "batch"); // 1, 2, 3, then new ones until "a" holds it back
  CHECK(take(1, "a", 100) == "batch");
  for (int i = 0; i < 20; ++i) {
    take(1, "a", 2);
    take(2, "b", 3);
  }
  CHECK(take(1, "a", 100) == "end");
  CHECK(take(2, "b", 100) == "end");
  const auto all = std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(got["a"] == all);
  CHECK(got["b"] == all);
  CHECK(r.cross_trainer_cache()->misses() == 10); // each element made (moved into it) once
  CHECK(r.cross_trainer_cache()->skipped("b") == 0);
}

// Whole-epoch sharing over range(n), all produced, with a cache of `cache_elements` int64s.
static std::unique_ptr<TaskRunner> whole_epoch_runner(int64_t cache_elements, int64_t n) {
  TaskLimits limits;
  limits.cross_trainer_cache_bytes = cache_elements * 8;
  auto r = std::make_unique<TaskRunner>(ShardingPolicy::off, Compression::none, limits);
  REQUIRE(r->enable_cross_trainer_cache(true).ok());
  REQUIRE(r->start(Dataset::range(n), nullptr).ok());
  CHECK(r->produce() == TaskRunner::Step::ended);
  return r;
}

TEST_CASE("cross-trainer cache, whole epoch: a trainer whose readers left holds nobody back") {
  auto owned = whole_epoch_runner(2, 6);
  TaskRunner& r = *owned;
  REQUIRE(r.take(1, 1, 1 << 20, nullptr, 0, "a"));       // 0
  REQUIRE(r.take(2, 1, 1 << 20, nullptr, 0, "b"));       // 0
  REQUIRE(r.take(3, 1, 1 << 20, nullptr, 0, "b"));       // 1: a second reader of trainer "b"
  auto ahead = r.take(1, 100, 1 << 20, nullptr, 0, "a"); // 1, 2, 3 (evicting 0 and 1)
  REQUIRE(ahead);
  CHECK(decode_ints(ahead->payload) == std::vector<int64_t>{1, 2, 3});
  CHECK_FALSE(r.take(1, 1, 1 << 20, nullptr, 0, "a")); // "b" has not read 2: "a" waits
  CHECK_FALSE(r.reader_left(2));                       // reader 3 still reads as "b"
  CHECK(r.reader_left(3));                             // "b" is gone
  auto rest = r.take(1, 100, 1 << 20, nullptr, 0, "a");
  REQUIRE(rest);
  CHECK(decode_ints(rest->payload) == std::vector<int64_t>{4, 5});
}

// Whole-epoch sharing: the job registers trainers before their first request reaches the task
// (cache_trainers), so the cache keeps what they have not read; a trainer the job says left
// holds nobody back.
TEST_CASE(
  "cross-trainer cache, whole epoch: trainers the job registers are kept for, until they leave") {
  auto owned = whole_epoch_runner(2, 6);
  TaskRunner& r = *owned;
  CHECK_FALSE(r.cache_trainers({"a", "b"}, {})); // none left
  auto a = r.take(1, 100, 1 << 20, nullptr, 0, "a");
  REQUIRE(a);
  CHECK(decode_ints(a->payload) == std::vector<int64_t>{0, 1}); // "b" has read neither
  CHECK_FALSE(r.take(1, 100, 1 << 20, nullptr, 0, "a"));
  auto b = r.take(2, 1, 1 << 20, nullptr, 0, "b"); // "b" starts at 0: nothing was evicted
  REQUIRE(b);
  CHECK(decode_ints(b->payload) == std::vector<int64_t>{0});
  CHECK(r.cache_trainers({}, {"b"})); // "b" left the job
  auto rest = r.take(1, 100, 1 << 20, nullptr, 0, "a");
  REQUIRE(rest);
  CHECK(decode_ints(rest->payload) == std::vector<int64_t>{2, 3, 4, 5});
  // A trainer the job registers only now would miss 0..3: its first request is refused (its
  // own error; the task goes on).
  r.cache_trainers({"late"}, {});
  CHECK_FALSE(r.take(3, 100, 1 << 20, nullptr, 0, "late"));
  CHECK(r.refusal(3).code() == ErrorCode::failed_precondition);
  CHECK_FALSE(r.failed());
}

// A split handed back while the pipeline is still producing it (its consumer reconnected) may
// come back to the same task: the end of the first run is not the end of the second, and the
// first run's copies do not count for it. Before, the second run's split finished the moment it
// started (nothing produced, nothing to acknowledge), so a later loss of its elements could not
// bring it back; and under whole-epoch sharing it never finished (a simulator soak, seed 274).
TEST_CASE(
  "DYNAMIC: a split handed back mid-production and run again finishes with its second run") {
  TaskLimits limits;
  limits.step_elements = 1; // one element per produce(): the pipeline stays inside the split
  TaskRunner r{ShardingPolicy::dynamic, Compression::none, limits};
  REQUIRE(r.start(Dataset::range(10), nullptr).ok());
  CHECK(r.produce() == TaskRunner::Step::waiting_for_split);
  r.split_feed()->request_sent();
  r.split_feed()->deliver({Split{0, 0, 2, 5, ""}}, false, false);
  CHECK(r.produce() == TaskRunner::Step::progress); // 2
  auto first = r.take(1, 100, 1 << 20);
  REQUIRE(first);
  r.consumer_reconnected(1); // its batch may be lost: split 0 goes back to the job
  REQUIRE(r.take_lost().size() == 1);
  // The job gives it to this task again; the first run goes on meanwhile.
  r.split_feed()->request_sent();
  r.split_feed()->deliver({Split{0, 0, 2, 5, ""}}, false, false);
  r.split_feed()->request_sent();
  r.split_feed()->deliver({}, true, false);
  for (int i = 0; i < 20 && !r.ended(); ++i)
    r.produce();
  REQUIRE(r.ended());
  CHECK(r.take_finished().empty()); // nothing of the second run was acknowledged yet
  auto rest = r.take(2, 100, 1 << 20);
  REQUIRE(rest);
  CHECK(decode_ints(rest->payload) ==
        std::vector<int64_t>{3, 4, 2, 3, 4}); // first run's end, second run
  CHECK(r.take_finished().empty());
  r.ack(2, {rest->batch_seq});
  CHECK(r.take_finished() == std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 0}});
}
