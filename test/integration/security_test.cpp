// Security between real processes: mutual TLS (a throwaway CA and certificates made with the
// `openssl` CLI), admission tokens, and path confinement on the workers.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// A CA, a certificate for the nodes signed by it, and a rogue CA with its own node certificate.
struct Pki {
  std::string dir;
  Pki() {
    dir = test_log_dir() + "/pki-" + std::to_string(::getpid());
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    const std::string script =
        "set -e; rm -rf " + dir + "; mkdir -p " + dir + "; cd " + dir + ";" +
        "for ca in ca rogue; do "
        "openssl req -x509" + key + "-keyout $ca.key -out $ca.pem -days 1 -subj /CN=$ca >/dev/null 2>&1;"
        "openssl req" + key + "-keyout $ca-node.key -out $ca-node.csr -subj /CN=localhost >/dev/null 2>&1;"
        "openssl x509 -req -in $ca-node.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -out $ca-node.pem "
        "-days 1 >/dev/null 2>&1; done";
    REQUIRE_MESSAGE(std::system(script.c_str()) == 0, "openssl could not make the test certificates");
  }
  std::vector<std::string> flags(const std::string& ca = "ca") const {
    return {"--tls-cert", dir + "/" + ca + "-node.pem", "--tls-key", dir + "/" + ca + "-node.key",
            "--tls-ca", dir + "/" + ca + ".pem"};
  }
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kToken{"--auth-token", "s3cret-token-for-tests"};

} // namespace

TEST_CASE("security: a TLS + token cluster serves admitted readers; others are refused clearly") {
  Pki pki;
  const std::string data = pki.dir + "/data";
  REQUIRE(::mkdir(data.c_str(), 0700) == 0);
  std::ofstream(data + "/a.txt") << "alpha\nbeta\n";

  Cluster cluster(0, pki.flags() + kToken);
  cluster.add_worker(pki.flags() + kToken + std::vector<std::string>{"--allow-path", data});
  const std::string dataset = "text_lines([\"" + data + "/a.txt\"])";

  SUBCASE("admitted: TLS and the token") {
    auto r = cluster.read(dataset, pki.flags() + kToken);
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    CHECK(r.lines.size() == 2);
  }
  SUBCASE("no token: refused, and the dispatcher logs the refusal without the token") {
    auto r = cluster.read(dataset, pki.flags() + std::vector<std::string>{"--connect-timeout", "5000"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "permission_denied"));
    CHECK(contains(r.stderr_text, "token"));
    CHECK(r.lines.empty());
    CHECK(cluster.dispatcher().wait_for_output("refused", Millis{5000}));
    CHECK(!contains(cluster.dispatcher().describe(), "s3cret-token-for-tests"));
  }
  SUBCASE("a wrong token is refused") {
    auto r = cluster.read(dataset, pki.flags() + std::vector<std::string>{"--auth-token", "wrong"});
    CAPTURE(r.describe);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.stderr_text, "a wrong one"));
  }
  SUBCASE("a plain (non-TLS) reader fails within its connect timeout, naming TLS") {
    auto r = cluster.read(dataset, kToken + std::vector<std::string>{"--connect-timeout", "2000"}, Millis{20000});
    CAPTURE(r.describe);
    REQUIRE(r.exit_code.has_value());
    CHECK(*r.exit_code == 1);
    CHECK(contains(r.stderr_text, "TLS"));
  }
  SUBCASE("a certificate from another CA is refused") {
    auto r = cluster.read(dataset, pki.flags("rogue") + kToken +
                                       std::vector<std::string>{"--connect-timeout", "3000"},
                          Millis{20000});
    CAPTURE(r.describe);
    REQUIRE(r.exit_code.has_value());
    CHECK(*r.exit_code == 1);
    CHECK(r.lines.empty());
  }
  SUBCASE("a worker without the token is refused with a clear error and exits") {
    auto w = ChildProcess::conveyor(std::vector<std::string>{"worker", "--dispatcher", cluster.address(), "--port", "0"} +
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
          std::string{"list_files(\"/etc/*\")"},
          "range(3).cache(\"" + pki.dir + "/outside\")"}) {
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

TEST_CASE("security: bad TLS and token flags are refused at start-up, naming the flag") {
  Pki pki;
  auto r = run_conveyor({"dispatcher", "--port", "0", "--tls-cert", pki.dir + "/ca-node.pem"}, Millis{20000}, "badtls");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "all three"));
  r = run_conveyor({"dispatcher", "--port", "0", "--tls-cert", pki.dir + "/ca-node.pem", "--tls-key",
                    pki.dir + "/rogue-node.key", "--tls-ca", pki.dir + "/ca.pem"},
                   Millis{20000}, "badtls");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "does not match `--tls-cert`"));
  const std::string token_file = pki.dir + "/token";
  std::ofstream(token_file) << "abc\n";
  ::chmod(token_file.c_str(), 0644);
  r = run_conveyor({"dispatcher", "--port", "0", "--token-file", token_file}, Millis{20000}, "badtoken");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.stderr_text, "chmod 600"));
}

TEST_CASE("security: a job passing --job-memory-limit fails at its consumer; the worker serves others") {
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
