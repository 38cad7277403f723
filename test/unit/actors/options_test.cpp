// Argument validation with the reference's messages (003_3cbebc871b174894.txt), in C++ form.
#include <doctest/doctest.h>

#include "conveyor/options.hpp"

using namespace conveyor;

namespace {
std::string error_of(const DistributeOptions& o) { return validate(o).message(); }
} // namespace

TEST_CASE("the default options are valid") { CHECK(validate(DistributeOptions{}).ok()); }

TEST_CASE("job_name, consumer_index and num_consumers are validated as in the reference") {
  DistributeOptions o;
  o.job_name = "";
  CHECK(validate(o).code() == ErrorCode::invalid_argument);
  CHECK(error_of(o) == "`job_name` must not be empty");

  o = {};
  o.consumer_index = 0;
  CHECK(error_of(o) == "Must either set both `consumer_index` and `num_consumers`, or neither. "
                       "consumer_index=0, num_consumers=None");
  o = {};
  o.num_consumers = 2;
  CHECK(error_of(o) == "Must either set both `consumer_index` and `num_consumers`, or neither. "
                       "consumer_index=None, num_consumers=2");
  o.consumer_index = 0;
  CHECK(error_of(o) == "`job_name` must be set when setting `num_consumers`. num_consumers was "
                       "set to 2.");
  o.job_name = "j";
  o.consumer_index = 2;
  CHECK(error_of(o) == "`consumer_index` must be in [0, num_consumers) = [0, 2), got 2");
  o.consumer_index = 1;
  CHECK(validate(o).ok()); // coordinated reads (coordinated/round_robin.hpp)
  o.round_timeout = std::chrono::milliseconds{0};
  CHECK(error_of(o) == "`round_timeout` must be positive, got 0 ms");
  o.round_timeout = std::chrono::milliseconds{1000};
  o.target_workers = "LOCAL";
  CHECK(validate(o).code() == ErrorCode::invalid_argument);
  CHECK(error_of(o).find("require non-local workers") != std::string::npos);
}

TEST_CASE("compression, target_workers and max_outstanding_requests") {
  DistributeOptions o;
  o.compression = "ZIP";
  CHECK(error_of(o) == "Invalid `compression` argument: \"ZIP\". Must be one of [\"AUTO\", "
                       "\"NONE\"].");
  CHECK(validate_compression("NONE").ok());
  CHECK_FALSE(validate_compression("auto").ok()); // the reference's names are exact
  o = {};
  o.target_workers = "SOME";
  CHECK(error_of(o) == "Invalid `target_workers` argument: \"SOME\". Must be one of [\"AUTO\", "
                       "\"ANY\", \"LOCAL\"].");
  o.target_workers = "LOCAL"; // valid; a reader then needs a worker in its process
  CHECK(validate(o).ok());
  o.job_name = "j";
  o.num_consumers = 2;
  o.consumer_index = 0;
  CHECK(error_of(o) ==
        "Coordinated reads require non-local workers, but `target_workers` is \"LOCAL\".");
  o = {};
  o.max_outstanding_requests = 0;
  CHECK(error_of(o) == "`max_outstanding_requests` must be positive, got 0");
  o.max_outstanding_requests = -1;
  CHECK(validate(o).code() == ErrorCode::invalid_argument);
}

TEST_CASE("on_worker_loss: continue or fail, OFF only, continue by default") {
  DistributeOptions o;
  CHECK_FALSE(fail_on_worker_loss(o)); // unset: continue
  o.on_worker_loss = "continue";
  CHECK(validate(o).ok());
  CHECK_FALSE(fail_on_worker_loss(o));
  o.on_worker_loss = "fail";
  CHECK(validate(o).ok());
  CHECK(fail_on_worker_loss(o));
  o.on_worker_loss = "Fail";
  CHECK(validate(o).code() == ErrorCode::invalid_argument);
  CHECK(error_of(o) ==
        "Invalid `on_worker_loss` argument: \"Fail\". Must be one of [\"continue\", \"fail\"].");
  o.on_worker_loss = "fail";
  o.policy = ShardingPolicy::dynamic;
  CHECK(validate(o).code() == ErrorCode::invalid_argument);
  CHECK(
    error_of(o).find(
      "`on_worker_loss` applies to the OFF processing mode only, got processing mode DYNAMIC") ==
    0);
  o.policy = ShardingPolicy::data;
  CHECK(error_of(o).find("static sharding always fails the read") != std::string::npos);
  o.on_worker_loss.reset(); // unset with another mode: nothing to ignore
  CHECK(validate(o).ok());
}

TEST_CASE("processing modes: the reference's strings and the sharding policies") {
  CHECK(*parse_processing_mode("parallel_epochs") == ShardingPolicy::off);
  CHECK(*parse_processing_mode("distributed_epoch") == ShardingPolicy::dynamic);
  CHECK(*parse_processing_mode("DYNAMIC") == ShardingPolicy::dynamic);
  auto bad = parse_processing_mode("epochs");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "processing mode should be a ShardingPolicy (OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, "
        "HINT), \"parallel_epochs\", or \"distributed_epoch\". Got \"epochs\".");
  // Static policies are valid options; whether the cluster can serve them (a fixed worker
  // list) is the dispatcher's call (static_sharding_test.cpp).
  for (auto p : {ShardingPolicy::file, ShardingPolicy::data, ShardingPolicy::file_or_data,
                 ShardingPolicy::hint}) {
    DistributeOptions o;
    o.policy = p;
    CHECK(validate(o).ok());
  }
}

TEST_CASE("addresses") {
  auto a = parse_address("127.0.0.1:5050");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 5050);
  CHECK(parse_address("conveyor://localhost:1")->host == "localhost");
  auto v6 = parse_address("[::1]:7");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->to_string() == "[::1]:7");
  CHECK(parse_address("").status().message() ==
        "address must not be empty; expected \"host:port\"");
  CHECK(parse_address("localhost").status().message() ==
        "address \"localhost\" has no port; expected \"host:port\"");
  CHECK(parse_address("localhost:99999").status().message() ==
        "address \"localhost:99999\" has a bad port \"99999\"; expected a number in [0, 65535]");
  CHECK(parse_address(":80").status().message() ==
        "address \":80\" has an empty host; expected \"host:port\"");
  CHECK(parse_address("grpc://h:1").status().message() ==
        "unsupported protocol \"grpc\" in address \"grpc://h:1\"; expected \"host:port\" or "
        "\"conveyor://host:port\"");
  CHECK(parse_address("a://b://c:1").status().message() ==
        "Malformed address \"a://b://c:1\" has multiple '://'");
}

TEST_CASE("iteration: a named job's, non-negative or kNextIteration") {
  DistributeOptions o;
  o.iteration = 2;
  CHECK(error_of(o) == "`job_name` must be set when setting `iteration` (only a named job has "
                       "iterations). iteration was set to 2.");
  o.job_name = "j";
  CHECK(validate(o).ok());
  o.iteration = kNextIteration;
  CHECK(validate(o).ok());
  o.iteration = -2;
  CHECK(error_of(o) == "`iteration` must be non-negative (or kNextIteration), got -2");
}

TEST_CASE("static sharding reads the local worker: target_workers ANY is refused") {
  // Issue 32: FILE_OR_DATA with target_workers=ANY was accepted; the reference's static
  // policies require that each client reads only its local worker (003, ShardingPolicy).
  for (auto p : {ShardingPolicy::file, ShardingPolicy::data, ShardingPolicy::file_or_data,
                 ShardingPolicy::hint}) {
    DistributeOptions o;
    o.policy = p;
    o.target_workers = "ANY";
    CHECK(validate(o).code() == ErrorCode::invalid_argument);
    CHECK(error_of(o) == std::string{"Static sharding policy <"} + to_string(p) +
                           "> requires each client to read only from its local tf.data service "
                           "worker, but `target_workers` is \"ANY\": use \"LOCAL\" or \"AUTO\"");
    o.target_workers = "LOCAL";
    CHECK(validate(o).ok());
  }
  DistributeOptions dynamic;
  dynamic.policy = ShardingPolicy::dynamic;
  dynamic.target_workers = "ANY";
  CHECK(validate(dynamic).ok());
}
