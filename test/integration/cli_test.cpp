// The `conveyor` command line: --help everywhere, config files, argument errors (exit code 2 and
// a message naming the argument), unreachable addresses (exit code 1 in bounded time) and the
// protocol version check between real processes.
#include <chrono>
#include <fstream>

#include <doctest/doctest.h>

#include "conveyor/version.hpp"
#include "messages/protocol.hpp"
#include "test/integration/cluster.hpp"
#include "test/support/text.hpp"

using namespace conveyor::testing;

namespace {

// Runs a command that must fail on its arguments: exit code 2 and `needle` in stderr.
void check_bad_arguments(std::vector<std::string> args, const std::string& needle) {
  auto r = run_conveyor(args, Millis{20000}, "badargs");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code.has_value());
  CHECK(*r.exit_code == 2);
  CHECK(contains(r.stderr_text, needle));
  CHECK(r.lines.empty());
}

std::string write_config(const std::string& name, const std::string& text) {
  const std::string path = test_log_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

} // namespace

TEST_CASE("cli: --help works on every subcommand and lists its flags") {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases{
    {{"dispatcher", "--help"},
     {"usage: conveyor dispatcher", "--port", "--work-dir", "--worker-timeout", "--config"}},
    {{"worker", "--help"},
     {"usage: conveyor worker", "--dispatcher", "--advertise", "--plugin", "--heartbeat-interval"}},
    {{"read", "--help"},
     {"usage: conveyor read", "--dataset", "--mode", "--job-name", "--num-consumers",
      "--consumer-index", "--max-outstanding", "--take", "--compression",
      "--data-transfer-protocol",
      // every mode --mode accepts
      "off,", "dynamic,", "file,", "data,", "file_or_data", "hint"}},
    {{"run", "--help"}, {"usage: conveyor run", "--workers", "--dataset"}},
    {{"bench", "service", "--help"},
     {"usage: conveyor bench service", "--workers", "--consumers", "--element-size"}},
    {{"bench", "scaling", "--help"},
     {"usage: conveyor bench scaling", "--workers", "--work-us", "--scheduler-threads"}},
    {{"bench", "fairness", "--help"},
     {"usage: conveyor bench fairness", "--heavy", "--elements", "--rounds", "--node-exe"}},
    {{"--help"}, {"dispatcher", "worker", "read", "run", "bench"}},
  };
  for (const auto& [args, needles] : cases) {
    auto r = run_conveyor(args, Millis{20000}, "help");
    CAPTURE(r.describe);
    CHECK(r.exit_code == 0);
    for (const auto& n : needles)
      CHECK_MESSAGE(contains(r.stdout_text, n), n);
  }
}

TEST_CASE("cli: --version prints the project version and the protocol version") {
  auto r = run_conveyor({"--version"}, Millis{20000}, "version");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.stdout_text, std::string("conveyor ") + CONVEYOR_VERSION + "\n"));
  CHECK(contains(r.stdout_text,
                 "protocol version " + std::to_string(conveyor::msg::kProtocolVersion) + "\n"));
  CHECK(std::string(conveyor::version()) == CONVEYOR_VERSION);
  CHECK(conveyor::protocol_version() == conveyor::msg::kProtocolVersion);
  check_bad_arguments({"--version", "extra"}, "--version takes no arguments");
}

TEST_CASE("cli: bad arguments exit with 2 and name the argument") {
  // Nothing needs to listen here: every one of these is refused before any connection.
  const std::string ok_addr = "127.0.0.1:1";
  check_bad_arguments({"read", "--dataset", "range(3)"}, "dispatcher");
  check_bad_arguments({"read", "--dispatcher", "nonsense", "--dataset", "range(3)"},
                      "`--dispatcher`");
  check_bad_arguments({"read", "--dispatcher", "127.0.0.1:99999", "--dataset", "range(3)"},
                      "`--dispatcher`");
  check_bad_arguments({"read", "--dispatcher", "127.0.0.1:", "--dataset", "range(3)"},
                      "`--dispatcher`");
  check_bad_arguments({"read", "--dispatcher", ok_addr}, "--dataset");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3"}, "`--dataset`");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--mode", "sideways"}, "`--mode`");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--job-name", ""},
                      "job_name");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--num-consumers", "2"},
    "consumer_index");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--num-consumers",
                       "2", "--consumer-index", "0"},
                      "job_name");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--job-name", "j",
                       "--consumer-index", "0"},
                      "num_consumers");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--compression", "ZIP"},
    "compression");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--data-transfer-protocol", "http"},
    "`--data-transfer-protocol` must be grpc, bulk or caf, got \"http\"");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--max-outstanding", "0"},
    "`--max-outstanding`");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--take", "-5"},
                      "`--take`");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--timeout-ms", "0"},
    "`--timeout-ms`");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--no-such-flag"},
                      "no-such-flag");
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--config", "/nonexistent.ini"},
    "`--config`");
  // Only a regular file, read with a cap: /dev/zero used to be read without bound (GiBs) and
  // then end in a misleading "--port is required".
  check_bad_arguments({"dispatcher", "--config", "/dev/zero"}, "not a regular file");
  check_bad_arguments(
    {"dispatcher", "--port", "0", "--config", write_config("huge.ini", std::string(2 << 20, '#'))},
    "at most 1048576");
  check_bad_arguments({"dispatcher", "--port", "70000"}, "`--port`");
  check_bad_arguments({"dispatcher"}, "port");
  check_bad_arguments({"dispatcher", "--port", "0", "--worker-timeout", "-1"},
                      "`--worker-timeout`");
  check_bad_arguments({"worker", "--dispatcher", "localhost", "--port", "0"}, "`--dispatcher`");
  check_bad_arguments({"worker", "--dispatcher", ok_addr, "--port", "0", "--advertise", "a:b:c"},
                      "`--advertise`");
  check_bad_arguments(
    {"worker", "--dispatcher", ok_addr, "--port", "0", "--heartbeat-interval", "0"},
    "`--heartbeat-interval`");
  check_bad_arguments({"run", "--workers", "0"}, "`--workers`");
  check_bad_arguments({"run", "--dataset", "range(3).map(no_such_function)"}, "no_such_function");
  check_bad_arguments({"bench", "service", "--element-size", "4"}, "`--element-size`");
  check_bad_arguments({"bench", "scaling", "--workers", "1,0"}, "`--workers`");
  check_bad_arguments({"bench", "fairness", "--heavy", "0"}, "`--heavy`");
  check_bad_arguments({"bench", "snapshot-decode", "--cold-chunks", "0"}, "`--cold-chunks`");
  check_bad_arguments(
    {"worker", "--dispatcher", "127.0.0.1:1", "--port", "0", "--scheduler-threads", "2000"},
    "`--scheduler-threads`");
  check_bad_arguments({"nosuchcommand"}, "unknown command");
}

TEST_CASE("cli: bad flags: stray words, a negative drain timeout, flags that need another flag") {
  const std::string ok_addr = "127.0.0.1:1";
  // No command takes positional arguments: a stray word is refused, named, not ignored.
  check_bad_arguments({"dispatcher", "--port", "0", "extra"}, "unexpected argument \"extra\"");
  check_bad_arguments({"worker", "--dispatcher", ok_addr, "--port", "0", "stray"},
                      "unexpected argument \"stray\"");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "stray"},
                      "unexpected argument \"stray\"");
  check_bad_arguments({"status", "--dispatcher", ok_addr, "stray"},
                      "unexpected argument \"stray\"");
  check_bad_arguments({"status", "--dispatcher", ok_addr, "--json", "stray"},
                      "unexpected argument \"stray\"");
  check_bad_arguments({"run", "--workers", "1", "stray"}, "unexpected argument \"stray\"");
  check_bad_arguments({"bench", "service", "stray"}, "unexpected argument \"stray\"");
  // Read only at shutdown, so checked at start-up.
  check_bad_arguments({"worker", "--dispatcher", ok_addr, "--port", "0", "--drain-timeout", "-1"},
                      "`--drain-timeout`");
  // The round timeout belongs to coordinated reads.
  check_bad_arguments(
    {"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--round-timeout-ms", "5"},
    "`--round-timeout-ms` is used only with a coordinated read");
  check_bad_arguments({"read", "--dispatcher", ok_addr, "--dataset", "range(3)", "--job-name", "j",
                       "--num-consumers", "2", "--consumer-index", "0", "--round-timeout-ms", "0"},
                      "`--round-timeout-ms`");
  // The frame guard's limits need the frame guard.
  for (const auto& flag : {"--max-frame-bytes", "--max-connections",
                           "--max-connections-per-address", "--idle-timeout"}) {
    check_bad_arguments({"dispatcher", "--port", "0", "--no-frame-guard", flag, "2048"},
                        std::string{"`"} + flag + "` is a limit of the frame guard");
    check_bad_arguments(
      {"worker", "--dispatcher", ok_addr, "--port", "0", flag, "2048", "--no-frame-guard"},
      std::string{"`"} + flag + "` is a limit of the frame guard");
  }
  const std::string config =
    write_config("guard-off.ini", "no-frame-guard = true\nmax-connections = 9\n");
  check_bad_arguments({"dispatcher", "--port", "0", "--config", config}, "`--max-connections`");
  check_bad_arguments({"dispatcher", "--port", "0", "--max-connections-per-address", "0"},
                      "`--max-connections-per-address` must be in 1..100000, got 0");
}

TEST_CASE("cli: bench scaling runs worker processes, prints its table and leaves no child behind") {
  auto r = run_conveyor({"bench", "scaling", "--workers", "1,2", "--seconds", "0.5", "--warmup",
                         "0.2", "--reps", "1", "--work-us", "200"},
                        Millis{60000}, "bench-scaling");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == std::optional<int>{0});
  CHECK(contains(r.stdout_text, "workers  elements/s (min / median / max)"));
  CHECK(contains(r.stdout_text, "rep 1 :  2 workers"));
  CHECK(contains(r.stdout_text, "speedup: median elements/s against 1 worker's median"));
  // Its nodes drained and stopped on SIGTERM (none had to be killed).
  CHECK_FALSE(contains(r.stderr_text, "did not stop"));
}

TEST_CASE("cli: bench snapshot-decode prints the reader's decode per element and its load") {
  auto r = run_conveyor({"bench", "snapshot-decode", "--chunks", "3", "--chunk-bytes", "65536",
                         "--cold-chunks", "2", "--repetitions", "2"},
                        Millis{60000}, "bench-snapshot-decode");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == std::optional<int>{0});
  CHECK(contains(r.stdout_text, "3 chunks of 63 string elements of 1024 bytes"));
  CHECK(contains(r.stdout_text, "WARM    COLD    WALK    LOAD READER"));
  CHECK(contains(r.stdout_text, "\n1    "));
  CHECK(contains(r.stdout_text, "\n2    "));
}

TEST_CASE("cli: bench service prints its figures with their ratios and the busiest threads") {
  auto r = run_conveyor({"bench", "service", "--element-size", "8", "--seconds", "0.5"},
                        Millis{60000}, "bench-service");
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == std::optional<int>{0});
  for (const char* line :
       {"  service : ", "  raw TCP : ", "  ratio   : ", "  cpu     : ", "  copies  : ",
        "  allocs  : ", "  memory  : ", "  latency : range(100) end to end"})
    CHECK_MESSAGE(contains(r.stdout_text, line), line);
  // "threads : N ran; busiest: NAME P%, ...": the service run used the consumer's thread and the
  // workers' pipeline threads at least.
  const auto at = r.stdout_text.find("  threads : ");
  REQUIRE(at != std::string::npos);
  const std::string threads = r.stdout_text.substr(at, r.stdout_text.find('\n', at) - at);
  CAPTURE(threads);
  CHECK(std::stoi(threads.substr(std::string("  threads : ").size())) >= 2);
  CHECK(contains(threads, " ran; busiest: "));
  CHECK(contains(threads, "%, "));
  // The allocation counter counts (CAF's messages alone allocate), unless a sanitizer owns malloc.
  const auto allocs = r.stdout_text.find("  allocs  : ");
  REQUIRE(allocs != std::string::npos);
  const std::string count = r.stdout_text.substr(allocs + std::string("  allocs  : ").size(), 11);
  CAPTURE(count);
  if (count != "not counted")
    CHECK(std::stod(count) > 0.0);
}

TEST_CASE("cli: an unreachable dispatcher is a runtime error (exit 1) within a bounded time") {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  const auto start = std::chrono::steady_clock::now();
  auto r = run_conveyor(
    {"read", "--dispatcher", "127.0.0.1:1", "--dataset", "range(3)", "--connect-timeout", "2000"},
    Millis{20000}, "unreachable");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.stderr_text, "127.0.0.1:1"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));

  // A worker waits for a dispatcher that is not up yet, up to --dispatcher-timeout.
  auto w = run_conveyor({"worker", "--dispatcher", "127.0.0.1:1", "--port", "0",
                         "--connect-timeout", "2000", "--dispatcher-timeout", "2000"},
                        Millis{20000}, "unreachable-worker");
  CAPTURE(w.describe);
  CHECK(w.exit_code == 1);
  CHECK(contains(w.stderr_text, "cannot start"));
}

TEST_CASE("cli: a port that is already taken is a runtime error naming it") {
  Cluster cluster(0);
  const std::string port = std::to_string(cluster.port());
  auto r = run_conveyor({"dispatcher", "--port", port}, Millis{20000}, "port-taken");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.stderr_text, port));
}

TEST_CASE("cli: a config file supplies flags, and flags given on the command line win") {
  const std::string dispatcher_config =
    write_config("dispatcher.ini", "# test dispatcher\nport = 0\nworker-timeout = 3000\n");
  Cluster cluster(2, {"--config", dispatcher_config});
  // The config asks for DYNAMIC mode (each element once), overriding the OFF default; the
  // flag asks for OFF (each element twice on two workers) and wins over the config.
  const std::string read_config = write_config(
    "read.ini", "dispatcher = " + cluster.address() + "\ndataset = range(4)\nmode = dynamic\n");
  auto from_file = run_conveyor({"read", "--config", read_config}, kReadTimeout, "read-config");
  CAPTURE(from_file.describe);
  REQUIRE(from_file.exit_code == 0);
  CHECK(sorted_ints(from_file.lines).sorted == std::vector<int64_t>{0, 1, 2, 3});
  auto overridden =
    run_conveyor({"read", "--config", read_config, "--mode", "off"}, kReadTimeout, "read-config");
  CAPTURE(overridden.describe);
  REQUIRE(overridden.exit_code == 0);
  CHECK(sorted_ints(overridden.lines).sorted == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3});

  const std::string bad_config =
    write_config("bad.ini", "dispatcher = " + cluster.address() + "\nbogus = 1\n");
  check_bad_arguments({"read", "--config", bad_config, "--dataset", "range(1)"}, "bogus");
}

TEST_CASE("cli: read --take stops early and --dataset-id reads a registered dataset") {
  Cluster cluster(1);
  auto r = cluster.read("range(1000000)", {"--take", "7"});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(r.lines == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"});

  auto missing =
    run_conveyor({"read", "--dispatcher", cluster.address(), "--dataset-id", "no-such-id"},
                 kReadTimeout, "missing-id");
  CAPTURE(missing.describe);
  // The dispatcher's answer, not a malformed argument: a runtime failure like the service's others.
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.stderr_text, "no-such-id"));
}

TEST_CASE("version mismatch: nodes speaking another protocol version are refused on both sides") {
  Cluster cluster(0);
  auto worker = run_conveyor({"worker", "--dispatcher", cluster.address(), "--port", "0",
                              "--protocol-version", "999", "--connect-timeout", "5000"},
                             Millis{20000}, "old-worker");
  CAPTURE(worker.describe);
  CHECK(worker.exit_code == 1);
  CHECK(contains(worker.stderr_text, "version"));

  auto reader = run_conveyor({"read", "--dispatcher", cluster.address(), "--dataset", "range(3)",
                              "--protocol-version", "999"},
                             Millis{20000}, "old-reader");
  CAPTURE(reader.describe);
  CHECK(reader.exit_code == 1);
  CHECK(contains(reader.stderr_text, "version"));
  // The dispatcher says so too.
  CHECK_MESSAGE(cluster.dispatcher().wait_for_output("version", Millis{5000}), cluster.describe());
}

TEST_CASE("cli: read --data-transfer-protocol: grpc, bulk and caf each read every element") {
  Cluster cluster(1);
  // 1 MiB elements: the default path takes the bulk channel; caf keeps them in messages.
  for (const char* protocol : {"grpc", "bulk", "caf"}) {
    CAPTURE(protocol);
    auto r = cluster.read("range(6).map(bytes(size=1048576))",
                          {"--data-transfer-protocol", protocol, "--print", "digest"});
    CHECK_MESSAGE(r.exit_code == 0, r.describe);
    CHECK(r.lines.size() == 6);
  }
}
