// Security between real processes: mutual TLS (a throwaway CA and certificates made with the
// `openssl` CLI), admission tokens, and path confinement on the workers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/support/pki.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kToken{"--auth-token", "s3cret-token-for-tests"};

} // namespace

TEST_CASE("security: a TLS + token cluster serves admitted readers - others are refused clearly") {
  Pki pki;
  const std::string data = pki.dir + "/data";
  REQUIRE(::mkdir(data.c_str(), 0700) == 0);
  std::ofstream(data + "/a.txt") << "alpha\nbeta\n";

  // The guard's connection cap and idle timeout still apply under TLS, so they are accepted there.
  Cluster cluster(0,
                  pki.flags() + kToken +
                    std::vector<std::string>{"--max-connections", "64", "--idle-timeout", "60000"});
  cluster.add_worker(pki.flags() + kToken +
                     std::vector<std::string>{"--allow-path", data, "--max-connections", "64"});
  const std::string dataset = "text_lines([\"" + data + "/a.txt\"])";

  SUBCASE("admitted: TLS and the token") {
    auto r = cluster.read(dataset, pki.flags() + kToken);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(r.lines.size() == 2);
  }
  SUBCASE("no token: refused, and the dispatcher logs the refusal without the token") {
    auto r =
      cluster.read(dataset, pki.flags() + std::vector<std::string>{"--connect-timeout", "5000"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "permission_denied"));
    CHECK(contains(r.stderr_text, "token"));
    CHECK(r.lines.empty());
    CHECK(cluster.dispatcher().wait_for_output("refused", Millis{5000}));
    CHECK(!contains(cluster.dispatcher().describe(), "s3cret-token-for-tests"));
  }
  SUBCASE("conveyor status: answered with TLS and the token, refused without the token") {
    const std::vector<std::string> status{"status", "--dispatcher", cluster.address(),
                                          "--timeout-ms", "5000"};
    auto ok = run_conveyor(status + pki.flags() + kToken, Millis{20000}, "status-admitted");
    CAPTURE(ok.describe);
    CHECK(ok.exit_code == 0);
    CHECK(contains(ok.stdout_text, "workers: 1"));
    auto refused = run_conveyor(status + pki.flags(), Millis{20000}, "status-no-token");
    CAPTURE(refused.describe);
    CHECK(refused.exit_code == 1);
    CHECK(contains(refused.stderr_text, "permission_denied"));
    CHECK(!contains(refused.stdout_text, "workers:"));
    CHECK(cluster.dispatcher().wait_for_output("refused a status request", Millis{5000}));
  }
  SUBCASE("an empty --auth-token is refused at start-up instead of meaning no token") {
    auto r =
      run_conveyor({"dispatcher", "--port", "0", "--auth-token", ""}, Millis{20000}, "empty-token");
    CAPTURE(r.describe);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.stderr_text, "`--auth-token` is empty"));
  }
  SUBCASE("a wrong token is refused") {
    auto r = cluster.read(dataset, pki.flags() + std::vector<std::string>{"--auth-token", "wrong"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "a wrong one"));
  }
  SUBCASE("a plain (non-TLS) reader fails within its connect timeout, naming TLS") {
    auto r = cluster.read(dataset, kToken + std::vector<std::string>{"--connect-timeout", "2000"},
                          Millis{20000});
    CAPTURE(r.describe);
    REQUIRE(r.exit_code.has_value());
    CHECK(*r.exit_code == 1);
    CHECK(contains(r.stderr_text, "TLS"));
  }
  SUBCASE("a certificate from another CA is refused") {
    auto r = cluster.read(
      dataset, pki.flags("rogue") + kToken + std::vector<std::string>{"--connect-timeout", "3000"},
      Millis{20000});
    CAPTURE(r.describe);
    REQUIRE(r.exit_code.has_value());
    CHECK(*r.exit_code == 1);
    CHECK(r.lines.empty());
  }
  SUBCASE("a worker without the token is refused with a clear error and exits") {
    auto w = ChildProcess::conveyor(
      std::vector<std::string>{"worker", "--dispatcher", cluster.address(), "--port", "0"} +
        pki.flags(),
      "tokenless-worker");
    REQUIRE(w.ok());
    auto code = (*w)->wait_exit(Millis{20000});
    CAPTURE((*w)->describe());
    CHECK(code == 1);
    CHECK(contains((*w)->describe(), "refused this worker"));
    CHECK(contains((*w)->describe(), "token"));
  }
  SUBCASE("paths outside --allow-path fail at the consumer: files, `..`, list_files, cache") {
    for (const std::string& bad :
         {std::string{"text_lines([\"/etc/passwd\"])"},
          "text_lines([\"" + data + "/../../../../../../etc/passwd\"])",
          std::string{"list_files(\"/etc/*\")"}, "range(3).cache(\"" + pki.dir + "/outside\")"}) {
      auto r = cluster.read(bad, pki.flags() + kToken);
      CAPTURE(bad);
      CAPTURE(r.describe);
      CHECK(r.exit_code == 1);
      CHECK(contains(r.stderr_text, "permission_denied"));
      CHECK(contains(r.stderr_text, "outside the paths this worker may"));
      CHECK(r.lines.empty());
    }
  }
}

// The dispatcher expands the file patterns of a DYNAMIC read on its own host (the splits name
// single files), so it is confined as the workers are: before, any directory's file names reached
// the splits, whatever the workers' --allow-path.
TEST_CASE(
  "security: the dispatcher lists a DYNAMIC read's file patterns only under its --allow-path") {
  Pki pki; // for its temporary directory
  const std::string data = pki.dir + "/data", secret = pki.dir + "/secret";
  REQUIRE(::mkdir(data.c_str(), 0700) == 0);
  REQUIRE(::mkdir(secret.c_str(), 0700) == 0);
  std::ofstream(data + "/a.txt") << "alpha\nbeta\n";
  std::ofstream(data + "/b.txt") << "gamma\n";
  std::ofstream(secret + "/hidden-name.txt") << "x\n";

  Cluster cluster(0, {"--allow-path", data});
  // The worker may read both: only the dispatcher's roots stand between a reader and `secret`.
  cluster.add_worker({"--allow-path", pki.dir});
  const std::vector<std::string> dynamic{"--mode", "dynamic"};

  auto r = cluster.read("text_lines([\"" + data + "/*.txt\"])", dynamic);
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(sorted(r.lines) == std::vector<std::string>{"\"alpha\"", "\"beta\"", "\"gamma\""});

  for (const std::string& bad :
       {"text_lines([\"" + secret + "/*.txt\"])", "list_files(\"" + secret + "/*\")",
        "text_lines([\"" + data + "/../secret/*.txt\"])"}) {
    r = cluster.read(bad, dynamic);
    CAPTURE(bad);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "permission_denied"));
    CHECK(contains(r.stderr_text, "outside the paths this dispatcher may list"));
    CHECK_FALSE(contains(r.stderr_text, "hidden-name"));
    CHECK(r.lines.empty());
  }
}

// CAF's openssl module leaves OpenSSL errors queued on its multiplexer thread (a peer that exits
// without close_notify queues one), and the next read on any other connection then "failed": each
// reader that left cut the worker's connection to the dispatcher (net/openssl_error_queue.hpp).
TEST_CASE("security: with TLS, readers that come and go cut no other connection") {
  Pki pki;
  Cluster cluster(0, pki.flags() + kToken);
  cluster.add_worker(pki.flags() + kToken);
  for (int i = 0; i < 5; ++i) {
    auto r = cluster.read("range(" + std::to_string(3 + i) + ")", pki.flags() + kToken);
    CAPTURE(r.describe);
    REQUIRE(r.exit_code == 0);
    CHECK(r.lines.size() == static_cast<std::size_t>(3 + i));
  }
  // A long-lived reader keeps its connections while others come and go beside it.
  auto reader =
    cluster.start_read("range(1000000000).map(sleep_us(us=200))", pki.flags() + kToken, "long");
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(1, Millis{20000}), reader->describe());
  for (int i = 0; i < 3; ++i)
    CHECK(cluster.read("range(2)", pki.flags() + kToken).exit_code == 0);
  const auto lines = reader->stdout_lines().size();
  CHECK_MESSAGE(reader->wait_for_stdout_lines(lines + 100, Millis{20000}), reader->describe());
  const std::string dispatcher_log = cluster.dispatcher().stderr_text();
  const std::string worker_log = cluster.worker(0).stderr_text();
  CAPTURE(cluster.describe());
  CHECK_FALSE(contains(dispatcher_log, "remote_link_unreachable"));
  CHECK_FALSE(contains(dispatcher_log, "lost the connection to consumer"));
  CHECK_FALSE(contains(worker_log, "lost the dispatcher"));
  CHECK_FALSE(contains(reader->stderr_text(), "lost the dispatcher"));
  CHECK_FALSE(reader->exited());
  reader->stop();
  // Its job is released before the cluster stops (the worker then has nothing left to drain).
  CHECK(cluster.dispatcher().wait_for_output("released (its consumer left)", Millis{20000}));
}

TEST_CASE("security: bad TLS and token flags are refused at start-up, naming the flag") {
  Pki pki;
  auto r = run_conveyor({"dispatcher", "--port", "0", "--tls-cert", pki.dir + "/ca-node.pem"},
                        Millis{20000}, "badtls");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "all three"));
  r = run_conveyor({"dispatcher", "--port", "0", "--tls-cert", pki.dir + "/ca-node.pem",
                    "--tls-key", pki.dir + "/rogue-node.key", "--tls-ca", pki.dir + "/ca.pem"},
                   Millis{20000}, "badtls");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "does not match `--tls-cert`"));
  // A certificate (with its own key) from another CA than --tls-ca: every peer would refuse it.
  for (const char* command : {"dispatcher", "worker", "read", "status"}) {
    std::vector<std::string> args{command};
    if (std::string{command} != "dispatcher")
      args = args + std::vector<std::string>{"--dispatcher", "127.0.0.1:1"};
    if (std::string{command} != "read" && std::string{command} != "status")
      args = args + std::vector<std::string>{"--port", "0"};
    if (std::string{command} == "read")
      args = args + std::vector<std::string>{"--dataset", "range(3)"};
    r =
      run_conveyor(args + std::vector<std::string>{"--tls-cert", pki.cert("rogue"), "--tls-key",
                                                   pki.key("rogue"), "--tls-ca", pki.ca_file("ca")},
                   Millis{20000}, "rogue-cert");
    CAPTURE(command);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.stderr_text, "`--tls-cert` " + pki.cert("rogue") +
                                    " does not verify against `--tls-ca` " + pki.ca_file("ca")));
  }
  // The frame guard sees only encrypted bytes under TLS: a frame-size limit would do nothing.
  r = run_conveyor(
    std::vector<std::string>{"dispatcher", "--port", "0", "--max-frame-bytes", "2048"} +
      pki.flags(),
    Millis{20000}, "tls-frame-limit");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "`--max-frame-bytes` has no effect with TLS"));
  const std::string token_file = pki.dir + "/token";
  std::ofstream(token_file) << "abc\n";
  ::chmod(token_file.c_str(), 0644);
  r = run_conveyor({"dispatcher", "--port", "0", "--token-file", token_file}, Millis{20000},
                   "badtoken");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "chmod 600"));
}

TEST_CASE(
  "security: a job passing --job-memory-limit fails at its consumer - the worker serves others") {
  Cluster cluster(0);
  cluster.add_worker({"--job-memory-limit", "1000000"});
  auto r = cluster.read("range(1000000).shuffle(1000000)");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.stderr_text, "resource_exhausted"));
  CHECK(contains(r.stderr_text, "memory budget"));
  auto ok = cluster.read("range(10)");
  CAPTURE(ok.describe);
  CHECK(ok.exit_code == 0);
  CHECK(ok.lines.size() == 10);
}

TEST_CASE("security: a budget below the task buffer pauses a job for its slow reader instead of "
          "failing it") {
  // 16 MB of 80 KB batches through a 4 MB budget (the task buffer alone may hold 32 MiB), read
  // one element per request: the buffer stops at half the budget, as a full buffer does. (Small
  // enough for the sanitizer build: 200 requests.)
  Cluster cluster(0);
  cluster.add_worker({"--job-memory-limit", "4000000"});
  auto r =
    cluster.read("range(2000000).batch(10000)", {"--max-outstanding", "1", "--print", "digest"});
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 200);
}

TEST_CASE(
  "security: large elements travel the TLS bulk path, byte-exact - a plain bulk peer is refused") {
  // 300 KB elements go as bulk frames (task_runner.hpp bulk_min_bytes); under TLS the bulk
  // connection is a mutual-TLS session of its own (net/tls_stream.hpp).
  Pki pki;
  const std::string dataset = "range(40).map(bytes(size=300000))";
  const std::vector<std::string> read_flags{"--mode", "dynamic", "--print", "digest"};
  Cluster plain(1);
  auto expected = plain.read(dataset, read_flags);
  REQUIRE_MESSAGE(expected.exit_code == 0, expected.describe);
  REQUIRE(expected.lines.size() == 40);

  Cluster tls(0, pki.flags());
  auto& worker = tls.add_worker(pki.flags() + std::vector<std::string>{"--log-level", "debug"});
  auto r = tls.read(dataset, pki.flags() + read_flags);
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(sorted(r.lines) == sorted(expected.lines));
  CHECK_MESSAGE(worker.wait_for_output("TLS bulk channel", Millis{5000}), worker.describe());
  // OFF, one worker: the elements in their order, although the channel spreads its frames over
  // several TLS connections (net/bulk.cpp) and a later batch's frames can overtake.
  auto in_order = plain.read(dataset, {"--print", "digest"});
  REQUIRE_MESSAGE(in_order.exit_code == 0, in_order.describe);
  auto tls_in_order =
    tls.read(dataset, pki.flags() + std::vector<std::string>{"--print", "digest"});
  REQUIRE_MESSAGE(tls_in_order.exit_code == 0, tls_in_order.describe);
  CHECK(tls_in_order.lines == in_order.lines);
  CHECK_MESSAGE(worker.wait_for_output("joined", Millis{5000}), worker.describe());

  // The worker's bulk port, from its start-up line "bulk data path on HOST:PORT (mutual TLS)".
  const std::string text = worker.describe();
  const std::string marker = "bulk data path on 127.0.0.1:";
  const auto at = text.find(marker);
  REQUIRE_MESSAGE(at != std::string::npos, text);
  CHECK(text.find("(mutual TLS)", at) != std::string::npos);
  const int port = std::stoi(text.substr(at + marker.size()));
  // A peer speaking the plain bulk protocol: its hello is not a TLS record.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const char hello[16] = {'C', 'V', 'B', 'H', 1};
  CHECK(::write(fd, hello, sizeof hello) == static_cast<ssize_t>(sizeof hello));
  CHECK_MESSAGE(worker.wait_for_output("refused a TLS bulk connection", Millis{5000}),
                worker.describe());
  char buf[64];
  ssize_t got = 0;
  while ((got = ::read(fd, buf, sizeof buf)) > 0) {
  }
  CHECK(got == 0); // closed, nothing served
  ::close(fd);
}

namespace {

// A worker SIGKILLed while its bulk channel carries frames (TLS: 4 connections, each with its
// session actors; plain TCP: one connection, written by the worker's bulk writer): every
// connection of the channel breaks, the consumer hears the loss once, its DYNAMIC job hands the
// lost splits out again, and the read ends OK with every element exactly once, byte-exact.
void kill_worker_mid_bulk_read(const std::vector<std::string>& node_flags,
                               const std::string& channel_up) {
  // Long enough (2.4 s of work on one worker) that a victim slow to start (sanitizer build, busy
  // machine) still gets splits before the other worker took them all.
  const std::string dataset = "range(600).map(sleep_us(us=4000)).map(bytes(size=300000))";
  const std::vector<std::string> read_flags{"--mode", "dynamic", "--print", "digest"};
  Cluster plain(1);
  auto expected = plain.read(dataset, read_flags);
  REQUIRE_MESSAGE(expected.exit_code == 0, expected.describe);
  REQUIRE(expected.lines.size() == 600);

  Cluster cluster(0, node_flags);
  const std::vector<std::string> debug{"--log-level", "debug"};
  cluster.add_worker(node_flags + debug);
  auto& victim = cluster.add_worker(node_flags + debug);
  auto reader = cluster.start_read(dataset, node_flags + read_flags);
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(60, kReadTimeout), reader->describe());
  REQUIRE_MESSAGE(victim.wait_for_output(channel_up, Millis{20000}),
                  victim.describe()); // its channel is up
  victim.signal(SIGKILL);
  REQUIRE(victim.wait_exit(Millis{10000}).has_value()); // (the teardown then knows it was killed)
  auto code = reader->wait_exit(kReadTimeout);
  REQUIRE(code.has_value());
  CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
  CHECK(sorted(reader->stdout_lines()) == sorted(expected.lines));
  // The channel broke; the consumer reports its loss once (or not at all, when it learned of the
  // worker's death first).
  const std::string text = reader->stderr_text();
  std::size_t reports = 0;
  for (auto at = text.find("bulk channel to worker"); at != std::string::npos;
       at = text.find("bulk channel to worker", at + 1))
    ++reports;
  CHECK_MESSAGE(reports <= 1, text);
}

} // namespace

TEST_CASE("security: a worker SIGKILLed mid-read on the TLS bulk path - DYNAMIC loses nothing") {
  Pki pki;
  kill_worker_mid_bulk_read(pki.flags(), "joined"); // all 4 connections of its channel are in
}

TEST_CASE("fault: a worker SIGKILLed mid-read on the plain bulk path - DYNAMIC loses nothing") {
  kill_worker_mid_bulk_read({}, "opened");
}

// A reader SIGKILLed while the worker's bulk writer still has frames for it: the writer drops
// that connection (its socket broke) and the worker serves the next reader, byte-exact; the
// cluster's teardown then checks that the worker exits cleanly.
TEST_CASE(
  "fault: a reader SIGKILLed mid-read of large elements - the worker serves the next reader") {
  Cluster cluster(1);
  const std::string small = "range(40).map(bytes(size=300000))";
  const std::vector<std::string> digests{"--mode", "off", "--print", "digest"};
  auto before = cluster.read(small, digests);
  REQUIRE_MESSAGE(before.exit_code == 0, before.describe);
  REQUIRE(before.lines.size() == 40);
  auto victim = cluster.start_read("range(100000).map(bytes(size=300000))",
                                   {"--mode", "off", "--print", "digest"}, "victim");
  REQUIRE_MESSAGE(victim->wait_for_stdout_lines(30, kReadTimeout), victim->describe());
  victim->signal(SIGKILL);
  REQUIRE(victim->wait_exit(kReadTimeout).has_value());
  auto after = cluster.read(small, digests);
  CHECK_MESSAGE(after.exit_code == 0, std::string(after.describe + cluster.describe()));
  CHECK(sorted(after.lines) == sorted(before.lines));
}
