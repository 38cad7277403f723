// Remote objects through real `conveyor` processes: workers read http:// URLs served by
// test/support/http_test_server.py (OFF and DYNAMIC, retries after injected 503s, a truncated body
// as a failed read naming the URL, --allow-url refusals on the worker and the dispatcher), and
// HTTPS verified against --http-ca-file (another CA, or the system's, is refused).
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "pipeline/io/tfrecord.hpp"
#include "test/integration/cluster.hpp"
#include "test/support/http_server.hpp"
#include "test/support/pki.hpp"
#include "test/support/text.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct Objects {
  std::string dir;
  Objects() {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "conveyor-http-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    std::filesystem::create_directory(dir + "/data");
    std::ofstream(dir + "/data/a.txt") << "alpha\nbeta\n";
    std::ofstream(dir + "/data/b.txt") << "gamma\n";
    std::ofstream(dir + "/data/flaky.txt") << "one\ntwo\n";
    std::ofstream(dir + "/data/cut.txt") << "never\ncomplete\n";
    std::ofstream(dir + "/data/t.csv") << "id,label\n1,\"x, y\"\n2,z\n";
    std::ofstream(dir + "/secret.txt") << "hidden\n";
    auto w = TFRecordWriter::open(dir + "/data/r.tfrecord");
    REQUIRE(w.ok());
    for (int i = 0; i < 6; ++i)
      REQUIRE((*w)->write("rec" + std::to_string(i)).ok());
    REQUIRE((*w)->close().ok());
  }
  ~Objects() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::string list(const std::vector<std::string>& urls) {
  std::string out = "[";
  for (const auto& u : urls)
    out += (out.size() > 1 ? ", \"" : "\"") + u + "\"";
  return out + "]";
}

} // namespace

TEST_CASE("http sources: workers read URLs, OFF and DYNAMIC, through faults and refusals") {
  Objects objects;
  HttpTestServer server(
    objects.dir, {"--fault", "/data/flaky.txt:503:2", "--fault", "/data/cut.txt:truncate:-1"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  const std::string data = server.url("/data/");
  const std::vector<std::string> http_flags{"--allow-url",          data, "--http-retries", "3",
                                            "--http-retry-backoff", "5"};
  Cluster cluster(0, {"--allow-url", data});
  cluster.add_worker(http_flags);
  cluster.add_worker(http_flags);
  const std::vector<std::string> dynamic{"--mode", "dynamic"};

  SUBCASE("text_lines OFF: every worker reads every object") {
    auto r = cluster.read("text_lines(" + list({data + "a.txt", data + "b.txt"}) + ")");
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == std::vector<std::string>{"\"alpha\"", "\"alpha\"", "\"beta\"",
                                                      "\"beta\"", "\"gamma\"", "\"gamma\""});
  }
  SUBCASE("tfrecord and csv DYNAMIC: each record once; 503s are retried") {
    auto r = cluster.read("tfrecord(" + list({data + "r.tfrecord"}) + ")", dynamic);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == std::vector<std::string>{"\"rec0\"", "\"rec1\"", "\"rec2\"",
                                                      "\"rec3\"", "\"rec4\"", "\"rec5\""});
    r = cluster.read("text_lines(" + list({data + "flaky.txt", data + "a.txt"}) + ")", dynamic);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) ==
          std::vector<std::string>{"\"alpha\"", "\"beta\"", "\"one\"", "\"two\""});
    r = cluster.read("csv(" + list({data + "t.csv"}) + ", [\"int64\", \"string\"], header=true)",
                     dynamic);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == std::vector<std::string>{"(1, \"x, y\")", "(2, \"z\")"});
  }
  SUBCASE("a body that stays truncated fails the read with an error naming the URL") {
    auto r = cluster.read("text_lines(" + list({data + "cut.txt"}) + ")", dynamic);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, data + "cut.txt"));
    CHECK(contains(r.stderr_text, "truncated body"));
    CHECK_FALSE(contains(r.stdout_text, "complete"));
  }
  SUBCASE("a URL outside --allow-url is refused, naming the flag") {
    const std::string secret = server.url("/secret.txt");
    auto r = cluster.read("text_lines(" + list({secret}) + ")");
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "permission_denied"));
    CHECK(contains(r.stderr_text, "is outside the URLs this worker may read (allowed: "
                                  "--allow-url " +
                                    data + ")"));
    CHECK(r.lines.empty());
    // DYNAMIC: the dispatcher refuses it when the job is made.
    r = cluster.read("text_lines(" + list({data + "../secret.txt"}) + ")", dynamic);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "outside the URLs this dispatcher may read"));
    CHECK_FALSE(contains(r.stdout_text, "hidden"));
  }
}

TEST_CASE(
  "https sources: verified against --http-ca-file, and a server the CA did not sign fails the "
  "read naming the URL") {
  Objects objects;
  Pki pki;
  HttpTestServer server(objects.dir, {"--tls-cert", pki.cert(), "--tls-key", pki.key()});
  REQUIRE_MESSAGE(server.ok(), server.error());
  const std::string data = server.url("/data/");
  REQUIRE(data.rfind("https://localhost:", 0) == 0);
  const std::string files = list({data + "a.txt", data + "b.txt"});

  SUBCASE("the test CA: OFF and DYNAMIC reads") {
    const std::vector<std::string> tls{"--allow-url", data, "--http-ca-file", pki.ca_file()};
    Cluster cluster(0, {"--allow-url", data}); // the dispatcher opens no object
    cluster.add_worker(tls);
    auto r = cluster.read("text_lines(" + files + ")");
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(sorted(r.lines) == std::vector<std::string>{"\"alpha\"", "\"beta\"", "\"gamma\""});
    r = cluster.read("tfrecord(" + list({data + "r.tfrecord"}) + ")", {"--mode", "dynamic"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(r.lines.size() == 6);
  }
  SUBCASE("another CA, or the system's: the certificate is rejected") {
    for (const std::vector<std::string>& ca :
         {std::vector<std::string>{"--http-ca-file", pki.ca_file("rogue")},
          std::vector<std::string>{}}) {
      std::vector<std::string> flags{"--allow-url", data, "--http-retries", "1"};
      flags.insert(flags.end(), ca.begin(), ca.end());
      Cluster cluster(0, {"--allow-url", data});
      cluster.add_worker(flags);
      auto r = cluster.read("text_lines(" + files + ")");
      CAPTURE(r.describe);
      CHECK(r.exit_code == 1);
      CHECK(contains(r.stderr_text, data + "a.txt"));
      CHECK(contains(r.stderr_text, "certificate"));
      CHECK(r.lines.empty());
    }
  }
}
