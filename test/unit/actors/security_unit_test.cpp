// CAF-free security pieces: admission tokens, BASP header checks of the frame guard, and a
// token-protected in-process cluster (refused client, admitted client).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "net/admission.hpp"
#include "net/admitted_peers.hpp"
#include "net/frame_guard.hpp"
#include "net/node_key.hpp"
#include "cluster_fixture.hpp"

using namespace conveyor;
using namespace conveyor::actors;

TEST_CASE("admission: constant-time comparison and refusals that never echo the token") {
  CHECK(constant_time_equal("abc", "abc"));
  CHECK(!constant_time_equal("abc", "abd"));
  CHECK(!constant_time_equal("abc", "abcd"));
  CHECK(!constant_time_equal("", "a"));
  CHECK(check_admission("", "anything", "worker").ok());
  CHECK(check_admission("tok", "tok", "worker").ok());
  Status none = check_admission("tok", "", "worker");
  CHECK(none.code() == ErrorCode::permission_denied);
  CHECK(none.message().find("presented none") != std::string::npos);
  Status wrong = check_admission("tok-secret", "guess", "client");
  CHECK(wrong.message().find("a wrong one") != std::string::npos);
  CHECK(wrong.message().find("tok-secret") == std::string::npos);
  CHECK(wrong.message().find("guess") == std::string::npos);
}

TEST_CASE("admission: tokens from the flag, a private file or the environment") {
  CHECK(*load_auth_token("x", "") == "x");
  CHECK(load_auth_token("x", "/some/file").status().code() == ErrorCode::invalid_argument);
  const std::string path = "/tmp/conveyor-token-test-" + std::to_string(::getpid());
  std::ofstream(path) << "from-file\n";
  ::chmod(path.c_str(), 0600);
  CHECK(*load_auth_token("", path) == "from-file");
  ::chmod(path.c_str(), 0644);
  CHECK(load_auth_token("", path).status().message().find("chmod 600") != std::string::npos);
  std::remove(path.c_str());
  CHECK(load_auth_token("", path).status().code() == ErrorCode::invalid_argument);
  ::setenv("CONVEYOR_AUTH_TOKEN", "from-env", 1);
  CHECK(*load_auth_token("", "") == "from-env");
  ::unsetenv("CONVEYOR_AUTH_TOKEN");
  CHECK(load_auth_token("", "")->empty());
}

TEST_CASE("frame guard: BASP headers are checked before anything is read") {
  GuardLimits limits;
  unsigned char h[32] = {};
  auto set = [&](unsigned char op, uint32_t len) {
    h[0] = op;
    h[4] = static_cast<unsigned char>(len >> 24);
    h[5] = static_cast<unsigned char>(len >> 16);
    h[6] = static_cast<unsigned char>(len >> 8);
    h[7] = static_cast<unsigned char>(len);
  };
  set(1, 100);
  CHECK(check_basp_header(h, false, false, limits).ok());
  set(1, 0xFFFFFFFFu); // the packet
  CHECK(check_basp_header(h, false, false, limits).code() == ErrorCode::resource_exhausted);
  set(2, 10); // a message before the handshake
  CHECK(!check_basp_header(h, false, false, limits).ok());
  CHECK(check_basp_header(h, true, false, limits).ok());
  set(9, 0); // no such operation
  CHECK(!check_basp_header(h, true, true, limits).ok());
  set(2, limits.max_frame_bytes + 1);
  CHECK(check_basp_header(h, true, true, limits).code() == ErrorCode::resource_exhausted);
  // No token required: every peer is admitted once its handshake was seen.
  set(2, 64u << 20);
  CHECK(check_basp_header(h, true, false, limits).ok());
}

TEST_CASE("frame guard: with a token, a peer not yet admitted gets only the pre-auth cap") {
  GuardLimits limits;
  limits.require_admission = true;
  unsigned char h[32] = {};
  h[0] = 2; // direct message
  auto set_len = [&](uint32_t len) {
    h[4] = static_cast<unsigned char>(len >> 24);
    h[5] = static_cast<unsigned char>(len >> 16);
    h[6] = static_cast<unsigned char>(len >> 8);
    h[7] = static_cast<unsigned char>(len);
  };
  set_len(limits.preauth_max_bytes);
  CHECK(check_basp_header(h, true, false, limits).ok());
  set_len(limits.preauth_max_bytes + 1);
  auto refused = check_basp_header(h, true, false, limits);
  CHECK(refused.code() == ErrorCode::resource_exhausted);
  CHECK(refused.message().find("before the peer presents the admission token") !=
        std::string::npos);
  set_len(64u << 20); // the announced frame: only for an admitted node
  CHECK(check_basp_header(h, true, false, limits).code() == ErrorCode::resource_exhausted);
  CHECK(check_basp_header(h, true, true, limits).ok());
}

TEST_CASE(
  "admitted peers: a node's key is its client handshake payload, admitted until forgotten") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  const auto key = node_key(sys.node());
  CHECK(!key.empty());
  CHECK(key.size() <= admitted_peers::kMaxKeyBytes);
  CHECK(!admitted_peers::admitted(key));
  admitted_peers::admit(key);
  CHECK(admitted_peers::admitted(key));
  const auto generation = admitted_peers::generation();
  admitted_peers::forget(key);
  CHECK(!admitted_peers::admitted(key));
  CHECK(admitted_peers::generation() != generation);
  admitted_peers::admit(""); // an empty key (a handshake without payload) is never admitted
  CHECK(!admitted_peers::admitted(""));
}

TEST_CASE("admission: a token-protected dispatcher refuses a client without it") {
  DispatcherConfig dc = test::test_dispatcher_config();
  dc.network.auth_token = "unit-secret";
  DispatchServer dispatcher{dc};
  REQUIRE(dispatcher.start().ok());
  ClientConfig cc;
  cc.network = test::test_network();
  auto refused = Client::connect(dispatcher.target(), cc);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == ErrorCode::permission_denied);
  CHECK(refused.status().message().find("token") != std::string::npos);
  cc.network.auth_token = "unit-secret";
  auto admitted = Client::connect(dispatcher.target(), cc);
  CHECK(admitted.ok());
  WorkerConfig wc = test::test_worker_config();
  wc.dispatcher_address = dispatcher.target();
  WorkerServer tokenless{wc};
  Status st = tokenless.start();
  CHECK(st.code() == ErrorCode::permission_denied);
}

TEST_CASE("admission gate: the worker's check of assign_task / get_elements, one compare each") {
  AdmissionGate open;
  CHECK(!open.enabled());
  CHECK(open.accepts(""));
  CHECK(open.admit("anything", "consumer 1").ok());
  AdmissionGate gate{"gate-secret", "worker"};
  CHECK(gate.enabled());
  CHECK(gate.accepts("gate-secret"));
  CHECK(!gate.accepts(""));
  CHECK(!gate.accepts("gate-secreT"));
  CHECK(!gate.accepts("gate-secret-and-more"));
  CHECK(gate.admit("gate-secret", "consumer 1").ok());
  Status none = gate.admit("", "consumer 1");
  CHECK(none.code() == ErrorCode::permission_denied);
  CHECK(none.message().find("the worker requires an admission token") != std::string::npos);
  CHECK(none.message().find("consumer 1 presented none") != std::string::npos);
  Status wrong = gate.admit("gate-guess", "consumer 1");
  CHECK(wrong.message().find("a wrong one") != std::string::npos);
  CHECK(wrong.message().find("gate-secret") == std::string::npos);
  CHECK(wrong.message().find("gate-guess") == std::string::npos);
}

TEST_CASE("admission: a token-protected in-process cluster serves an admitted client (jobs and "
          "reads carry it)") {
  DispatcherConfig dc = test::test_dispatcher_config();
  dc.network.auth_token = "unit-secret";
  WorkerConfig wc = test::test_worker_config();
  wc.network.auth_token = "unit-secret";
  test::TestCluster cluster{2, dc, wc};
  ClientConfig cc = test::test_client_config();
  cc.network.auth_token = "unit-secret";
  auto client = cluster.client(cc);
  for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    DistributeOptions o;
    o.policy = policy;
    auto stream = client.distribute(Dataset::range(5), o);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    CHECK(test::ints(test::read_all(*stream)).size() == (policy == ShardingPolicy::off ? 10u : 5u));
  }
}
