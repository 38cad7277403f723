// Static sharding in the service (reference 003: ShardingPolicy FILE, DATA, FILE_OR_DATA, HINT):
// the dispatcher's fixed worker list gives worker i of n its shard, and the reference's errors.
#include <doctest/doctest.h>

#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cluster_fixture.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/support/free_port.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

uint16_t free_port() {
  auto port = conveyor::testing::free_loopback_port();
  REQUIRE(port != 0);
  return port;
}

struct FixedCluster {
  std::vector<uint16_t> ports;
  std::unique_ptr<TestCluster> cluster;

  // `listed` workers in the dispatcher's fixed list; the first `started` of them run.
  explicit FixedCluster(int listed, int started = -1) {
    auto dc = test_dispatcher_config();
    for (int i = 0; i < listed; ++i) {
      ports.push_back(free_port());
      dc.worker_addresses.push_back("127.0.0.1:" + std::to_string(ports.back()));
    }
    cluster = std::make_unique<TestCluster>(0, dc);
    for (int i = 0; i < (started < 0 ? listed : started); ++i)
      start_worker(i);
  }
  void start_worker(int i) {
    auto wc = test_worker_config();
    wc.port = ports[static_cast<std::size_t>(i)];
    cluster->add_worker(wc);
  }
};

DistributeOptions policy(ShardingPolicy p) {
  DistributeOptions o;
  o.policy = p;
  return o;
}

Dataset parse(const std::string& text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return *d;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(i);
  return v;
}

// Text files holding the integers [file * per_file, (file + 1) * per_file), one per line.
struct TextFiles {
  std::filesystem::path dir;
  std::vector<std::string> paths;
  TextFiles(int files, int per_file) {
    char pattern[] = "/tmp/conveyor-static-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    dir = pattern;
    for (int f = 0; f < files; ++f) {
      auto p = dir / ("part-" + std::to_string(f) + ".txt");
      std::ofstream out{p};
      for (int i = 0; i < per_file; ++i)
        out << f * per_file + i << "\n";
      paths.push_back(p.string());
    }
  }
  ~TextFiles() { std::filesystem::remove_all(dir); }
  std::string list() const {
    std::string s = "[";
    for (const auto& p : paths)
      s += (s.size() > 1 ? ", \"" : "\"") + p + "\"";
    return s + "]";
  }
};

std::vector<int64_t> line_ints(const std::vector<Element>& elements) {
  std::vector<int64_t> v;
  for (const auto& e : elements)
    v.push_back(std::stoll(e[0].strings()[0]));
  return v;
}

} // namespace

TEST_CASE("DATA: worker i of the fixed list keeps elements i, i+n, ... - together each once") {
  FixedCluster fixed{2};
  auto client = fixed.cluster->client();
  auto stream = client.distribute(Dataset::range(10), policy(ShardingPolicy::data));
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  CHECK(sorted(ints(read_all(*stream))) == iota(10));
  auto per_worker = stream->stats().per_worker;
  REQUIRE(per_worker.size() == 2);
  for (const auto& [worker, n] : per_worker)
    CHECK(n == 5);
}

TEST_CASE("DATA: a listed worker that is not up holds the read open - its shard is not lost") {
  FixedCluster fixed{3, /*started=*/2};
  auto client = fixed.cluster->client();
  auto stream = client.distribute(Dataset::range(30), policy(ShardingPolicy::data));
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  std::vector<int64_t> got;
  Element e;
  bool end = false;
  Status st;
  // Shards 0 and 1 arrive; then the read waits for shard 2 instead of ending short by a third.
  while ((st = stream->next(e, end, std::chrono::milliseconds(1500))).ok() && !end)
    got.push_back(e[0].as_int64());
  CHECK_FALSE(end);
  CHECK(st.code() == ErrorCode::deadline_exceeded);
  CHECK(got.size() == 20);
  fixed.start_worker(2); // the third listed worker comes up: its shard arrives, then the end
  while ((st = stream->next(e, end, std::chrono::milliseconds(20000))).ok() && !end)
    got.push_back(e[0].as_int64());
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(end);
  CHECK(sorted(got) == iota(30));
}

TEST_CASE("FILE: each worker reads its files - FILE_OR_DATA takes FILE when it can") {
  FixedCluster fixed{2};
  TextFiles files{4, 5};
  auto client = fixed.cluster->client();
  for (auto p : {ShardingPolicy::file, ShardingPolicy::file_or_data}) {
    CAPTURE(to_string(p));
    auto stream = client.distribute(parse("text_lines(" + files.list() + ")"), policy(p));
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    CHECK(sorted(line_ints(read_all(*stream))) == iota(20));
    for (const auto& [worker, n] : stream->stats().per_worker)
      CHECK(n == 10); // two files of five lines each
  }
}

TEST_CASE(
  "FILE_OR_DATA falls back to DATA without files - HINT fills shard(SHARD_HINT, SHARD_HINT)") {
  FixedCluster fixed{3};
  auto client = fixed.cluster->client();
  auto data = client.distribute(Dataset::range(12), policy(ShardingPolicy::file_or_data));
  REQUIRE_MESSAGE(data.ok(), data.status().to_string());
  CHECK(sorted(ints(read_all(*data))) == iota(12));
  auto hint = client.distribute(parse("range(12).shard(SHARD_HINT, SHARD_HINT)"),
                                policy(ShardingPolicy::hint));
  REQUIRE_MESSAGE(hint.ok(), hint.status().to_string());
  CHECK(sorted(ints(read_all(*hint))) == iota(12));
  CHECK(hint->stats().per_worker.size() == 3);
}

TEST_CASE("static sharding errors: no fixed list, FILE without files, fewer files than workers") {
  SUBCASE("a static policy on a dispatcher without --worker-addresses") {
    TestCluster cluster{1};
    auto client = cluster.client();
    for (auto p : {ShardingPolicy::file, ShardingPolicy::data, ShardingPolicy::file_or_data,
                   ShardingPolicy::hint}) {
      auto stream = client.distribute(Dataset::range(4), policy(p));
      REQUIRE_FALSE(stream.ok());
      CHECK(stream.status().code() == ErrorCode::failed_precondition);
      CHECK_MESSAGE(stream.status().message().find("--worker-addresses") != std::string::npos,
                    stream.status().to_string());
    }
  }
  SUBCASE("FILE on a source that reads no files; fewer files than workers") {
    FixedCluster fixed{2};
    auto client = fixed.cluster->client();
    auto no_files = client.distribute(Dataset::range(4), policy(ShardingPolicy::file));
    REQUIRE_FALSE(no_files.ok());
    CHECK(no_files.status().code() == ErrorCode::invalid_argument);
    CHECK_MESSAGE(no_files.status().message().find("file-based dataset source") !=
                    std::string::npos,
                  no_files.status().to_string());
    TextFiles one{1, 3};
    auto few =
      client.distribute(parse("text_lines(" + one.list() + ")"), policy(ShardingPolicy::file));
    REQUIRE_FALSE(few.ok());
    CHECK_MESSAGE(few.status().message().find("at least as many files as workers") !=
                    std::string::npos,
                  few.status().to_string());
  }
}

TEST_CASE("a worker not in the fixed list is refused at registration, naming the list") {
  FixedCluster fixed{1};
  auto wc = test_worker_config();
  wc.dispatcher_address = fixed.cluster->target();
  wc.connect_timeout = std::chrono::milliseconds(5000);
  WorkerServer stranger{wc}; // port 0: not the listed one
  auto st = stranger.start();
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == ErrorCode::permission_denied); // final: refused at once, not retried
  CHECK_MESSAGE(st.message().find("not in the dispatcher's fixed worker list") != std::string::npos,
                st.to_string());
  CHECK(st.message().find("127.0.0.1:" + std::to_string(fixed.ports[0])) != std::string::npos);
}

TEST_CASE("DispatcherConfig::worker_addresses is validated") {
  auto dc = test_dispatcher_config();
  dc.worker_addresses = {"127.0.0.1:7000", "localhost"};
  DispatchServer bad{dc};
  auto st = bad.start();
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(st.message().find("worker_addresses") != std::string::npos, st.to_string());
  dc.worker_addresses = {"127.0.0.1:7000", "127.0.0.1:7000"};
  DispatchServer twice{dc};
  auto st2 = twice.start();
  CHECK(st2.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(st2.message().find("twice") != std::string::npos, st2.to_string());
}

TEST_CASE("worker_addresses: the reference's host:%port% template matches a worker on any port") {
  // Issue 32: entries like "localhost:%port%" were refused; tf.data accepts the template.
  auto dc = test_dispatcher_config();
  dc.worker_addresses = {"127.0.0.1:%port%", "127.0.0.1:%port%"}; // two workers on this host
  TestCluster cluster{0, dc};
  cluster.add_worker(test_worker_config()); // free ports: matched by the template only
  cluster.add_worker(test_worker_config());
  auto client = cluster.client();
  auto stream = client.distribute(Dataset::range(10), policy(ShardingPolicy::data));
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  CHECK(sorted(ints(read_all(*stream))) == iota(10)); // two distinct shards: each element once
  CHECK(stream->stats().per_worker.size() == 2);
  // Each entry holds one worker: a third one of the host is refused.
  auto wc = test_worker_config();
  wc.dispatcher_address = cluster.target();
  WorkerServer third{wc};
  auto st = third.start();
  CHECK(st.code() == ErrorCode::permission_denied);
  // Another host's template is valid too (checked when the dispatcher starts).
  auto other = test_dispatcher_config();
  other.worker_addresses = {"localhost:%port%", "[::1]:%port%"};
  DispatchServer server{other};
  CHECK_MESSAGE(server.start().ok(), "localhost:%port% was refused");
}
