// Operations: node log lines, clear start-up errors, `conveyor status`, the Prometheus
// endpoints (scraped over HTTP on loopback) and the deployment files (deploy/).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/integration/node_http.hpp"
#include "test/support/free_port.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

// GET http://127.0.0.1:port/path; returns the body ("" on any failure, with `error` set).
std::string http_get(uint16_t port, const std::string& path, std::string& error) {
  HttpReply reply = conveyor::testing::http_get(port, path);
  if (reply.code != 200) {
    error = reply.code == 0 ? "no HTTP answer" : "HTTP status " + std::to_string(reply.code);
    return {};
  }
  return reply.body;
}

// The value of the first sample line starting with `prefix` (name plus labels), or -1.
double sample_value(const std::string& text, const std::string& prefix) {
  std::size_t at = 0;
  while ((at = text.find(prefix, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      auto eol = text.find('\n', at);
      auto line = text.substr(at, eol - at);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    at += prefix.size();
  }
  return -1;
}

// Sum of every sample line of `name` (any labels).
double sample_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::regex re("(^|\\n)" + name + "(\\{[^}]*\\})? ([0-9.e+-]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    sum += std::stod((*it)[3].str());
  return sum;
}

} // namespace

TEST_CASE(
  "ops: node log lines carry a timestamp, the level, the node and the pid - json on request") {
  auto d = ChildProcess::conveyor({"dispatcher", "--port", "0"}, "log-text");
  REQUIRE(d.ok());
  REQUIRE((*d)->wait_listening(kStartTimeout).ok());
  const std::regex text_line(
    R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  node=dispatcher pid=(\d+) dispatcher: listening on 127\.0\.0\.1:\d+)");
  std::smatch m;
  const auto err = (*d)->stderr_text();
  REQUIRE_MESSAGE(std::regex_search(err, m, text_line), err);
  CHECK(std::stol(m[1].str()) == (*d)->pid());

  auto j =
    ChildProcess::conveyor({"dispatcher", "--port", "0", "--log-format", "json"}, "log-json");
  REQUIRE(j.ok());
  REQUIRE((*j)->wait_for_output("listening on", kStartTimeout));
  const auto jerr = (*j)->stderr_text();
  CHECK_MESSAGE(
    std::regex_search(
      jerr,
      std::regex(
        R"(\{"ts":"[0-9T:.-]+Z","level":"info","pid":\d+,"node":"dispatcher","component":"dispatcher","msg":"listening on 127\.0\.0\.1:\d+"\})")),
    jerr);

  auto bad =
    run_conveyor({"dispatcher", "--port", "0", "--log-format", "xml"}, Millis{20000}, "log-bad");
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.stderr_text, "`--log-format`"));

  // A command's final error is a JSON line too, not a plain "conveyor read: ..." among them.
  const std::regex json_error(
    R"(\{"ts":"[0-9T:.-]+Z","level":"error","pid":\d+,"node":"read","component":"read","msg":"[^\n]*`--take`[^\n]*"\}\n$)");
  auto bad_read = run_conveyor({"read", "--dispatcher", "127.0.0.1:1", "--dataset", "range(3)",
                                "--take", "-5", "--log-format", "json"},
                               Millis{20000}, "log-json-error");
  CHECK(bad_read.exit_code == 2);
  CHECK_FALSE(contains(bad_read.stderr_text, "conveyor read:"));
  CHECK_MESSAGE(std::regex_search(bad_read.stderr_text, json_error), bad_read.stderr_text);
  // A runtime failure (nothing listens there) as well.
  const std::regex json_failure(
    R"(\{"ts":"[0-9T:.-]+Z","level":"error","pid":\d+,"node":"read","component":"read","msg":"cannot connect to dispatcher [^\n]*"\}\n$)");
  auto failed_read = run_conveyor({"read", "--dispatcher", "127.0.0.1:1", "--dataset", "range(3)",
                                   "--connect-timeout", "500", "--log-format", "json"},
                                  Millis{20000}, "log-json-failure");
  CHECK(failed_read.exit_code == 1);
  CHECK_FALSE(contains(failed_read.stderr_text, "conveyor read:"));
  CHECK_MESSAGE(std::regex_search(failed_read.stderr_text, json_failure), failed_read.stderr_text);
}

TEST_CASE("ops: a registered dataset is logged by id and fingerprint, not by its text") {
  Cluster cluster(1);
  std::string values;
  for (int i = 0; i < 2000; ++i)
    values += (i ? "," : "") + std::to_string(1000000 + i);
  auto r = cluster.read("from_tensor_slices([" + values + "])", {"--print", "none"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  const auto log = cluster.dispatcher().stderr_text();
  const auto at = log.find("registered dataset");
  REQUIRE(at != std::string::npos);
  const auto line = log.substr(at, log.find('\n', at) - at);
  CAPTURE(line);
  CHECK(contains(line, "fingerprint"));
  CHECK(line.size() < 200);
  CHECK_FALSE(contains(log, "1000001"));
}

TEST_CASE("ops: a reader that leaves a shared job with elements it did not take says how many") {
  Cluster cluster(1);
  // --take 10 of a named job: the consumer received far more than the ten it printed.
  auto r = cluster.read("range(200000)", {"--job-name", "shared", "--take", "10"});
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 10);
  CHECK(std::regex_search(
    r.stderr_text,
    std::regex(
      R"(this consumer leaves with [1-9]\d* element\(s\) it received but its application did not take)")));
  // A private job loses nothing of anyone's: no warning.
  auto mine = cluster.read("range(200000)", {"--take", "10"});
  CAPTURE(mine.describe);
  CHECK(mine.exit_code == 0);
  CHECK(!contains(mine.stderr_text, "leaves with"));
}

TEST_CASE("ops: --bulk-port pins the worker's bulk data port - a taken one fails start-up") {
  Cluster cluster(0);
  const auto bulk = conveyor::testing::free_loopback_port();
  REQUIRE(bulk != 0);
  auto& worker = cluster.add_worker({"--bulk-port", std::to_string(bulk)});
  CHECK(
    worker.wait_for_output("bulk data path on 127.0.0.1:" + std::to_string(bulk), Millis{10000}));
  auto r = cluster.read("range(4).map(bytes(size=300000))", {"--print", "digest"});
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  auto taken = run_conveyor({"worker", "--dispatcher", cluster.address(), "--port", "0",
                             "--bulk-port", std::to_string(bulk)},
                            Millis{20000}, "bulk-port-taken");
  CAPTURE(taken.describe);
  CHECK(taken.exit_code == 1);
  CHECK(contains(taken.stderr_text, "port " + std::to_string(bulk) + " is already in use"));
  CHECK(contains(taken.stderr_text, "choose another `--bulk-port`"));
}

TEST_CASE(
  "ops: clear start-up errors: port in use, wildcard bind without --advertise, no workers") {
  Cluster cluster(0);
  const std::string port = std::to_string(cluster.port());
  auto taken = run_conveyor({"dispatcher", "--port", port}, Millis{20000}, "port-taken");
  CAPTURE(taken.describe);
  CHECK(taken.exit_code == 1);
  CHECK(contains(taken.stderr_text, "port " + port + " is already in use"));
  CHECK_FALSE(contains(taken.stderr_text, "cannot_open_port"));

  for (const std::string host : {"0.0.0.0", "::"}) {
    auto w =
      run_conveyor({"worker", "--dispatcher", cluster.address(), "--port", "0", "--host", host},
                   Millis{20000}, "wildcard");
    CAPTURE(w.describe);
    CHECK(w.exit_code == 2);
    CHECK(contains(w.stderr_text, "--advertise"));
  }

  auto r = cluster.read("range(3)", {"--timeout-ms", "1500"});
  CAPTURE(r.describe);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.stderr_text,
                 "no workers are registered with the dispatcher at " + cluster.address()));
}

TEST_CASE("ops: read --stats with --take counts the elements read, and says what was prefetched "
          "beyond them") {
  Cluster cluster(1);
  auto r = cluster.read("range(100000)", {"--mode", "off", "--take", "5", "--stats"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(r.lines.size() == 5);
  // What the stream fetched ahead of the reader is counted apart, not as read.
  const auto at = r.stderr_text.find("read: 5 elements read; received ");
  REQUIRE(at != std::string::npos);
  const long long received = std::atoll(r.stderr_text.c_str() + at + 32);
  CHECK(received >= 5);
  const bool said =
    contains(r.stderr_text, std::to_string(received - 5) +
                              " received elements were not read (prefetched beyond --take)");
  CHECK(said == (received > 5));
}

TEST_CASE("ops: conveyor status lists workers, datasets and jobs with their progress") {
  Cluster cluster(2, {"--job-gc-timeout", "60000"});
  auto r = cluster.read("range(100)", {"--mode", "dynamic", "--job-name", "trainer", "--stats"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(sorted_ints(r.lines).sorted.size() == 100);
  CHECK(contains(r.stderr_text, "read: waiting "));

  auto js = run_conveyor({"status", "--dispatcher", cluster.address(), "--json"}, Millis{20000},
                         "status-json");
  CAPTURE(js.describe);
  REQUIRE(js.exit_code == 0);
  const auto& j = js.stdout_text;
  // The job ended with its reader: its tasks are gone, and it is listed as a finished job.
  CHECK(std::regex_search(
    j,
    std::regex(
      R"("workers":\[\{"id":\d+,"address":"127\.0\.0\.1:\d+","tags":\[\],"tasks":0,"heartbeat_age_ms":\d+,"tenants":\[[^\]]*\]\},\{)")));
  CHECK(contains(j, "\"finished\":true"));
  CHECK(contains(j, "\"cardinality\":100"));
  CHECK(contains(j, "\"element_spec\":\"TensorSpec(shape=(), dtype=int64)\""));
  CHECK(contains(j, "\"name\":\"trainer\""));
  CHECK(contains(j, "\"mode\":\"DYNAMIC\""));
  CHECK(contains(j, "\"elements\":100,"));
  CHECK(std::regex_search(j, std::regex(R"("splits_handed_out":[1-9]\d*)")));

  auto table =
    run_conveyor({"status", "--dispatcher", cluster.address()}, Millis{20000}, "status-table");
  CAPTURE(table.describe);
  REQUIRE(table.exit_code == 0);
  CHECK(contains(table.stdout_text, "workers: 2"));
  CHECK(contains(table.stdout_text, "jobs: 1"));
  CHECK(contains(table.stdout_text, "trainer"));

  auto down = run_conveyor({"status", "--dispatcher", "127.0.0.1:1", "--timeout-ms", "2000"},
                           Millis{20000}, "status-down");
  CHECK(down.exit_code == 1);
  CHECK(contains(down.stderr_text, "cannot get the status of dispatcher 127.0.0.1:1"));
}

TEST_CASE("ops: the dispatcher and workers serve Prometheus metrics over HTTP") {
  Cluster cluster(0, {"--metrics-port", "0", "--job-gc-timeout", "60000"});
  auto& worker = cluster.add_worker({"--metrics-port", "0"});
  const auto dport = metrics_port_of(cluster.dispatcher());
  const auto wport = metrics_port_of(worker);

  auto r = cluster.read("range(50)", {"--job-name", "m", "--tenant", "team-m"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);

  std::string error;
  const auto d = http_get(dport, "/metrics", error);
  CAPTURE(error);
  CAPTURE(d);
  CHECK(contains(d, "# TYPE conveyor_job_delivered_elements_total counter"));
  CHECK(sample_value(d, "conveyor_workers ") == 1);
  CHECK(sample_sum(d, "conveyor_job_delivered_elements_total") == 50);
  CHECK(sample_sum(d, "conveyor_worker_heartbeat_age_seconds") >= 0);
  CHECK(contains(d, "conveyor_job_consumer_wait_seconds_total{cause=\"credit\""));

  const auto w = http_get(wport, "/metrics", error);
  CAPTURE(w);
  CHECK(sample_value(w, "conveyor_worker_tasks ") == 0); // the job ended; its task's totals stay
  CHECK(sample_sum(w, "conveyor_task_delivered_elements_total") == 50);
  CHECK(sample_sum(w, "conveyor_task_produced_elements_total") == 50);
  // The executor's thread time of the job's tenant (its task's items held a thread).
  CHECK(sample_value(w, "conveyor_tenant_thread_seconds_total{tenant=\"team-m\"} ") > 0);
  CHECK(contains(w, "conveyor_task_buffered_elements{"));
  CHECK(sample_sum(w, "conveyor_task_buffered_bytes") == 0); // its buffer went with the task
  CHECK(contains(w, "# TYPE conveyor_task_splits_ahead gauge"));
  CHECK(sample_sum(w, "conveyor_task_splits_ahead") == 0); // (an ended task holds none)
  // The tenant's buffered bytes on this worker: listed, and 0 with its only task ended (the
  // sums while tasks run: unit test "worker metrics: buffered bytes per tenant ...").
  CHECK(contains(w, "# TYPE conveyor_worker_tenant_buffered_bytes gauge"));
  CHECK(sample_value(w, "conveyor_worker_tenant_buffered_bytes{tenant=\"team-m\"} ") == 0);
  CHECK(sample_value(d, "conveyor_jobs_running ") == 0);

  auto bad = run_conveyor({"dispatcher", "--port", "0", "--metrics-port", std::to_string(dport)},
                          Millis{20000}, "metrics-taken");
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.stderr_text, "metrics endpoint cannot listen"));
}

TEST_CASE("ops: deploy/ manifests and units parse and name only flags that exist") {
  auto r = run_to_completion(
    {"/usr/bin/python3", CONVEYOR_SOURCE_DIR "/deploy/check_deploy.py", conveyor_binary()},
    Millis{60000}, "check-deploy", test_log_dir());
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_text.empty());
}
