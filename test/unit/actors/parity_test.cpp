// tf.data parity of the consumer API (issue 32): consumers of one named job asking different
// compressions, ElementStream::cancel() from another thread, and `data_transfer_protocol`.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster_fixture.hpp"
#include "consumer/status_client.hpp"
#include "pipeline/graph/text_form.hpp"
#include "worker/local_workers.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::test;
using clk = std::chrono::steady_clock;

namespace {

// The error a stream creation or its first element ends with (OK when an element came).
Status first_outcome(Expected<ElementStream>& stream) {
  if (!stream.ok())
    return stream.status();
  Element e;
  bool end = false;
  return stream->next(e, end, std::chrono::seconds(10));
}

} // namespace

TEST_CASE("compression: one named job's consumers must agree on it (the reference refuses)") {
  TestCluster cluster{1};
  auto client = cluster.client();
  DistributeOptions a;
  a.job_name = "compression-agree";
  auto first = client.distribute(Dataset::range(1000000), a);
  REQUIRE(first_outcome(first).ok()); // the job runs, compression AUTO
  auto b = a;
  b.compression = "NONE";
  auto second = client.distribute(Dataset::range(1000000), b);
  const Status refused = first_outcome(second);
  CHECK(refused.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(refused.message().find("job \"compression-agree\" runs with compression AUTO; a "
                                       "consumer asked for compression NONE") != std::string::npos,
                refused.to_string());
  // The same compression joins the job as before.
  auto third = client.distribute(Dataset::range(1000000), a);
  CHECK(first_outcome(third).ok());
}

TEST_CASE(
  "compression: a requested dataset id keeps its compression - other readers get their own") {
  TestCluster cluster{0};
  auto client = cluster.client();
  REQUIRE(client.register_dataset(Dataset::range(10), "AUTO", std::string{"cmp"}).ok());
  auto clash = client.register_dataset(Dataset::range(10), "NONE", std::string{"cmp"});
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.status().code() == ErrorCode::invalid_argument);
  CHECK(clash.status().message() ==
        "dataset id \"cmp\" is already registered with compression AUTO; this registration asked "
        "for compression NONE (a dataset's compression is fixed when it is registered)");
  // Without an id the same definition with another compression is another dataset (as in
  // tf.data, where compression is part of the registered dataset); equal ones still share one.
  auto automatic = client.register_dataset(Dataset::range(11), "AUTO");
  auto none = client.register_dataset(Dataset::range(11), "NONE");
  REQUIRE(automatic.ok());
  REQUIRE(none.ok());
  CHECK(*automatic != *none);
  CHECK(*client.register_dataset(Dataset::range(11), "NONE") == *none);
}

TEST_CASE("ElementStream::cancel from another thread: the blocked next() returns cancelled at "
          "once, the job loses its consumer") {
  TestCluster cluster{1};
  auto client = cluster.client();
  // Each element takes 2 s: next() blocks.
  auto parsed = parse_dataset("range(3).map(sleep_us(us=2000000))");
  REQUIRE(parsed.ok());
  auto stream = client.distribute(*parsed);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  const std::string job = stream->job_id();
  Status blocked;
  double waited = 0;
  std::thread reader([&] {
    Element e;
    bool end = false;
    const auto start = clk::now();
    blocked = stream->next(e, end, std::chrono::seconds(30));
    waited = std::chrono::duration<double>(clk::now() - start).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stream->cancel();
  reader.join();
  CHECK(blocked.code() == ErrorCode::cancelled);
  CHECK_MESSAGE(waited < 1.5, "next() returned after " << waited << " s");
  // Every later call says so too; a second cancel is harmless.
  stream->cancel();
  Element e;
  bool end = false;
  CHECK(stream->next(e, end, std::chrono::seconds(1)).code() == ErrorCode::cancelled);
  CHECK_FALSE(end);
  // The consumer left: its private job has no consumer (and is released).
  auto status = fetch_status_when_jobs_finished(cluster.target(), std::chrono::seconds(5),
                                                std::chrono::seconds(10));
  REQUIRE_MESSAGE(status.ok(), status.status().to_string());
  for (const auto& j : status->jobs)
    if (std::to_string(j.id) == job)
      CHECK_MESSAGE(j.consumers == 0,
                    "job " << job << " still has " << j.consumers << " consumer(s)");
}

TEST_CASE("ElementStream::cancel drops what was received - a named job's other readers read on") {
  TestCluster cluster{2};
  auto client = cluster.client();
  DistributeOptions o;
  o.job_name = "cancel-named";
  auto a = client.distribute(Dataset::range(1000000).repeat(), o);
  auto b = client.distribute(Dataset::range(1000000).repeat(), o);
  REQUIRE(first_outcome(a).ok());
  REQUIRE(first_outcome(b).ok());
  a->cancel();
  Element e;
  bool end = false;
  CHECK(a->next(e, end, std::chrono::seconds(1)).code() == ErrorCode::cancelled);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(b->next(e, end, std::chrono::seconds(10)).ok());
    REQUIRE_FALSE(end);
  }
}

TEST_CASE("data_transfer_protocol: grpc and bulk are the default path, caf keeps elements in "
          "messages, anything else is refused") {
  DistributeOptions o;
  for (const char* ok : {"grpc", "bulk", "caf"}) {
    o.data_transfer_protocol = ok;
    CHECK(validate(o).ok());
  }
  o.data_transfer_protocol = "GRPC";
  const Status bad = validate(o);
  CHECK(bad.code() == ErrorCode::invalid_argument);
  CHECK(bad.message().find("Invalid `data_transfer_protocol` argument: \"GRPC\". Must be one of "
                           "[\"grpc\", \"bulk\", \"caf\"]") == 0);
  o.data_transfer_protocol.reset();
  CHECK(uses_bulk_channel(o));
  o.data_transfer_protocol = "grpc";
  CHECK(uses_bulk_channel(o));
  o.data_transfer_protocol = "caf";
  CHECK_FALSE(uses_bulk_channel(o));

  // In-process (LOCAL) reads show which path the elements took: "caf" never opens the bulk
  // channel, so 1 MiB elements come inline; "bulk" sends them as frames.
  auto wc = test_worker_config();
  wc.in_process_reads = true;
  TestCluster cluster{1, test_dispatcher_config(), wc};
  auto client = cluster.client();
  auto parsed = parse_dataset("range(24).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  DistributeOptions local;
  local.target_workers = "LOCAL";
  local.compression = "NONE";
  local.max_outstanding_requests = 2; // (so that later requests go once the channel is open)
  local.data_transfer_protocol = "caf";
  const auto before_caf = LocalWorkers::frames_delivered();
  auto caf_stream = client.distribute(*parsed, local);
  REQUIRE(caf_stream.ok());
  CHECK(read_all(*caf_stream).size() == 24);
  CHECK(LocalWorkers::frames_delivered() == before_caf);
  local.data_transfer_protocol = "bulk";
  const auto before_bulk = LocalWorkers::frames_delivered();
  auto bulk_stream = client.distribute(*parsed, local);
  REQUIRE(bulk_stream.ok());
  CHECK(read_all(*bulk_stream).size() == 24);
  CHECK(LocalWorkers::frames_delivered() > before_bulk);
}

TEST_CASE("element_spec of a registered dataset, as tf.data's GetElementSpec: structure and "
          "components, not_found for an unknown id") {
  TestCluster cluster{0};
  auto client = cluster.client();
  auto dict = Structure::dict({{"b", Structure::leaf()}, {"a", Structure::leaf()}});
  REQUIRE(dict.ok());
  Element columns{std::vector<Tensor>{*Tensor::from_values<int64_t>({3}, {1, 2, 3}),
                                      *Tensor::from_values<double>({3}, {1.0, 2.0, 3.0})}};
  auto id = client.register_dataset(Dataset::from_tensor_slices(columns, *dict).batch(2));
  REQUIRE_MESSAGE(id.ok(), id.status().to_string());
  auto spec = client.element_spec(*id);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  REQUIRE(spec->structure.has_value());
  CHECK(spec->structure->to_string() == "{\"a\": _, \"b\": _}");
  REQUIRE(spec->components.size() == 2);
  CHECK(spec->components[0].dtype == DType::int64);
  CHECK(spec->components[1].dtype == DType::float64);
  auto unknown = client.element_spec("no-such-id");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == ErrorCode::not_found);
  CHECK(unknown.status().message().find("dataset id \"no-such-id\" is not registered") !=
        std::string::npos);
}
