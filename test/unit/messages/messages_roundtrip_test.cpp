// Every wire message survives CAF's binary serializer (what BASP uses) unchanged, and every
// message type is registered under one name in the conveyor type-id block.
#include <doctest/doctest.h>

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/proxy_registry.hpp>
#include <caf/scoped_execution_unit.hpp>

#include "node/node_config.hpp"
#include "messages/all.hpp"
#include "messages/journal_records.hpp"

using namespace conveyor;

namespace {

// Deserializing actor handles needs a proxy registry (BASP provides one); the handles in these
// messages are null, so no proxy is ever made.
struct NoProxies : caf::proxy_registry::backend {
  caf::strong_actor_ptr make_proxy(caf::node_id, caf::actor_id) override { return nullptr; }
  void set_last_hop(caf::node_id*) override {}
};

struct Fixture {
  actors::NodeConfig cfg;
  caf::actor_system sys{cfg};
  NoProxies backend;
  caf::proxy_registry proxies{sys, backend};
  caf::scoped_execution_unit context{&sys};
  Fixture() { context.proxy_registry_ptr(&proxies); }

  template <class T>
  T round_trip(T value) {
    caf::binary_serializer::container_type buf;
    caf::binary_serializer sink{sys, buf};
    auto err = sink(value);
    REQUIRE_MESSAGE(!err, sys.render(err));
    T out;
    caf::binary_deserializer source{&context, buf};
    err = source(out);
    REQUIRE_MESSAGE(!err, sys.render(err));
    CHECK(caf::deep_to_string(out) == caf::deep_to_string(value));
    return out;
  }
};

} // namespace

TEST_CASE_FIXTURE(Fixture, "element messages round trip") {
  auto req = round_trip(msg::get_elements{7, 1024, 4u << 20, 500000000, {3, 4}, true, 5});
  CHECK(req.consumer == 7);
  CHECK(req.acks == std::vector<uint64_t>{3, 4});
  CHECK(req.reconnected);
  CHECK(req.bulk_channel == 5);
  CHECK(req.max_elements == 1024);
  CHECK(req.max_bytes == (4u << 20));
  CHECK(req.hold_ns == 500000000);
  msg::element_batch batch;
  batch.payload = std::string("\0binary\xff", 8);
  batch.num_elements = 3;
  batch.batch_seq = 9;
  batch.chunk_index = 1;
  batch.num_chunks = 2;
  batch.end_of_sequence = false;
  batch.retired = true;
  auto b = round_trip(batch);
  CHECK(b.retired);
  CHECK(b.payload == batch.payload);
  CHECK(b.num_elements == 3);
  CHECK(b.batch_seq == 9);
  CHECK(b.chunk_index == 1);
  CHECK(b.num_chunks == 2);
}

TEST_CASE_FIXTURE(Fixture, "split messages round trip") {
  msg::splits_reply reply;
  reply.splits = {Split{2, 5, 320, 384, "a/b.txt"}, Split{2, 6, 384, 448, ""}};
  reply.empty_epoch = true;
  auto r = round_trip(reply);
  REQUIRE(r.splits.size() == 2);
  CHECK(r.splits[0] == reply.splits[0]);
  CHECK(r.splits[1] == reply.splits[1]);
  CHECK_FALSE(r.end_of_splits);
  CHECK(r.empty_epoch);
  auto g = round_trip(msg::get_splits{4, 2, 8, 1000, 1});
  CHECK(g.source == 1);
  CHECK(g.task == 4);
  CHECK(g.epoch == 2);
  CHECK(g.max == 8);
  CHECK(g.hold_ns == 1000);
  auto u = round_trip(msg::splits_update{4, {{1, 2, 5}}, {Split{2, 6, 384, 448, "", 0, 1}}});
  REQUIRE(u.finished.size() == 1);
  CHECK(u.finished[0] == msg::split_key{1, 2, 5});
  REQUIRE(u.returned.size() == 1);
  CHECK(u.returned[0].begin == 384);
  CHECK(u.returned[0].source == 1);
  msg::element_batch b;
  b.origins = {msg::origin_run{1, 2, 3, 4, true, 2}};
  auto rb = round_trip(b);
  REQUIRE(rb.origins.size() == 1);
  CHECK(rb.origins[0].first_seq == 3);
  CHECK(rb.origins[0].count == 4);
  CHECK(rb.origins[0].split_end);
  CHECK(rb.origins[0].source == 2);
  msg::get_elements ge;
  ge.acks = {7, 9};
  ge.reconnected = true;
  ge.round_resume = true;
  ge.auth_token = "tok";
  ge.retired_ack = true;
  auto rg = round_trip(ge);
  CHECK(rg.acks == std::vector<uint64_t>{7, 9});
  CHECK(rg.reconnected);
  CHECK(rg.round_resume);
  CHECK(rg.auth_token == "tok");
  CHECK(rg.retired_ack); // the last field: every field before it kept its place
  auto d = round_trip(msg::task_done{4, "data_loss: bad"});
  CHECK(d.error == "data_loss: bad");
}

TEST_CASE_FIXTURE(Fixture, "dispatcher and worker messages round trip") {
  msg::task_def def;
  def.task = 11;
  def.job = 3;
  def.dataset = "1000";
  def.definition = "xyz";
  def.policy = ShardingPolicy::dynamic;
  def.compression = Compression::none;
  def.tenant = "team-b";
  def.tenant_weight = 4;
  def.tenant_max_buffer_bytes = 4096;
  auto a = round_trip(msg::assign_task{def, "tok"});
  CHECK(a.def.task == 11);
  CHECK(a.auth_token == "tok");
  CHECK(a.def.policy == ShardingPolicy::dynamic);
  CHECK(a.def.compression == Compression::none);
  CHECK(a.def.tenant == "team-b");
  CHECK(a.def.tenant_weight == 4);
  CHECK(a.def.tenant_max_buffer_bytes == 4096);
  auto reg = round_trip(msg::register_worker{msg::kProtocolVersion, "10.0.0.1:6000", {}, {}});
  CHECK(reg.address == "10.0.0.1:6000");
  CHECK(reg.protocol_version == msg::kProtocolVersion);
  CHECK(round_trip(msg::worker_registered{5, 1}).worker == 5);
  auto hb =
    round_trip(msg::worker_heartbeat{5, 2, false, {msg::tenant_usage{"team-a", 3, 1.5, 700, 800}}});
  CHECK(hb.num_tasks == 2);
  REQUIRE(hb.tenants.size() == 1);
  CHECK(hb.tenants[0].tenant == "team-a");
  CHECK(hb.tenants[0].weight == 3);
  CHECK(hb.tenants[0].thread_seconds == 1.5);
  CHECK(hb.tenants[0].buffered_bytes == 700);
  CHECK(hb.tenants[0].max_buffer_bytes == 800);
  msg::cluster_status cs;
  cs.tenants.push_back(msg::tenant_status{"team-a", 2, 1, 800, 700});
  auto cs2 = round_trip(cs);
  REQUIRE(cs2.tenants.size() == 1);
  CHECK(cs2.tenants[0].tenant == "team-a");
  CHECK(cs2.tenants[0].max_workers == 2);
  CHECK(cs2.tenants[0].workers == 1);
  CHECK(cs2.tenants[0].max_buffer_bytes == 800);
  CHECK(cs2.tenants[0].buffered_bytes == 700);
  CHECK_FALSE(round_trip(msg::heartbeat_ack{false}).known);
  // Distributed snapshots (protocol 18): streams ride on heartbeats and their acks.
  msg::worker_heartbeat with_streams{5, 0, false, {}};
  with_streams.snapshot_streams.push_back(
    msg::snapshot_stream_report{"/s", 2, 3, 40, 500, true, ""});
  with_streams.max_snapshot_streams = 1;
  auto hb2 = round_trip(with_streams);
  REQUIRE(hb2.snapshot_streams.size() == 1);
  CHECK(hb2.snapshot_streams[0].elements == 40);
  CHECK(hb2.snapshot_streams[0].done);
  CHECK(hb2.max_snapshot_streams == 1);
  msg::heartbeat_ack ack{true};
  ack.snapshot_streams.push_back(msg::snapshot_stream_def{"/s", 2, "def", 1, 4096, true});
  auto ack2 = round_trip(ack);
  REQUIRE(ack2.snapshot_streams.size() == 1);
  CHECK(ack2.snapshot_streams[0].per_split);
  CHECK(ack2.snapshot_streams[0].chunk_bytes == 4096);
  CHECK(round_trip(msg::start_snapshot{"/s", "1000", 1, 64}).dataset == "1000");
  CHECK(round_trip(msg::get_snapshot_splits{"/s", 1, 7, 4, 3}).seq == 7);
  auto splits = round_trip(msg::snapshot_splits{{msg::JournalSplit{0, 4, 10, 20, ""}}, true});
  REQUIRE(splits.splits.size() == 1);
  CHECK(splits.splits[0].end == 20);
  CHECK(splits.end);
  CHECK(round_trip(msg::snapshot_nudge{"tok"}).auth_token == "tok");
  CHECK(round_trip(msg::stop_task{8}).task == 8);
  CHECK(round_trip(msg::stop_task{8, "tok"}).auth_token == "tok");
  CHECK(round_trip(msg::leave_job{3, true, "tok"}).auth_token == "tok");
}

TEST_CASE_FIXTURE(Fixture, "consumer-facing messages round trip") {
  msg::register_dataset reg;
  reg.definition = "def";
  reg.compression = Compression::automatic;
  reg.requested_id = std::string("my-id");
  auto r = round_trip(reg);
  REQUIRE(r.requested_id);
  CHECK(*r.requested_id == "my-id");
  msg::get_or_create_job job;
  job.dataset = "1000";
  job.job_name = std::string("shared");
  job.policy = ShardingPolicy::dynamic;
  auto j = round_trip(job);
  REQUIRE(j.job_name);
  CHECK(*j.job_name == "shared");
  CHECK_FALSE(j.num_consumers);
  msg::task_list list;
  list.version = 4;
  list.job_finished = true;
  list.tasks.push_back(msg::task_info{1, 2, "127.0.0.1:7000", {}});
  auto l = round_trip(list);
  REQUIRE(l.tasks.size() == 1);
  CHECK(l.tasks[0].worker_address == "127.0.0.1:7000");
  CHECK(l.job_finished);
  CHECK(round_trip(msg::get_tasks{3, 4, 1000, {}}).known_version == 4);
  CHECK(round_trip(msg::client_hello{1, "c", {}}).client == "c");
}

TEST_CASE_FIXTURE(Fixture, "message types are registered under their C++ names") {
  auto types = sys.message_types(caf::detail::type_list<msg::dispatcher_actor>{});
  CHECK_FALSE(types.empty());
  bool found = false;
  for (const auto& t : types)
    found = found || t.find("conveyor::msg::register_worker") != std::string::npos;
  CHECK(found);
  CHECK(caf::type_id<msg::get_elements>::value == caf::first_custom_type_id);
}

TEST_CASE_FIXTURE(Fixture, "a Status travels as a caf::error with its code and message intact") {
  Status s{ErrorCode::already_exists, "dataset id \"x\" is already registered"};
  auto err = msg::to_error(s);
  REQUIRE(err);
  CHECK(msg::to_status(err) == s);
  CHECK(sys.render(err).find("already_exists: dataset id") != std::string::npos);
  // Through the serializer too (the error crosses the network in a reply).
  caf::binary_serializer::container_type buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE(!sink(err));
  caf::error back;
  caf::binary_deserializer source{sys, buf};
  REQUIRE(!source(back));
  CHECK(msg::to_status(back) == s);
  CHECK_FALSE(msg::to_error(Status::OK()));
  CHECK(msg::to_status(caf::error{}).ok());
}

TEST_CASE_FIXTURE(Fixture, "CAF's own errors map to the closest code with context") {
  auto timeout = msg::to_status(caf::make_error(caf::sec::request_timeout), "asking the job");
  CHECK(timeout.code() == ErrorCode::deadline_exceeded);
  CHECK(timeout.message().find("asking the job") == 0);
  auto refused = msg::to_status(caf::make_error(caf::sec::cannot_connect_to_node));
  CHECK(refused.code() == ErrorCode::unavailable);
  CHECK(msg::to_status(caf::make_error(caf::sec::unexpected_actor_messaging_interface)).code() ==
        ErrorCode::version_mismatch);
}
