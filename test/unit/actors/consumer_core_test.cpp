// ConsumerCore: credits, chunk reassembly, task loss and the end condition, without actors.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include <caf/all.hpp>

#include "consumer/consumer_core.hpp"
#include "pipeline/tensor/codec.hpp"

using namespace conveyor;
using namespace conveyor::actors;

namespace {

msg::task_list list_of(uint64_t version, std::vector<msg::task_id_t> ids, bool finished) {
  msg::task_list l;
  l.version = version;
  l.job_finished = finished;
  for (auto id : ids)
    l.tasks.push_back(msg::task_info{id, id, "w:" + std::to_string(id), {}});
  return l;
}

// Decodes what the core handed on, as a reader does.
std::vector<Element> taken(ReadyElements& ready) {
  std::vector<Element> out;
  auto st = ready.take(out);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return out;
}

msg::element_batch batch_of(std::vector<int64_t> values) {
  std::vector<Element> es;
  for (auto v : values)
    es.emplace_back(Tensor::scalar(v));
  msg::element_batch b;
  b.payload = encode_batch(es, Compression::none);
  b.num_elements = static_cast<uint32_t>(es.size());
  b.num_chunks = 1;
  return b;
}

// OFF with on_worker_loss "fail": a lost task fails the read.
ConsumerLimits failing() {
  ConsumerLimits l;
  l.fail_on_worker_loss = true;
  return l;
}

msg::element_batch end_batch() {
  msg::element_batch b;
  b.end_of_sequence = true;
  return b;
}

} // namespace

TEST_CASE("credits bound what is requested and not yet acknowledged") {
  ConsumerLimits limits;
  limits.max_outstanding = 10;
  ConsumerCore c{limits};
  auto added = c.on_task_list(list_of(1, {1, 2}, false));
  REQUIRE(added.size() == 2);
  CHECK(c.next_requests().empty()); // not connected yet
  c.on_connected(1);
  c.on_connected(2);
  auto reqs = c.next_requests();
  int64_t asked = 0;
  for (const auto& r : reqs)
    asked += r.max_elements;
  CHECK(asked == 10);
  CHECK(c.next_requests().empty()); // no credit left
  // Task 1 answers with 3 elements for a request of 5: 2 credits come back.
  ReadyElements out;
  auto r1 = reqs[0];
  REQUIRE(c.on_reply(r1, batch_of({1, 2, 3}), out).ok());
  CHECK(out.size() == 3);
  CHECK(c.outstanding() == 10 - static_cast<int64_t>(r1.max_elements) + 3);
  auto more = c.next_requests();
  int64_t asked2 = 0;
  for (const auto& r : more)
    asked2 += r.max_elements;
  CHECK(asked2 == static_cast<int64_t>(r1.max_elements) - 3);
  c.on_ack(3);
  CHECK(c.outstanding() == 10 - 3);
}

// Whole-epoch cross-trainer sharing: a trainer greets every task as soon as it is connected,
// with an empty request that needs no credit, so that the task's cache keeps what this trainer
// has not read even while its credits are all out at other tasks.
TEST_CASE("greet_tasks: each newly connected task gets one empty request, credits or not") {
  ConsumerLimits limits;
  limits.max_outstanding = 1;
  limits.greet_tasks = true;
  ConsumerCore c{limits};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto first = c.next_requests();
  REQUIRE(first.size() == 2);
  CHECK(first[0].max_elements == 0); // the greeting
  CHECK(first[1].max_elements == 1); // and the one credit
  ReadyElements out;
  REQUIRE(c.on_reply(first[0], msg::element_batch{}, out).ok());
  CHECK(c.next_requests().empty()); // greeted once
  c.on_task_list(list_of(2, {1, 2}, false));
  c.on_connected(2);
  auto greet = c.next_requests(); // no credit left, yet task 2 is greeted
  REQUIRE(greet.size() == 1);
  CHECK(greet[0].task == 2);
  CHECK(greet[0].max_elements == 0);
  REQUIRE(c.on_reply(greet[0], msg::element_batch{}, out).ok());
  CHECK(c.next_requests().empty()); // once
}

TEST_CASE("the stream ends when the job finished and every task reached its end") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  REQUIRE_FALSE(reqs.empty());
  ReadyElements out;
  for (const auto& r : reqs)
    REQUIRE(c.on_reply(r, end_batch(), out).ok());
  CHECK_FALSE(c.finished()); // the job may still get tasks (a worker may join)
  c.on_task_list(list_of(2, {1, 2}, false));
  c.on_connected(2);
  c.on_task_list(list_of(3, {1, 2}, true));
  CHECK_FALSE(c.finished()); // task 2 not drained yet
  for (const auto& r : c.next_requests())
    REQUIRE(c.on_reply(r, end_batch(), out).ok());
  CHECK(c.finished());
}

TEST_CASE("a lost task releases its requests at once - its late replies are ignored") {
  ConsumerLimits limits;
  limits.max_outstanding = 4;
  ConsumerCore c{limits};
  c.on_task_list(list_of(1, {1, 2}, false));
  c.on_connected(1);
  c.on_connected(2);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 2);
  CHECK(c.outstanding() == 4);
  c.on_task_lost(1);
  CHECK(c.outstanding() < 4);
  ReadyElements out;
  for (const auto& r : reqs)
    if (r.task == 1)
      REQUIRE(c.on_reply(r, batch_of({9}), out).ok()); // a late reply from the lost task
  CHECK(out.empty());
  // The job no longer lists task 1 and finished: the stream ends once task 2 ends.
  c.on_task_list(list_of(2, {2}, true));
  for (const auto& r : reqs)
    if (r.task == 2)
      REQUIRE(c.on_reply(r, end_batch(), out).ok());
  for (const auto& r : c.next_requests())
    REQUIRE(c.on_reply(r, end_batch(), out).ok());
  CHECK(c.finished());
}

TEST_CASE("chunks of a batch are reassembled, fetched even without credits") {
  ConsumerLimits limits;
  limits.max_outstanding = 1;
  limits.max_in_flight_per_task = 1;
  ConsumerCore c{limits};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto whole = batch_of({42});
  std::string payload = whole.payload;
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() == 1);
  msg::element_batch first;
  first.payload = payload.substr(0, 5);
  first.num_elements = 1;
  first.batch_seq = 3;
  first.chunk_index = 0;
  first.num_chunks = 2;
  ReadyElements out;
  REQUIRE(c.on_reply(reqs[0], first, out).ok());
  CHECK(out.empty());
  auto cont = c.next_requests();
  REQUIRE(cont.size() == 1);
  CHECK(cont[0].max_elements == 0); // a continuation
  msg::element_batch second = first;
  second.payload = payload.substr(5);
  second.chunk_index = 1;
  REQUIRE(c.on_reply(cont[0], second, out).ok());
  auto got = taken(out);
  REQUIRE(got.size() == 1);
  CHECK(got[0][0].as_int64() == 42);
  CHECK(c.per_worker().at("w:1") == 1);
}

TEST_CASE("a corrupt batch is data_loss naming the worker") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  auto bad = batch_of({1, 2});
  bad.payload[bad.payload.size() / 2] ^= 0x5a;
  bad.payload.resize(bad.payload.size() - 3);
  ReadyElements out;
  // Handed on encoded: the reader that decodes it gets the error.
  REQUIRE(c.on_reply(reqs[0], bad, out).ok());
  CHECK(out.size() == 2);
  std::vector<Element> got;
  auto st = out.take(got);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("w:1") != std::string::npos);
  CHECK(got.empty());
}

TEST_CASE(
  "a batch holding another number of elements than announced is data_loss where it is decoded") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  auto first = batch_of({1, 2});
  auto liar = batch_of({3, 4, 5});
  liar.num_elements = 2;
  ReadyElements out;
  REQUIRE(c.on_reply(reqs[0], first, out).ok());
  REQUIRE(c.on_reply(reqs[1], liar, out).ok());
  std::vector<Element> got;
  auto st = out.take(got);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("announced 2 elements but held 3") != std::string::npos);
  REQUIRE(got.size() == 2); // the batch before it
  CHECK(got[1][0].as_int64() == 2);
}

namespace {
std::shared_ptr<std::vector<char>> frame_of(int64_t v) {
  std::vector<Element> one{Element{Tensor::scalar(v)}};
  auto buf = std::make_shared<std::vector<char>>();
  encode_batch_into(one, Compression::none, *buf, 0);
  return buf;
}

// Task 1 of worker 1, connected, its bulk channel ready; `end`: the job's production ended.
void connect_bulk_task(ConsumerCore& core, bool end) {
  core.on_task_list(list_of(1, {1}, end));
  core.on_connected(1);
  core.set_bulk(1, true);
}

// The reply announcing batch `seq` of `frames` elements, each one a frame on the bulk channel.
msg::element_batch bulk_reply(uint64_t seq, uint32_t frames) {
  msg::element_batch b;
  b.num_elements = frames;
  b.batch_seq = seq;
  b.num_chunks = 1;
  b.bulk_frames = frames;
  return b;
}
} // namespace

TEST_CASE("bulk: frames before or after the reply complete a batch, in order - loss is data_loss") {
  ConsumerLimits limits;
  limits.fail_on_worker_loss = true; // OFF: the loss fails the read (see the continue test)
  ConsumerCore core{limits};
  connect_bulk_task(core, true);
  auto reqs = core.next_requests();
  REQUIRE_FALSE(reqs.empty());
  CHECK(reqs[0].max_bytes > msg::kMaxChunkBytes); // bulk requests are not bound to 4 MiB
  ReadyElements out;
  auto f0 = frame_of(10), f1 = frame_of(11);
  // Frame 1 arrives before the reply, frame 0 after it.
  REQUIRE(core.on_frame(1, 5, 1, 2, f1, {f1->data(), f1->size()}, out).ok());
  REQUIRE(core.on_reply(reqs[0], bulk_reply(5, 2), out).ok());
  CHECK(out.empty());
  CHECK(core.bulk_batches_waiting() == 1);
  CHECK_FALSE(core.finished());
  REQUIRE(core.on_frame(1, 5, 0, 2, f0, {f0->data(), f0->size()}, out).ok());
  auto got = taken(out);
  REQUIRE(got.size() == 2);
  CHECK(got[0][0].as_int64() == 10);
  CHECK(got[1][0].as_int64() == 11);
  CHECK(core.bulk_batches_waiting() == 0);
  // A duplicate frame is refused.
  auto again = core.on_frame(1, 5, 0, 2, f0, {f0->data(), f0->size()}, out);
  CHECK(again.ok()); // a completed batch is gone: a late duplicate starts a new one...
  CHECK(core.bulk_batches_waiting() == 1);
  // ...which a broken channel then reports as data loss, never silently.
  auto lost = core.on_bulk_lost({1}, "test");
  CHECK(lost.code() == ErrorCode::data_loss);
  CHECK(lost.message().find("1 batch(es) in flight") != std::string::npos);
}

TEST_CASE("bulk: a later batch whose frames overtook an earlier one's waits for it - a task's "
          "order holds") {
  // A TLS channel spreads its frames over several connections (net/bulk_frame.hpp), so batch
  // 6's frame can arrive before batch 5's although the worker sent it later.
  ConsumerLimits limits;
  ConsumerCore core{limits};
  connect_bulk_task(core, true);
  auto reqs = core.next_requests();
  REQUIRE(reqs.size() == 2); // two requests in flight per task
  ReadyElements out;
  REQUIRE(core.on_reply(reqs[0], bulk_reply(5, 1), out).ok());
  REQUIRE(core.on_reply(reqs[1], bulk_reply(6, 1), out).ok());
  auto f5 = frame_of(50), f6 = frame_of(60);
  REQUIRE(core.on_frame(1, 6, 0, 1, f6, {f6->data(), f6->size()}, out).ok());
  CHECK(out.empty()); // whole, but batch 5 comes first
  CHECK(core.bulk_batches_waiting() == 2);
  REQUIRE(core.on_frame(1, 5, 0, 1, f5, {f5->data(), f5->size()}, out).ok());
  auto got = taken(out);
  REQUIRE(got.size() == 2);
  CHECK(got[0][0].as_int64() == 50);
  CHECK(got[1][0].as_int64() == 60);
  CHECK(core.bulk_batches_waiting() == 0);
}

TEST_CASE("bulk, DYNAMIC: a broken channel with batches in flight is no loss: the task hears "
          "`reconnected`") {
  ConsumerLimits limits;
  ConsumerCore core{limits};
  core.set_dynamic(true);
  connect_bulk_task(core, false);
  auto reqs = core.next_requests();
  REQUIRE_FALSE(reqs.empty());
  CHECK_FALSE(reqs[0].reconnected);
  ReadyElements out;
  REQUIRE(core.on_reply(reqs[0], bulk_reply(5, 2), out).ok());
  auto f0 = frame_of(10);
  REQUIRE(core.on_frame(1, 5, 0, 2, f0, {f0->data(), f0->size()}, out).ok()); // 1 of 2 frames
  CHECK(core.bulk_batches_waiting() == 1);
  REQUIRE(core.on_bulk_lost({1}, "test").ok());
  CHECK(core.bulk_batches_waiting() == 0);
  CHECK(out.empty());
  // The next request tells the task, which hands the batch's splits back; nothing was acked.
  auto next = core.next_requests();
  REQUIRE_FALSE(next.empty());
  CHECK(next[0].reconnected);
  CHECK(next[0].acks.empty());
  CHECK(next[0].max_elements > 0); // its credits came back
}

TEST_CASE(
  "bulk: frames of a batch whose reply will never be taken do not hold up the stream's end") {
  // Seen in the simulator (seed 51319): a reply and its frame held by a partition arrive after
  // the request was given up; the frame waited for an announcement that never came, forever.
  ConsumerCore core{ConsumerLimits{}};
  core.set_dynamic(true);
  connect_bulk_task(core, true);
  auto reqs = core.next_requests();
  REQUIRE(reqs.size() == 2);
  ReadyElements out;
  core.on_request_failed(reqs[0]); // (a timeout)
  // Its frame comes while request 1 is in flight (a frame may overtake its reply): it waits...
  auto f5 = frame_of(50);
  REQUIRE(core.on_frame(1, 5, 0, 1, f5, {f5->data(), f5->size()}, out).ok());
  CHECK(core.bulk_batches_waiting() == 1);
  REQUIRE(core.on_reply(reqs[0], bulk_reply(5, 1), out).ok()); // the late reply: not taken
  // ...until no request to the task is in flight: then nothing can announce it.
  REQUIRE(core.on_reply(reqs[1], end_batch(), out).ok());
  CHECK(core.bulk_batches_waiting() == 0);
  // A frame that comes later still, with nothing in flight, is dropped at once.
  auto f7 = frame_of(70);
  REQUIRE(core.on_frame(1, 7, 0, 1, f7, {f7->data(), f7->size()}, out).ok());
  CHECK(core.bulk_batches_waiting() == 0);
  CHECK(out.empty());
  CHECK(core.finished());
}

TEST_CASE(
  "bulk: a batch without its reply below an announced one is dropped (replies come in order)") {
  ConsumerLimits limits;
  limits.max_in_flight_per_task = 3;
  ConsumerCore core{limits};
  core.set_dynamic(true);
  connect_bulk_task(core, true);
  auto reqs = core.next_requests();
  REQUIRE(reqs.size() == 3);
  ReadyElements out;
  core.on_request_failed(reqs[0]);
  auto f5 = frame_of(50), f6 = frame_of(60);
  REQUIRE(core.on_frame(1, 5, 0, 1, f5, {f5->data(), f5->size()}, out).ok()); // request 0's
  REQUIRE(core.on_reply(reqs[1], bulk_reply(6, 1), out).ok()); // request 2 still in flight
  CHECK(core.bulk_batches_waiting() == 1);                     // batch 6 only
  REQUIRE(core.on_frame(1, 6, 0, 1, f6, {f6->data(), f6->size()}, out).ok());
  auto got = taken(out);
  REQUIRE(got.size() == 1);
  CHECK(got[0][0].as_int64() == 60);
}

TEST_CASE("a reply that comes after its request timed out: DYNAMIC drops it, OFF fails loudly if "
          "it held elements") {
  for (bool dynamic : {true, false}) {
    CAPTURE(dynamic);
    ConsumerLimits limits;
    limits.fail_on_worker_loss = true;
    limits.max_in_flight_per_task = 3;
    ConsumerCore c{limits};
    c.set_dynamic(dynamic);
    c.on_task_list(list_of(1, {1}, false));
    c.on_connected(1);
    auto reqs = c.next_requests();
    REQUIRE(reqs.size() >= 2);
    c.on_request_failed(reqs[0]); // timed out
    c.on_request_failed(reqs[1]);
    ReadyElements out;
    CHECK(c.on_reply(reqs[1], msg::element_batch{}, out).ok()); // late, empty: nothing lost
    auto late = c.on_reply(reqs[0], batch_of({1, 2}), out);
    CHECK(out.empty());
    if (dynamic) {
      CHECK(late.ok()); // the task hands the batch's splits out again (`reconnected`)
    } else {
      CHECK(late.code() == ErrorCode::data_loss);
      CHECK(late.message().find("after it had timed out, with 2 element(s)") != std::string::npos);
    }
  }
}

TEST_CASE("a lost task's error names the job's sharding policy, not always OFF") {
  for (auto policy :
       {ShardingPolicy::off, ShardingPolicy::data, ShardingPolicy::file, ShardingPolicy::hint}) {
    CAPTURE(to_string(policy));
    { // the connection lost with elements in flight
      ConsumerCore c{failing()};
      c.set_policy(policy);
      c.on_task_list(list_of(1, {1}, false));
      c.on_connected(1);
      REQUIRE_FALSE(c.next_requests().empty());
      c.on_disconnected(1);
      REQUIRE_FALSE(c.error().ok());
      CHECK(c.error().message().find(std::string{"cannot be read again ("} + to_string(policy) +
                                     ")") != std::string::npos);
    }
    { // the task gone from the job's list before its end
      ConsumerCore c{failing()};
      c.set_policy(policy);
      c.on_task_list(list_of(1, {1}, false));
      c.on_task_list(list_of(2, {}, false));
      REQUIRE_FALSE(c.error().ok());
      CHECK(c.error().message().find(std::string{"("} + to_string(policy) +
                                     ": each worker serves its own") != std::string::npos);
    }
  }
}

TEST_CASE("OFF, fail: a task started again after serving part of its stream fails the read") {
  // Seen in the simulator (seed 62718): a worker stopped its tasks while the dispatcher was down
  // and the restarted job had them started again. The new actor serves the dataset again from
  // its start: read on, the consumer would repeat what it had and lose the rest silently.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  // Actors that end at once: only their identities matter (which actor serves the task). (The
  // unused argument: CAF 0.17.6 dereferences a null argument tuple for a function spawned
  // without arguments, which UBSan reports.)
  auto actor = [&] { return caf::actor_cast<msg::task_actor>(sys.spawn([](int) {}, 0)); };
  auto first = actor(), second = actor();
  auto listing = [](uint64_t version, const msg::task_actor& handle) {
    auto l = list_of(version, {}, false);
    l.tasks.push_back(msg::task_info{1, 1, "w:1", handle});
    return l;
  };
  SUBCASE("before it served anything: read from the new actor's start, nothing lost") {
    ConsumerCore c{ConsumerLimits{}};
    c.on_task_list(listing(1, first));
    CHECK(c.on_task_list(listing(2, second)).size() == 1);
    CHECK(c.error().ok());
  }
  SUBCASE("after part of it: unavailable, naming the task and what it served") {
    ConsumerCore c{failing()};
    c.on_task_list(listing(1, first));
    c.on_connected(1);
    auto reqs = c.next_requests();
    REQUIRE_FALSE(reqs.empty());
    ReadyElements out;
    REQUIRE(c.on_reply(reqs[0], batch_of({1, 2, 3}), out).ok());
    c.on_task_list(listing(2, second));
    CHECK(c.error().code() == ErrorCode::unavailable);
    CHECK(c.error().message().find(
            "task 1 on worker w:1 was started again after it served 3 element(s)") !=
          std::string::npos);
  }
  SUBCASE(
    "continue (the default): the old copy counts as lost, the new actor is read from its start") {
    ConsumerCore c{ConsumerLimits{}};
    c.on_task_list(listing(1, first));
    c.on_connected(1);
    auto reqs = c.next_requests();
    REQUIRE_FALSE(reqs.empty());
    ReadyElements out;
    REQUIRE(c.on_reply(reqs[0], batch_of({1, 2, 3}), out).ok());
    auto added = c.on_task_list(listing(2, second));
    CHECK(c.error().ok());
    REQUIRE(added.size() == 1); // the caller connects to the new actor
    CHECK(c.lost_tasks() == 1);
    auto warnings = c.take_warnings();
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("task 1 on worker w:1 was started again after it served 3 element(s)") !=
          std::string::npos);
    CHECK(warnings[0].find("on_worker_loss \"continue\"") != std::string::npos);
    c.on_connected(1);
    CHECK_FALSE(c.next_requests().empty()); // asked from its start
  }
  SUBCASE("DYNAMIC: the restored job handed its splits out again - read on") {
    ConsumerCore c{ConsumerLimits{}};
    c.set_dynamic(true);
    c.on_task_list(listing(1, first));
    c.on_connected(1);
    auto reqs = c.next_requests();
    ReadyElements out;
    REQUIRE(c.on_reply(reqs[0], batch_of({1, 2, 3}), out).ok());
    CHECK(c.on_task_list(listing(2, second)).size() == 1);
    CHECK(c.error().ok());
  }
}

TEST_CASE("OFF: batches are acknowledged too, and a retired task leaves without failing the read") {
  ConsumerCore c{failing()}; // OFF, on_worker_loss "fail"
  c.on_task_list(list_of(1, {1, 2}, false));
  c.on_connected(1);
  c.on_connected(2);
  auto reqs = c.next_requests();
  const ConsumerCore::Request* to_1 = nullptr;
  for (const auto& r : reqs)
    if (r.task == 1 && !to_1)
      to_1 = &r;
  REQUIRE(to_1);
  ReadyElements out;
  auto b = batch_of({1, 2});
  b.batch_seq = 7;
  REQUIRE(c.on_reply(*to_1, b, out).ok());
  // The next request to task 1 carries the acknowledgement (a draining worker waits for it).
  bool acked = false;
  auto more = c.next_requests();
  for (const auto& r : more)
    acked = acked || (r.task == 1 && r.acks == std::vector<uint64_t>{7});
  for (const auto& r : reqs) // (a request may have carried it already)
    acked = acked || (r.task == 1 && r.acks == std::vector<uint64_t>{7});
  CHECK(acked);
  // Task 1 retires: it is asked no more, and neither its broken connection nor its leaving the
  // list fails the read.
  msg::element_batch retired;
  retired.retired = true;
  for (const auto* sent : {&reqs, &more})
    for (const auto& r : *sent)
      if (r.task == 1 && &r != to_1)
        REQUIRE(c.on_reply(r, retired, out).ok());
  if (!c.retired(1)) {
    auto again = c.next_requests();
    for (const auto& r : again)
      if (r.task == 1)
        REQUIRE(c.on_reply(r, retired, out).ok());
  }
  REQUIRE(c.retired(1));
  // It acknowledges the mark with a request for nothing (its draining worker waits for that),
  // again if that request failed, and then asks it no more.
  const auto to_task_1 = [&] {
    std::vector<ConsumerCore::Request> sent;
    for (const auto& r : c.next_requests())
      if (r.task == 1)
        sent.push_back(r);
    return sent;
  };
  auto mark_ack = to_task_1();
  REQUIRE(mark_ack.size() == 1);
  CHECK(mark_ack[0].retired_ack);
  CHECK(mark_ack[0].max_elements == 0);
  c.on_request_failed(mark_ack[0]); // (timed out)
  mark_ack = to_task_1();
  REQUIRE(mark_ack.size() == 1);
  CHECK(mark_ack[0].retired_ack);
  REQUIRE(c.on_reply(mark_ack[0], retired, out).ok()); // (the answer repeats the mark)
  CHECK(to_task_1().empty());
  c.on_disconnected(1);
  CHECK(c.error().ok());
  c.on_task_list(list_of(2, {2}, false));
  CHECK(c.error().ok());
  // Task 2 did not retire: losing it with requests in flight fails the read (OFF).
  c.on_disconnected(2);
  CHECK_FALSE(c.error().ok());
}

// DYNAMIC: a re-issued split repeats elements already received; they are dropped by their
// origins before anything is decoded, and the reader gets each element once.
TEST_CASE(
  "elements of a re-issued split already received are dropped, the rest decoded by the reader") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 2);
  auto first = batch_of({0, 1, 2});
  first.origins = {msg::origin_run{0, 3, 0, 3}};
  auto again = batch_of({1, 2, 3});
  again.origins = {msg::origin_run{0, 3, 1, 3}};
  ReadyElements out;
  REQUIRE(c.on_reply(reqs[0], first, out).ok());
  REQUIRE(c.on_reply(reqs[1], again, out).ok());
  CHECK(out.size() == 4);
  CHECK(c.elements_received() == 4);
  std::vector<int64_t> values;
  for (auto& e : taken(out))
    values.push_back(e[0].as_int64());
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3});
  // Origins that tag another number of elements than the batch announces: data_loss at once.
  auto reqs2 = c.next_requests();
  REQUIRE_FALSE(reqs2.empty());
  auto bad = batch_of({7, 8});
  bad.origins = {msg::origin_run{0, 4, 0, 3}};
  auto st = c.on_reply(reqs2[0], bad, out);
  CHECK(st.code() == ErrorCode::data_loss);
}

// A per-split concatenation: splits of two sources share (epoch, index); only the source tells
// them apart, so elements of `b`'s split 0 are not taken for repeats of `a`'s.
TEST_CASE("repeats are told apart by source: the same (epoch, index, seq) of two sources is kept") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 2);
  auto both = batch_of({0, 1, 100, 101});
  both.origins = {msg::origin_run{0, 0, 0, 2, false, 0}, msg::origin_run{0, 0, 0, 2, false, 1}};
  auto again = batch_of({101, 102});
  again.origins = {msg::origin_run{0, 0, 1, 2, false, 1}}; // b's split re-read elsewhere
  ReadyElements out;
  REQUIRE(c.on_reply(reqs[0], both, out).ok());
  REQUIRE(c.on_reply(reqs[1], again, out).ok());
  std::vector<int64_t> values;
  for (auto& e : taken(out))
    values.push_back(e[0].as_int64());
  CHECK(values == std::vector<int64_t>{0, 1, 100, 101, 102});
}

// The reader's side: one element at a time, decoded into the reader's element; a corrupt batch
// ends the stream at its bad element (what came before was handed out, nothing after is).
TEST_CASE("ReadyElements hands out one element at a time and stops at a corrupt one") {
  ReadyElements ready;
  ready.add_encoded(batch_of({0, 1}).payload, 2, {}, "worker a");
  ready.add(Element{Tensor::scalar(int64_t{2})});
  ready.add_encoded(batch_of({3, 4, 5}).payload, 3, {true, false, true}, "worker b"); // 4: a repeat
  std::string bad = batch_of({6, 7, 8}).payload;
  bad[24 + 12 + 2] = 9; // its second element's dtype (after the 24-byte header): unknown
  ready.add_encoded(bad, 3, {}, "worker c");
  ready.add_encoded(batch_of({9}).payload, 1, {}, "worker d");
  CHECK(ready.size() == 9);
  std::vector<int64_t> got;
  Element e;
  Status st;
  for (int i = 0; i < 20; ++i) {
    bool one = false;
    st = ready.next(e, one);
    if (!st.ok() || !one)
      break;
    got.push_back(e[0].as_int64());
  }
  CHECK(got == std::vector<int64_t>{0, 1, 2, 3, 5, 6});
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("worker c") != std::string::npos);
  CHECK(ready.empty());
  bool one = true;
  CHECK(ready.next(e, one).ok());
  CHECK_FALSE(one);
}

TEST_CASE(
  "ReadyElements: an empty batch buffer announced to hold elements is data_loss, not nothing") {
  ReadyElements ready;
  ready.add_encoded(std::string{}, 2, {}, "worker a");
  CHECK(ready.size() == 2);
  Element e;
  bool got = true;
  Status st = ready.next(e, got);
  CHECK_FALSE(got);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("worker a") != std::string::npos);
}

TEST_CASE("OFF, continue (the default): a lost worker's task is counted and warned about once, the "
          "read goes on") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1, 2, 3}, false));
  for (msg::task_id_t t : {1, 2, 3})
    c.on_connected(t);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 3);
  ReadyElements out;
  for (const auto& r : reqs)
    if (r.task == 3)
      REQUIRE(c.on_reply(r, batch_of({7}), out).ok());
  // Worker 1 dies: its connection breaks with a request in flight, then the job drops its task.
  c.on_disconnected(1);
  CHECK(c.error().ok());
  CHECK(c.lost_tasks() == 1);
  c.on_task_list(list_of(2, {2, 3}, false));
  CHECK(c.error().ok());
  CHECK(c.lost_tasks() == 1); // the same loss: counted once
  // Worker 2 leaves: its remaining copy is lost all the same.
  c.on_task_list(list_of(3, {3}, false));
  CHECK(c.error().ok());
  CHECK(c.lost_tasks() == 2);
  auto warnings = c.take_warnings();
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("lost the connection to worker w:1 (task 1)") != std::string::npos);
  CHECK(warnings[1].find("lost task 2 on worker w:2 before it reached its end") !=
        std::string::npos);
  CHECK(c.take_warnings().empty()); // each said once
  // A task added later (a new worker) is read too.
  auto added = c.on_task_list(list_of(4, {3, 4}, false));
  REQUIRE(added.size() == 1);
  CHECK(added[0].task == 4);
  c.on_connected(4);
  bool asks_4 = false;
  for (const auto& r : c.next_requests())
    asks_4 = asks_4 || r.task == 4;
  CHECK(asks_4);
  CHECK(c.error().ok());
  // A finite read ends with the tasks left.
  CHECK_FALSE(c.finished());
}

TEST_CASE(
  "OFF, continue: late replies and a lost bulk channel count as a lost task, not an error") {
  ConsumerLimits limits;
  limits.max_in_flight_per_task = 2;
  ConsumerCore c{limits};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  REQUIRE_FALSE(reqs.empty());
  c.on_request_failed(reqs[0]);
  ReadyElements out;
  auto b = batch_of({1, 2});
  b.batch_seq = 4;
  CHECK(c.on_reply(reqs[0], b, out).ok());
  CHECK(out.empty());
  CHECK(c.lost_tasks() == 1);
  // The dropped batch is acknowledged (a draining task would wait for it).
  bool acked = false;
  for (const auto& r : c.next_requests())
    acked = acked || r.acks == std::vector<uint64_t>{4};
  CHECK(acked);
  // Bulk: a broken channel with a batch in flight.
  ConsumerCore d{ConsumerLimits{}};
  d.on_task_list(list_of(1, {1}, true));
  d.on_connected(1);
  d.set_bulk(1, true);
  auto dr = d.next_requests();
  REQUIRE_FALSE(dr.empty());
  auto bulk = batch_of({});
  bulk.num_elements = 2;
  bulk.bulk_frames = 2;
  bulk.batch_seq = 9;
  REQUIRE(d.on_reply(dr[0], bulk, out).ok());
  CHECK(d.bulk_batches_waiting() == 1);
  CHECK(d.on_bulk_lost({1}, "test").ok());
  CHECK(d.bulk_batches_waiting() == 0);
  CHECK(d.lost_tasks() == 1);
  CHECK(d.outstanding() >= 0);
}

TEST_CASE("on_worker_loss: continue only for OFF - static policies fail whatever the limits say") {
  for (auto policy : {ShardingPolicy::data, ShardingPolicy::file}) {
    CAPTURE(to_string(policy));
    ConsumerCore c{ConsumerLimits{}}; // fail_on_worker_loss false
    c.set_policy(policy);
    c.on_task_list(list_of(1, {1}, false));
    c.on_task_list(list_of(2, {}, false));
    CHECK_FALSE(c.error().ok());
    CHECK(c.lost_tasks() == 0);
  }
}

TEST_CASE(
  "OFF: a task unreachable past the request timeout - continue gives it up once, fail does not") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1, 2}, false));
  c.on_connected(1);
  c.on_connected(2);
  CHECK(c.give_up(1, "cannot reach worker w:1"));
  CHECK_FALSE(c.knows_task(1));
  CHECK(c.lost_tasks() == 1);
  CHECK(c.error().ok());
  // Still listed: it comes back, read on from where its actor is; a second give-up of the same
  // task actor is not a second loss.
  auto added = c.on_task_list(list_of(2, {1, 2}, false));
  REQUIRE(added.size() == 1);
  CHECK(c.give_up(1, "cannot reach worker w:1"));
  CHECK(c.lost_tasks() == 1);
  CHECK(c.take_warnings().size() == 1);
  ConsumerCore f{failing()};
  f.on_task_list(list_of(1, {1}, false));
  CHECK_FALSE(f.give_up(1, "cannot reach worker w:1")); // the caller fails the read
  CHECK(f.knows_task(1));
}

TEST_CASE("focus: only the focused task is asked for elements, the others get their acks, and with "
          "none of them connected, every task is asked") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1, 2, 3}, false));
  c.on_connected(1);
  c.on_connected(2);
  auto tasks_of = [](const std::vector<ConsumerCore::Request>& reqs, bool with_elements) {
    std::set<msg::task_id_t> out;
    for (const auto& r : reqs)
      if ((r.max_elements > 0) == with_elements)
        out.insert(r.task);
    return out;
  };
  c.focus_on({2});
  auto reqs = c.next_requests();
  CHECK(tasks_of(reqs, true) == std::set<msg::task_id_t>{2});
  // Task 1 was not asked; once its reply to an earlier request came, it is still acknowledged.
  ReadyElements out;
  for (const auto& r : reqs)
    REQUIRE(c.on_reply(r, batch_of({1}), out).ok());
  c.focus_on({});
  auto all = c.next_requests();
  CHECK(tasks_of(all, true) == std::set<msg::task_id_t>{1, 2});
  for (const auto& r : all)
    REQUIRE(c.on_reply(r, batch_of({2}), out).ok());
  c.focus_on({2});
  auto acks = c.next_requests();
  CHECK(tasks_of(acks, true) == std::set<msg::task_id_t>{2});
  CHECK(tasks_of(acks, false).count(1) == 1); // its ack-only request
  for (const auto& r : acks)
    REQUIRE(c.on_reply(r, msg::element_batch{}, out).ok());
  // The focused task is not connected (yet): nobody would be asked, so everybody is.
  c.focus_on({3});
  CHECK(tasks_of(c.next_requests(), true) == std::set<msg::task_id_t>{1, 2});
}

// An OFF task's end often comes in an empty reply after its last batch (which then did not say
// it was the last): the read cursor learns of the end from take_ended_slots(), so a slot whose
// task ended is ended in a checkpoint taken while the read goes on, not only at a clean end.
TEST_CASE("OFF: a task that ended names its slot and end once, after all its elements came in") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_policy(ShardingPolicy::off);
  auto list = list_of(1, {1, 2}, false);
  list.tasks[0].off_slot = 7;
  list.tasks[0].off_skip = 40; // a resumed slot: its elements are numbered from 40
  c.on_task_list(list);
  c.on_connected(1);
  c.on_connected(2);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 2);
  const auto& r1 = reqs[0].task == 1 ? reqs[0] : reqs[1];
  ReadyElements out;
  REQUIRE(c.on_reply(r1, batch_of({1, 2, 3}), out).ok());
  CHECK(c.take_ended_slots().empty()); // not ended yet
  c.on_ack(3);
  auto again = c.next_requests();
  auto r = std::find_if(again.begin(), again.end(), [](const auto& q) { return q.task == 1; });
  REQUIRE(r != again.end());
  REQUIRE(c.on_reply(*r, end_batch(), out).ok());
  auto ended = c.take_ended_slots();
  REQUIRE(ended.size() == 1);
  CHECK(ended[0] == std::pair<int64_t, int64_t>{7, 43});
  CHECK(c.take_ended_slots().empty()); // named once; task 2 (slot 2) goes on
}

TEST_CASE("a worker's end marks go to the reader apart from the elements, also on an empty reply") {
  ConsumerCore c{ConsumerLimits{}};
  c.on_task_list(list_of(1, {1}, false));
  c.on_connected(1);
  auto reqs = c.next_requests();
  REQUIRE(reqs.size() >= 2);
  // Split 1's elements, and the mark of split 0 (4 elements, all sent before).
  auto batch = batch_of({5, 6});
  batch.origins = {msg::origin_run{0, 1, 0, 2, false, 0}, msg::origin_run{0, 0, 4, 0, true, 0}};
  ReadyElements out;
  REQUIRE(c.on_reply(reqs[0], batch, out).ok());
  CHECK(out.size() == 2);
  CHECK(out.take_split_ends() == std::vector<SplitEnd>{{0, 0, 4}});
  DeliveredOrigin where;
  Element e;
  bool got = false;
  REQUIRE(out.next(e, got, &where).ok());
  CHECK(where.index == 1);
  CHECK(where.seq == 0);
  // Nothing else ready at the worker: an empty reply carries split 1's mark.
  msg::element_batch empty;
  empty.origins = {msg::origin_run{0, 1, 2, 0, true, 0}};
  REQUIRE(c.on_reply(reqs[1], empty, out).ok());
  CHECK(out.has_news());
  CHECK(out.take_split_ends() == std::vector<SplitEnd>{{0, 1, 2}});
}

// Issue 36: the job names the task of its lowest unfinished split only at its next task list.
// Over the hold budget, a named task whose batches ended the split the reader waits for (or
// moved on to a later one) sends only elements the reader holds: it is not asked again; the
// task that has not moved past that split is, until the reader waits for a later split.
TEST_CASE("focus: a named task that moved past the split the reader waits for is not asked") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1, 2}, false));
  c.on_connected(1);
  c.on_connected(2);
  auto asked = [](const std::vector<ConsumerCore::Request>& reqs) {
    std::set<msg::task_id_t> out;
    for (const auto& r : reqs)
      if (r.max_elements > 0)
        out.insert(r.task);
    return out;
  };
  auto tagged = [](std::vector<int64_t> values, int64_t index, int64_t first_seq, bool end) {
    auto b = batch_of(values);
    b.origins = {msg::origin_run{0, index, first_seq, static_cast<uint32_t>(values.size()), end}};
    return b;
  };
  ReadyElements out;
  // Over budget, waiting for split 0, which task 1 serves (the job named it).
  c.focus_on({1}, std::pair<int64_t, int64_t>{0, 0});
  auto reqs = c.next_requests();
  REQUIRE(asked(reqs) == std::set<msg::task_id_t>{1});
  for (const auto& r : reqs) // task 1 ends split 0 (its last element) in its reply
    REQUIRE(c.on_reply(r, tagged({1, 2}, 0, 0, true), out).ok());
  // The list still names task 1; the reader still waits for split 0 (its finish is not
  // known yet): task 1 has moved past it, so task 2 is asked.
  reqs = c.next_requests();
  CHECK(asked(reqs) == std::set<msg::task_id_t>{2});
  for (const auto& r : reqs) // (task 1's is an ack-only request)
    REQUIRE(c.on_reply(r, r.task == 2 ? tagged({3}, 1, 0, false) : msg::element_batch{}, out).ok());
  // The reader waits for split 1 now: task 2 serves it (task 1's next split is not known).
  c.focus_on({1}, std::pair<int64_t, int64_t>{0, 1});
  reqs = c.next_requests();
  CHECK(asked(reqs) == std::set<msg::task_id_t>{2});
  for (const auto& r : reqs)
    REQUIRE(c.on_reply(r, r.task == 2 ? tagged({4}, 1, 1, false) : msg::element_batch{}, out).ok());
  // The next task list names task 2: only it is asked.
  c.focus_on({2}, std::pair<int64_t, int64_t>{0, 1});
  CHECK(asked(c.next_requests()) == std::set<msg::task_id_t>{2});
}

TEST_CASE("focus: when every task moved past the split the reader waits for, the named one is "
          "asked (the split was handed out again)") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1, 2}, false));
  c.on_connected(1);
  c.on_connected(2);
  ReadyElements out;
  auto reqs = c.next_requests();
  for (const auto& r : reqs) {
    auto b = batch_of({1});
    b.origins = {msg::origin_run{0, r.task == 1 ? 5 : 6, 0, 1, false}};
    REQUIRE(c.on_reply(r, std::move(b), out).ok());
  }
  c.focus_on({1}, std::pair<int64_t, int64_t>{0, 2});
  std::set<msg::task_id_t> asked;
  for (const auto& r : c.next_requests())
    if (r.max_elements > 0)
      asked.insert(r.task);
  CHECK(asked == std::set<msg::task_id_t>{1});
}

// The job's task list may name no task for the split the reader waits for (the list came before
// the split was handed out). Over the budget, a task that moved past that split sends only what
// the reader holds: before, every task was asked then, and on a busy machine the hold grew to
// 2-3 times its budget (integration test "the hold stays within its byte budget", under ASan).
TEST_CASE("focus: with no task named, a task that moved past the split the reader waits for is "
          "not asked, and when all have every task is") {
  ConsumerCore c{ConsumerLimits{}};
  c.set_dynamic(true);
  c.on_task_list(list_of(1, {1, 2, 3}, false));
  c.on_connected(1);
  c.on_connected(2);
  c.on_connected(3);
  ReadyElements out;
  // The tasks asked for elements now; every request is answered (empty: nothing moves).
  auto ask = [&] {
    std::set<msg::task_id_t> asked;
    for (const auto& r : c.next_requests()) {
      if (r.max_elements > 0)
        asked.insert(r.task);
      REQUIRE(c.on_reply(r, msg::element_batch{}, out).ok());
    }
    return asked;
  };
  // Task 1 is at split 5, task 2 at split 1, task 3 at split 3 (none ended).
  for (const auto& r : c.next_requests()) {
    auto b = batch_of({1});
    b.origins = {msg::origin_run{0, r.task == 1 ? 5 : r.task == 2 ? 1 : 3, 0, 1, false}};
    REQUIRE(c.on_reply(r, std::move(b), out).ok());
  }
  // Waiting for split 2, no task named: tasks 1 and 3 moved past it, task 2 may serve it.
  c.focus_on({}, std::pair<int64_t, int64_t>{0, 2});
  CHECK(ask() == std::set<msg::task_id_t>{2});
  // Waiting for split 0 (handed out again): every task moved past it, so every task is asked.
  c.focus_on({}, std::pair<int64_t, int64_t>{0, 0});
  CHECK(ask() == std::set<msg::task_id_t>{1, 2, 3});
  // A task that has sent nothing yet may serve any split: it alone is asked then.
  c.on_task_list(list_of(2, {1, 2, 3, 4}, false));
  c.on_connected(4);
  CHECK(ask() == std::set<msg::task_id_t>{4});
  // Under the budget again: every task.
  c.focus_on({});
  CHECK(ask() == std::set<msg::task_id_t>{1, 2, 3, 4});
}
