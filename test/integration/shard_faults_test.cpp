// Shard formats over HTTP while a worker is SIGKILLed mid-shard and the server fails requests
// (503s, connection resets): every record of WebDataset, CSV and TFRecord objects arrives exactly
// once in DYNAMIC mode; OFF gives each worker every record, FILE sharding splits the objects.
#include <stdlib.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "pipeline/io/tfrecord.hpp"
#include "test/integration/cluster.hpp"
#include "test/support/free_port.hpp"
#include "test/support/http_server.hpp"
#include "test/support/tar_archive.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

constexpr int kShards = 4;
constexpr int kPerShard = 150;

// Four objects of each format under DIR/data/, kPerShard records each, every record distinct.
struct ShardObjects {
  std::string dir;
  ShardObjects() {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "conveyor-shards-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    std::filesystem::create_directory(dir + "/data");
    for (int s = 0; s < kShards; ++s) {
      const std::string n = std::to_string(s);
      std::vector<std::pair<std::string, std::string>> files;
      std::ofstream csv(dir + "/data/c" + n + ".csv");
      csv << "id,label\n";
      auto tfr = TFRecordWriter::open(dir + "/data/r" + n + ".tfrecord");
      REQUIRE(tfr.ok());
      for (int i = 0; i < kPerShard; ++i) {
        const std::string id = n + "_" + std::to_string(i);
        files.push_back({"s" + id + ".txt", "v" + id});
        files.push_back({"s" + id + ".cls", std::to_string(i % 10)});
        csv << s * 1000 + i << ",\"l, " << id << "\"\n";
        REQUIRE((*tfr)->write("r" + id).ok());
      }
      REQUIRE((*tfr)->close().ok());
      std::ofstream(dir + "/data/w" + n + ".tar", std::ios::binary) << tar_of(files);
    }
  }
  ~ShardObjects() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// `source(["P0", ...])` over the objects `prefix` + `stem` + K + `ext`.
std::string over(const std::string& source, const std::string& prefix, const std::string& stem,
                 const std::string& ext, const std::string& args = "") {
  std::string files = "[";
  for (int s = 0; s < kShards; ++s)
    files += (s ? ", \"" : "\"") + prefix + stem + std::to_string(s) + ext + "\"";
  return source + "(" + files + "]" + args + ")";
}

struct Format {
  const char* name;
  std::string (*dataset)(const std::string& prefix);
};

const Format kFormats[] = {
  {"webdataset",
   [](const std::string& p) { return over("webdataset", p, "w", ".tar", ", [\"txt\", \"cls\"]"); }},
  {"csv",
   [](const std::string& p) {
     return over("csv", p, "c", ".csv", ", [\"int64\", \"string\"], header=true");
   }},
  {"tfrecord", [](const std::string& p) { return over("tfrecord", p, "r", ".tfrecord"); }},
};

} // namespace

TEST_CASE("http shards: a worker SIGKILLed mid-shard while the server fails requests: each "
          "record of webdataset, csv and tfrecord exactly once (DYNAMIC)") {
  ShardObjects objects;
  // Every format has one object that answers 503 twice and one whose connection is reset
  // mid-body once: the reads retry them.
  HttpTestServer server(
    objects.dir, {"--fault", "/data/w1.tar:503:2", "--fault", "/data/w2.tar:reset:1", "--fault",
                  "/data/c1.csv:503:2", "--fault", "/data/c2.csv:reset:1", "--fault",
                  "/data/r1.tfrecord:503:2", "--fault", "/data/r2.tfrecord:reset:1"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  const std::string data = server.url("/data/");
  const std::vector<std::string> http_flags{"--allow-url",          data, "--http-retries", "4",
                                            "--http-retry-backoff", "5"};
  for (const Format& format : kFormats) {
    CAPTURE(format.name);
    Cluster cluster(0, {"--allow-url", data});
    cluster.add_worker(http_flags);
    cluster.add_worker(http_flags);
    const auto want = expected_sorted_lines(format.dataset(objects.dir + "/data/"));
    REQUIRE(want.size() == static_cast<std::size_t>(kShards * kPerShard));
    // 2 ms per record: the SIGKILL lands while both workers are inside a shard.
    auto reader = cluster.start_read(format.dataset(data) + ".map(sleep_us(us=2000))",
                                     {"--mode", "dynamic", "--max-outstanding", "8"});
    REQUIRE_MESSAGE(reader->wait_for_stdout_lines(kPerShard / 2, Millis{60000}),
                    reader->describe());
    cluster.worker(1).signal(SIGKILL);
    auto code = reader->wait_exit(Millis{120000});
    REQUIRE(code.has_value());
    CHECK_MESSAGE(*code == 0, std::string(reader->describe() + cluster.describe()));
    CHECK(sorted(reader->stdout_lines()) == want);
  }
}

TEST_CASE("http shards: OFF gives every record once per worker, FILE sharding each record once") {
  ShardObjects objects;
  HttpTestServer server(objects.dir, {"--fault", "/data/w3.tar:503:1"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  const std::string data = server.url("/data/");
  // FILE sharding needs the workers fixed up front (tf.data's rule): ports picked here.
  const uint16_t ports[] = {free_loopback_port(), free_loopback_port()};
  const std::string a0 = "127.0.0.1:" + std::to_string(ports[0]);
  const std::string a1 = "127.0.0.1:" + std::to_string(ports[1]);
  Cluster cluster(0, {"--allow-url", data, "--worker-addresses", a0 + "," + a1});
  for (uint16_t port : ports)
    cluster.add_worker({"--allow-url", data, "--http-retries", "3", "--http-retry-backoff", "5",
                        "--port", std::to_string(port)});
  for (const Format& format : kFormats) {
    CAPTURE(format.name);
    const std::string local = format.dataset(objects.dir + "/data/");
    auto r = cluster.read(format.dataset(data), {"--mode", "file"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == expected_sorted_lines(local));
    r = cluster.read(format.dataset(data), {"--mode", "off"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == expected_sorted_lines(local, 2));
  }
}
