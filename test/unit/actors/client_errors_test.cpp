// The consumer API's errors: bad arguments, unknown ids, protocol version mismatches, and an
// unreachable or frozen dispatcher (a clear error after a bounded time, never a hang).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "cluster_fixture.hpp"
#include "messages/protocol.hpp"

using namespace conveyor;
using namespace conveyor::test;
using clk = std::chrono::steady_clock;

namespace {

double seconds_since(clk::time_point t) {
  return std::chrono::duration<double>(clk::now() - t).count();
}

// A TCP port that accepts connections (the kernel completes the handshake) but never answers:
// what a frozen (SIGSTOPped) dispatcher looks like.
class SilentListener {
public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

} // namespace

TEST_CASE("registering: equal definitions share an id - a requested id may not change meaning") {
  TestCluster cluster{0};
  auto client = cluster.client();
  auto a = client.register_dataset(Dataset::range(10));
  auto b = client.register_dataset(Dataset::range(10));
  auto c = client.register_dataset(Dataset::range(11));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(*a == *b);
  CHECK(*a != *c);
  auto mine = client.register_dataset(Dataset::range(10), "AUTO", std::string{"train"});
  REQUIRE(mine.ok());
  CHECK(*mine == "train");
  CHECK(*client.register_dataset(Dataset::range(10), "AUTO", std::string{"train"}) == "train");
  auto clash = client.register_dataset(Dataset::range(12), "AUTO", std::string{"train"});
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.status().code() == ErrorCode::already_exists);
  CHECK(clash.status().message() ==
        "dataset id \"train\" is already registered with another definition");
}

TEST_CASE("bad arguments are refused with messages naming them") {
  TestCluster cluster{1};
  auto client = cluster.client();
  DistributeOptions o;
  o.job_name = "";
  auto empty_name = client.distribute(Dataset::range(3), o);
  REQUIRE_FALSE(empty_name.ok());
  CHECK(empty_name.status().message() == "`job_name` must not be empty");
  o = {};
  o.num_consumers = 2;
  o.consumer_index = 0;
  CHECK(client.distribute(Dataset::range(3), o).status().message() ==
        "`job_name` must be set when setting `num_consumers`. num_consumers was set to 2.");
  o = {};
  o.compression = "GZIP";
  CHECK(client.distribute(Dataset::range(3), o).status().code() == ErrorCode::invalid_argument);
  CHECK(client.register_dataset(Dataset::range(3), "snappy").status().message() ==
        "Invalid `compression` argument: \"snappy\". Must be one of [\"AUTO\", \"NONE\"].");
  auto unknown_fn = client.register_dataset(Dataset::range(3).map("no_such_fn"));
  REQUIRE_FALSE(unknown_fn.ok());
  CHECK(unknown_fn.status().message().find("no_such_fn") != std::string::npos);
  auto unknown_id = client.from_dataset_id("4242");
  REQUIRE_FALSE(unknown_id.ok());
  CHECK(unknown_id.status().code() == ErrorCode::not_found);
  CHECK(unknown_id.status().message().find(
          "dataset id \"4242\" is not registered with this dispatcher") != std::string::npos);
  // DYNAMIC needs a splittable source.
  auto unsplittable =
    client.distribute(Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})}), [] {
      DistributeOptions d;
      d.policy = ShardingPolicy::dynamic;
      return d;
    }());
  REQUIRE_FALSE(unsplittable.ok());
  CHECK(unsplittable.status().message().find("DYNAMIC") != std::string::npos);
  // Bad addresses.
  auto bad = Client::connect("no-port-here");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::invalid_argument);
  CHECK(bad.status().message() ==
        "dispatcher address: address \"no-port-here\" has no port; expected \"host:port\"");
  WorkerConfig wc = test_worker_config();
  wc.dispatcher_address = "localhost:70000";
  WorkerServer worker{wc};
  auto st = worker.start();
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("`dispatcher_address`") == 0);
}

TEST_CASE("a protocol version mismatch is refused on both sides") {
  auto dc = test_dispatcher_config();
  dc.protocol_version = 99;
  TestCluster cluster{0, dc};
  auto client = Client::connect(cluster.target(), test_client_config());
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == ErrorCode::version_mismatch);
  CHECK(client.status().message().find(
          "protocol version mismatch: the dispatcher speaks version 99, the client version " +
          std::to_string(msg::kProtocolVersion)) != std::string::npos);
  WorkerConfig wc = test_worker_config();
  wc.dispatcher_address = cluster.target();
  WorkerServer worker{wc};
  auto st = worker.start();
  CHECK(st.code() == ErrorCode::version_mismatch);
  CHECK(st.message().find("the dispatcher speaks version 99, the worker version " +
                          std::to_string(msg::kProtocolVersion)) != std::string::npos);
}

TEST_CASE("an unreachable dispatcher is an error after a bounded time, never a hang") {
  auto cc = test_client_config();
  cc.connect_timeout = std::chrono::milliseconds(700);
  {
    // Nothing listens: refused at once.
    auto t0 = clk::now();
    auto c = Client::connect("127.0.0.1:1", cc);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == ErrorCode::unavailable);
    CHECK(c.status().message().find("connecting to the dispatcher at 127.0.0.1:1") == 0);
    CHECK(seconds_since(t0) < 2.0);
  }
  {
    // Accepts TCP but never answers (a frozen process): deadline_exceeded after the timeout.
    SilentListener silent;
    auto t0 = clk::now();
    auto c = Client::connect(silent.address(), cc);
    REQUIRE_FALSE(c.ok());
    CHECK_MESSAGE(c.status().code() == ErrorCode::deadline_exceeded, c.status().to_string());
    CHECK(seconds_since(t0) < 3.0);
    WorkerConfig wc = test_worker_config();
    wc.dispatcher_address = silent.address();
    wc.connect_timeout = std::chrono::milliseconds(700);
    wc.dispatcher_timeout = std::chrono::milliseconds(700); // (it waits for a late dispatcher)
    WorkerServer worker{wc};
    t0 = clk::now();
    auto st = worker.start();
    CHECK(st.code() == ErrorCode::deadline_exceeded);
    CHECK(seconds_since(t0) < 4.0);
  }
}
