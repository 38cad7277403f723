// The coordinated-read adapters without actors: what the consumer actor sends and takes through
// RoundRobinReader (coordinated/round_robin_reader.hpp) and what the task actor answers through
// RoundRobinTaskServer (coordinated/round_robin_task_server.hpp), wired to each other by hand.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "coordinated/round_robin_reader.hpp"
#include "coordinated/round_robin_task_server.hpp"

using conveyor::Compression;
using conveyor::Element;
using conveyor::ErrorCode;
using conveyor::Tensor;
using conveyor::actors::RoundRobinPlanner;
using conveyor::actors::RoundRobinReader;
using conveyor::actors::RoundRobinTaskServer;
namespace msg = conveyor::msg;

namespace {

Element el(int64_t v) { return Element{Tensor::scalar(v)}; }
int64_t val(const Element& e) { return e.components.at(0).as_int64(); }

// What the consumer actor builds for a planner request (the round fields from the reader).
msg::get_elements request_of(const RoundRobinReader& reader, const RoundRobinPlanner::Request& r,
                             msg::consumer_id_t consumer, int64_t index) {
  msg::get_elements req;
  req.consumer = consumer;
  req.max_elements = r.count;
  req.max_bytes = 1 << 20;
  reader.fill_request(r, index, 1'000'000'000, req);
  return req;
}

// One task (id 7) serving two consumers from round 0.
msg::task_list one_task_list() {
  msg::task_list list;
  msg::task_info t;
  t.task = 7;
  t.start_round = 0;
  list.tasks.push_back(t);
  list.round_fence = -1;
  return list;
}

} // namespace

TEST_CASE("round-robin adapters: two readers and a task server read rounds in step") {
  RoundRobinTaskServer server{2, "task 7 (job 1)", Compression::none};
  std::vector<RoundRobinReader> readers;
  readers.reserve(2);
  for (int64_t i = 0; i < 2; ++i) {
    readers.emplace_back(i, 2, /*max_outstanding=*/4, /*max_bytes=*/int64_t{1} << 30);
    REQUIRE(readers.back().on_task_list(one_task_list()).ok());
    // A resumed read's task: read-cursor slot 3, its trainers consumed 5 rounds (10 elements).
    auto resumed = one_task_list();
    resumed.tasks[0].off_slot = 3;
    resumed.tasks[0].off_skip = 10;
    readers.back().note_slots(resumed);
  }
  auto ready = [](msg::task_id_t) { return true; };
  // Resuming first: each reader probes where its index stands.
  for (int64_t i = 0; i < 2; ++i) {
    auto reqs = readers[i].planner().next_requests(ready, 4);
    REQUIRE(reqs.size() == 1);
    REQUIRE(reqs[0].probe);
    auto req = request_of(readers[i], reqs[0], 100 + i, i);
    CHECK(req.round_resume);
    CHECK(req.round_count == 0);
    REQUIRE(server.admit(req).ok());
    auto where = server.where(req);
    REQUIRE(where.ok());
    CHECK(*where == 0);
    REQUIRE(readers[i].planner().on_probe(reqs[0], *where).ok());
  }
  // Both ask for their rounds; the server completes them from a "pipeline" of 0, 1, 2, ...
  std::vector<RoundRobinPlanner::Request> asked;
  for (int64_t i = 0; i < 2; ++i) {
    auto reqs = readers[i].planner().next_requests(ready, 4);
    REQUIRE(reqs.size() == 1);
    asked.push_back(reqs[0]);
    auto req = request_of(readers[i], reqs[0], 100 + i, i);
    server.note_reader(req);
    REQUIRE(server.ask(req, 0).ok());
  }
  const auto rounds = server.completable(8);
  CHECK(rounds == 4);
  std::vector<Element> buffer;
  for (int64_t v = 0; v < 8; ++v)
    buffer.push_back(el(v));
  server.complete(std::move(buffer), {}, 0);
  for (int64_t i = 0; i < 2; ++i) {
    auto reply = server.take_reply(request_of(readers[i], asked[i], 100 + i, i));
    REQUIRE(reply);
    CHECK(reply->num_elements == 4);
    REQUIRE(readers[i].on_batch(asked[i], *reply).ok());
    CHECK(readers[i].messages() == 1);
    CHECK(readers[i].bytes() == static_cast<int64_t>(reply->payload.size()));
  }
  // Nothing is handed out before every consumer has the rounds (the commit watermark).
  for (int64_t i = 0; i < 2; ++i)
    CHECK(readers[i].take_ready().empty());
  // Each reader confirms what it has; then every round is committed and handed out in order.
  std::vector<RoundRobinPlanner::Request> confirms;
  for (int64_t i = 0; i < 2; ++i) {
    auto reqs = readers[i].planner().next_requests(ready, 4);
    REQUIRE(reqs.size() == 1);
    REQUIRE(reqs[0].confirm);
    confirms.push_back(reqs[0]);
    auto req = request_of(readers[i], reqs[0], 100 + i, i);
    CHECK(RoundRobinTaskServer::is_confirm(req));
    REQUIRE(server.confirm(req).ok());
  }
  CHECK(server.rounds().committed() == 4);
  for (int64_t i = 0; i < 2; ++i) {
    const auto req = request_of(readers[i], confirms[i], 100 + i, i);
    CHECK(server.committed_past(req)); // answered at once, without elements
    auto reply = server.committed_reply();
    CHECK(reply.round_committed == 4);
    REQUIRE(readers[i].on_batch(confirms[i], reply).ok());
    std::vector<std::pair<int64_t, int64_t>> tags; // (slot, the slot's round) for the cursor
    auto out = readers[i].take_ready(&tags);
    REQUIRE(out.size() == 4);
    REQUIRE(tags.size() == 4);
    for (int64_t k = 0; k < 4; ++k) { // consumer i gets the i-th element of each round
      CHECK(val(out[static_cast<std::size_t>(k)]) == 2 * k + i);
      CHECK(tags[static_cast<std::size_t>(k)] == std::pair<int64_t, int64_t>{3, 5 + k});
    }
    CHECK(readers[i].elements() == 4);
  }
  // The poll says where the reader stands.
  msg::get_tasks poll;
  readers[0].fill_poll(poll);
  CHECK(poll.round == readers[0].planner().next_round());
  CHECK(poll.round_fence == -1);
}

TEST_CASE("round-robin adapters: the task server refuses what breaks the rounds, naming why") {
  RoundRobinTaskServer server{2, "task 7 (job 1)", Compression::none};
  msg::get_elements req;
  req.consumer = 5;
  req.consumer_index = -1;
  auto refused = server.admit(req);
  CHECK(refused.code() == ErrorCode::invalid_argument);
  CHECK(refused.message().find("task 7 (job 1) belongs to a coordinated job (num_consumers 2)") !=
        std::string::npos);

  // A consumer the job dropped is refused when it comes back; one that finished is not.
  req.consumer_index = 0;
  server.note_reader(req);
  CHECK(server.consumer_left(5, /*finished=*/false)); // its index's confirms are released
  auto dropped = server.admit(req);
  CHECK(dropped.code() == ErrorCode::failed_precondition);
  CHECK(dropped.message().find("consumer 5 (consumer_index 0) was dropped") != std::string::npos);
  msg::get_elements other;
  other.consumer = 6;
  other.consumer_index = 1;
  CHECK_FALSE(server.consumer_left(6, /*finished=*/true)); // never read: nothing to release
  CHECK(server.admit(other).ok());

  // A gap is the request's error, with the task's name.
  other.round_first = 3;
  other.round_count = 1;
  auto gap = server.ask(other, 0);
  CHECK_FALSE(gap.ok());
  CHECK(gap.message().find("task 7 (job 1)") != std::string::npos);

  // A finite dataset that ends short of a round fails the rounds for good.
  CHECK_FALSE(server.fail_if_short(false, false, 0, conveyor::Status::OK()));
  CHECK(server.fail_if_short(false, true, 1, conveyor::Status::OK()));
  CHECK(server.error().code() == ErrorCode::out_of_range);
  CHECK(server.error().message().find("coordinated reads need an infinite dataset") !=
        std::string::npos);
  CHECK(server.completable(100) == 0);
  auto probe = server.where(other);
  CHECK_FALSE(probe.ok());
  CHECK(probe.status().code() == ErrorCode::out_of_range);
}

TEST_CASE("round-robin adapters: a drained task needs its end round and every confirm") {
  RoundRobinTaskServer server{1, "task 1 (job 1)", Compression::none};
  CHECK_FALSE(server.drained()); // not retired
  server.end(0);
  CHECK(server.drained()); // serves no round: nothing to confirm
  RoundRobinTaskServer serving{1, "task 2 (job 1)", Compression::none};
  serving.end(1);
  CHECK_FALSE(serving.drained());
  msg::get_elements confirm;
  confirm.consumer = 1;
  confirm.consumer_index = 0;
  confirm.round_first = 1;
  confirm.round_count = 0;
  REQUIRE(serving.confirm(confirm).ok());
  CHECK(serving.drained());
}
