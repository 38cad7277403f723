// Placement on real processes: worker tags given to `conveyor worker --worker-tags` reach the
// dispatcher (`conveyor status`) and the consumers' task lists; a trainer process that runs its
// own in-process WorkerServer reads with target_workers ANY / AUTO / LOCAL from a cluster of
// `conveyor` processes; `conveyor read --target-workers LOCAL` has no local worker.
#include <doctest/doctest.h>

#include <algorithm>

#include "worker/local_workers.hpp"
#include "conveyor/client.hpp"
#include "conveyor/server.hpp"
#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

std::vector<int64_t> read_local_process(Client& client, const std::string& target_workers) {
  DistributeOptions o;
  o.policy = ShardingPolicy::off;
  o.target_workers = target_workers;
  auto stream = client.distribute(Dataset::range(8), o);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  std::vector<int64_t> out;
  for (int i = 0; i < 1000; ++i) {
    Element e;
    bool end = false;
    auto st = stream->next(e, end, kReadTimeout);
    REQUIRE_MESSAGE(st.ok(), target_workers << ": " << st.to_string());
    if (end)
      break;
    out.push_back(e[0].as_int64());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> copies_of_range8(int copies) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < 8; ++i)
    for (int c = 0; c < copies; ++c)
      v.push_back(i);
  return v;
}

} // namespace

TEST_CASE("placement: tags in `conveyor status` - ANY / AUTO / LOCAL from a trainer with an "
          "in-process worker") {
  Cluster cluster(0);
  cluster.add_worker({"--worker-tags", "COLOCATED,zone-a"}); // another trainer's worker
  cluster.add_worker();                                      // a plain remote worker

  auto status =
    run_conveyor({"status", "--dispatcher", cluster.address()}, kStartTimeout, "status");
  REQUIRE_MESSAGE(status.exit_code == 0, status.describe);
  CHECK_MESSAGE(status.stdout_text.find("COLOCATED,zone-a") != std::string::npos, status.describe);

  // This test process is the trainer: it runs its own worker in process.
  WorkerConfig wc;
  wc.dispatcher_address = cluster.address();
  WorkerServer local{wc};
  REQUIRE(local.start().ok());
  REQUIRE(actors::LocalWorkers::contains(local.worker_address()));
  auto client = Client::connect(cluster.address());
  REQUIRE(client.ok());

  // OFF: each worker read produces range(8) once.
  CHECK(read_local_process(*client, "ANY") == copies_of_range8(3));
  CHECK(read_local_process(*client, "AUTO") == copies_of_range8(2)); // not the other COLOCATED one
  const auto frames = actors::LocalWorkers::frames_delivered();
  CHECK(read_local_process(*client, "LOCAL") == copies_of_range8(1)); // only its own worker
  CHECK(actors::LocalWorkers::frames_delivered() == frames); // 8-byte elements: inline replies
  local.stop();

  // `conveyor read` runs no worker: LOCAL fails with the reference's error, and exits non-zero.
  auto r = cluster.read("range(3)", {"--target-workers", "LOCAL"});
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(r.stderr_text.find("Local reads require local tf.data workers, but no local "
                                   "worker is found.") != std::string::npos,
                r.describe);
  // ...and a bad tag is an argument error of the worker command.
  auto bad = run_conveyor(
    {"worker", "--dispatcher", cluster.address(), "--port", "0", "--worker-tags", "a\tb"},
    kStartTimeout, "bad-tags");
  CHECK(bad.exit_code != 0);
  CHECK_MESSAGE(bad.stderr_text.find("contains a control character") != std::string::npos,
                bad.describe);
}
