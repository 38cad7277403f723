// An endless OFF task of a draining worker retires (element_batch.retired), and its consumer
// acknowledges the mark (get_elements.retired_ack, protocol 30): the drain completes only then.
// Without the acknowledgement the drain could complete while the mark was still on its way, and
// a worker stopped right after (WorkerServer::stop closes the connection and the frame guard's
// proxy) made the consumer see the connection drop first and count the task as lost.
#include <doctest/doctest.h>

#include "cluster_fixture.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

void read_n(ElementStream& stream, int n) {
  for (int i = 0; i < n; ++i) {
    Element e;
    bool end = false;
    auto st = stream.next(e, end, std::chrono::seconds(10));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    REQUIRE_FALSE(end);
  }
}

} // namespace

TEST_CASE("drain: a worker stopped right after its drain returns - the consumer of its endless OFF "
          "task saw `retired`, never a loss (20 rounds)") {
  constexpr int kRounds = 20;
  int lost_rounds = 0;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    TestCluster cluster{2};
    auto client = cluster.client();
    DistributeOptions o;
    o.policy = ShardingPolicy::off;
    o.on_worker_loss = "continue"; // a loss is counted (stats().lost_tasks), not an error
    o.max_outstanding_requests = 4;
    auto stream = client.distribute(Dataset::range(1000).repeat(), o);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    read_n(*stream, 200); // both tasks serve
    auto drained = cluster.worker(1).drain(std::chrono::seconds(10));
    REQUIRE_MESSAGE(drained.ok(), drained.to_string());
    cluster.stop_worker(1); // at once: nothing may still be on its way to the consumer
    read_n(*stream, 2000);  // the other worker serves on (the consumer sees the drop meanwhile)
    lost_rounds += stream->stats().lost_tasks > 0;
  }
  CHECK(lost_rounds == 0);
}
