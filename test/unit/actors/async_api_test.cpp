// The asynchronous consumer API: a sink actor receives batches and returns credits.
#include <doctest/doctest.h>

#include <future>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "cluster_fixture.hpp"
#include "conveyor/async.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

struct Collected {
  std::vector<int64_t> values;
  Status status;
  bool ended = false;
};

struct sink_state {
  std::vector<int64_t> values;
};

// Acknowledges every batch at once and reports the outcome through `done`.
msg::stream_sink_actor::behavior_type
sink_impl(msg::stream_sink_actor::stateful_pointer<sink_state> self,
          std::shared_ptr<std::promise<Collected>> done) {
  return {
    [self, done](msg::stream_batch& batch) {
      auto& st = self->state;
      for (const auto& e : batch.elements)
        st.values.push_back(e[0].as_int64());
      if (!batch.elements.empty())
        self->send(batch.source, msg::ack_atom_v, uint64_t{batch.elements.size()});
      if (batch.end_of_sequence || !batch.status.ok()) {
        done->set_value(Collected{st.values, batch.status, batch.end_of_sequence});
        self->quit();
      }
    },
  };
}

} // namespace

TEST_CASE("an actor reads a DYNAMIC dataset through the async API") {
  TestCluster cluster{2};
  caf::actor_system_config cfg;
  configure_actor_system(cfg, test_network());
  caf::actor_system sys{cfg};
  auto done = std::make_shared<std::promise<Collected>>();
  auto outcome = done->get_future();
  auto sink = sys.spawn(sink_impl, done);
  DistributeOptions options;
  options.policy = ShardingPolicy::dynamic;
  options.max_outstanding_requests = 4; // acks must flow for the stream to finish
  auto stream = spawn_element_stream(sys, sink, cluster.target(),
                                     StreamSource::from_dataset(Dataset::range(50)), options,
                                     test_client_config());
  REQUIRE(stream);
  REQUIRE(outcome.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  auto got = outcome.get();
  CHECK(got.status.ok());
  CHECK(got.ended);
  CHECK(sorted(got.values) == [] {
    std::vector<int64_t> v(50);
    for (int64_t i = 0; i < 50; ++i)
      v[i] = i;
    return v;
  }());
}

TEST_CASE("async API errors arrive as the final batch") {
  caf::actor_system_config cfg;
  configure_actor_system(cfg, test_network());
  caf::actor_system sys{cfg};
  auto done = std::make_shared<std::promise<Collected>>();
  auto outcome = done->get_future();
  auto sink = sys.spawn(sink_impl, done);
  ClientConfig cc = test_client_config();
  cc.connect_timeout = std::chrono::milliseconds(500);
  auto stream = spawn_element_stream(sys, sink, "127.0.0.1:1", StreamSource::from_id("1000"),
                                     DistributeOptions{}, cc);
  REQUIRE(outcome.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto got = outcome.get();
  CHECK(got.status.code() == ErrorCode::unavailable);
  CHECK(got.status.message().find("connecting to the dispatcher at 127.0.0.1:1") == 0);
}
