// Dispatcher durability with real processes: the dispatcher is SIGKILLed and restarted on the
// same --work-dir and port; workers and readers reconnect on their own. Also: a worker or a
// reader started before its dispatcher, and --connect-timeout bounding (not cutting short) the
// connection attempts.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "test/integration/cluster.hpp"
#include "test/integration/restartable_nodes.hpp"
#include "test/support/free_port.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// SIGKILL the dispatcher mid-read, restart it on the same work dir and port: the reader gets
// every element as its mode promises. OFF: each worker's task serves on, so every element
// twice (two workers). DYNAMIC: the restarted job hands out again the splits its tasks held
// (journaled as handed out, not finished), and the reader drops what it already had of them:
// every element exactly once (a per-split pipeline).
// `flags` go to every node (e.g. an admission token).
void kill_dispatcher_mid_read(const std::string& mode, std::size_t copies,
                              const std::vector<std::string>& flags = {}) {
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  auto d1 = start_dispatcher(free_port(), wd, "dispatcher1", flags);
  auto port = *d1->wait_listening(kStartTimeout);
  auto w1 = start_worker(port, "worker1", flags);
  auto w2 = start_worker(port, "worker2", flags);
  REQUIRE(w1->wait_for_output("worker: ready", kStartTimeout));
  REQUIRE(w2->wait_for_output("worker: ready", kStartTimeout));
  // OFF: ~1.8 s per worker; DYNAMIC: ~1.8 s for both together (splits of 750 elements).
  const std::string dataset =
    mode == "off" ? "range(6000).map(sleep_us(us=300))" : "range(12000).map(sleep_us(us=300))";
  std::vector<std::string> read_args{"read",  "--dispatcher", addr(port), "--dataset",
                                     dataset, "--mode",       mode};
  read_args.insert(read_args.end(), flags.begin(), flags.end());
  auto reader = ChildProcess::conveyor(read_args, "read");
  REQUIRE(reader.ok());
  // Kill the dispatcher once the read is well under way (the reader's stdout is block-buffered,
  // so its lines tell little; the job's creation plus a fraction of the ~1.8 s read does),
  // then restart it on the same dir and port.
  REQUIRE_MESSAGE(d1->wait_for_output("created job", kReadTimeout), d1->describe());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  REQUIRE_FALSE((*reader)->exited()); // the read was not over yet
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2", flags);
  CHECK(d2->wait_for_output("1 job(s) (1 running again)", kStartTimeout));
  auto rc = (*reader)->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), (*reader)->describe());
  CHECK_MESSAGE(*rc == 0, (*reader)->describe());
  CHECK((*reader)->stderr_text().find("lost the dispatcher") != std::string::npos);
  CHECK_MESSAGE(sorted((*reader)->stdout_lines()) == expected_sorted_lines(dataset, copies),
                ((*reader)->describe() + "\n" + d2->describe()));
  CHECK(d2->stderr_text().find("is back (worker") != std::string::npos);
  // The restored job's assign_task re-attaches the running tasks: with a token, it carries it.
  CHECK_MESSAGE(w1->stderr_text().find("refused") == std::string::npos, w1->describe());
  CHECK_MESSAGE(w2->stderr_text().find("refused") == std::string::npos, w2->describe());
  if (mode == "dynamic") // the crash hit the epoch in the middle: some splits were held
    CHECK_MESSAGE(d2->stderr_text().find("handing out again the") != std::string::npos,
                  d2->describe());
}

} // namespace

TEST_CASE("dispatcher restart: SIGKILL mid-read (OFF), restart on the same work dir, every "
          "element arrives") {
  kill_dispatcher_mid_read("off", 2);
}

TEST_CASE("dispatcher restart: SIGKILL mid-read (DYNAMIC), restart on the same work dir, every "
          "element exactly once") {
  kill_dispatcher_mid_read("dynamic", 1);
}

TEST_CASE("dispatcher restart: with an admission token everywhere (DYNAMIC), the restored job "
          "re-attaches its tasks and every element arrives exactly once") {
  kill_dispatcher_mid_read("dynamic", 1, {"--auth-token", "restart-secret"});
}

TEST_CASE("dispatcher restart: coordinated reads go on in step - a worker that joins after the "
          "restart serves rounds") {
  // The schedule of rounds lived in the job and in the consumers: the restored job rebuilds it
  // from what the consumers know (coordinated/round_robin.hpp, RoundRobinJob::start_recovery).
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  JournaledPair nodes(wd);
  auto& d1 = nodes.dispatcher;
  const uint16_t port = nodes.port;
  // Element x expands to the group [2x, 2x+1]; ~5 000 rounds/s on two workers: ~12 s. The
  // readers read on while the dispatcher is down, and the third worker joins at the highest round
  // they reported plus the lookahead: on 2 cores beside other tests that was once past round
  // 35 000, so they read well beyond that.
  const std::string dataset =
    "range(1000000).flat_map(group_fn(n=2)).repeat().map(sleep_us(us=200))";
  constexpr int kTake = 60000;
  std::vector<std::unique_ptr<ChildProcess>> readers;
  for (int i = 0; i < 2; ++i) {
    auto r = ChildProcess::conveyor({"read", "--dispatcher", addr(port), "--dataset", dataset,
                                     "--job-name", "rr", "--num-consumers", "2", "--consumer-index",
                                     std::to_string(i), "--take", std::to_string(kTake)},
                                    "read" + std::to_string(i));
    REQUIRE(r.ok());
    readers.push_back(std::move(r).value());
  }
  REQUIRE_MESSAGE(d1->wait_for_output("created job", kReadTimeout), d1->describe());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  for (auto& r : readers)
    REQUIRE_FALSE(r->exited()); // the read was not over yet
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2");
  CHECK_MESSAGE(d2->wait_for_output("rebuilt the coordinated rounds", kReadTimeout),
                d2->describe());
  auto w3 = start_worker(port, "worker3");
  REQUIRE(w3->wait_for_output("worker: ready", kStartTimeout));
  std::vector<std::vector<std::string>> out;
  for (auto& r : readers) {
    auto rc = r->wait_exit(Millis{240000}); // minutes under the sanitizers on 2 busy cores
    REQUIRE_MESSAGE(rc.has_value(), std::string(r->describe() + d2->describe()));
    CHECK_MESSAGE(*rc == 0, std::string(r->describe() + d2->describe()));
    CHECK(r->stderr_text().find("lost the dispatcher") != std::string::npos);
    out.push_back(r->stdout_lines());
    CHECK(out.back().size() == static_cast<std::size_t>(kTake));
  }
  // Round r of both readers is one group: [2x, 2x+1].
  const auto rounds = std::min(out[0].size(), out[1].size());
  std::size_t aligned = 0;
  for (; aligned < rounds; ++aligned) {
    const long a = std::stol(out[0][aligned]), b = std::stol(out[1][aligned]);
    if (a % 2 != 0 || b != a + 1)
      break;
  }
  CHECK_MESSAGE(aligned == rounds, "round " << aligned << " is not one group");
  // Each task produces the groups from the start: reader 0 reads "0" once per task that served
  // rounds, the third worker's (joined after the restart) included.
  CHECK_MESSAGE(std::count(out[0].begin(), out[0].end(), "0") == 3, d2->describe());
}

TEST_CASE("dispatcher restart: repeated restarts keep every registered dataset") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  auto port = free_port();
  auto d = start_dispatcher(port, wd, "dispatcher0");
  auto w = start_worker(port, "worker");
  REQUIRE(w->wait_for_output("worker: ready", kStartTimeout));
  for (int round = 0; round < 3; ++round) {
    // Register one more dataset (ids 1000, 1001, ... in order).
    auto fresh = run_conveyor(
      {"read", "--dispatcher", addr(port), "--dataset", "range(" + std::to_string(round + 3) + ")"},
      kReadTimeout, "register");
    REQUIRE_MESSAGE(fresh.exit_code == 0, fresh.describe);
    CHECK(fresh.lines.size() == static_cast<std::size_t>(round + 3));
    d->signal(SIGKILL);
    REQUIRE(d->wait_exit(kStartTimeout).has_value());
    d = start_dispatcher(port, wd, "dispatcher" + std::to_string(round + 1));
    // `conveyor status` lists them too (it listed 0 after a restore: issue 33 item 6).
    auto status = run_conveyor({"status", "--dispatcher", addr(port)}, kReadTimeout, "status");
    REQUIRE_MESSAGE(status.exit_code == 0, status.describe);
    CHECK(std::find(status.lines.begin(), status.lines.end(),
                    "datasets: " + std::to_string(round + 1)) != status.lines.end());
    // Every dataset registered so far is still there, under its id.
    for (int j = 0; j <= round; ++j) {
      auto again =
        run_conveyor({"read", "--dispatcher", addr(port), "--dataset-id", std::to_string(1000 + j)},
                     kReadTimeout, "reread");
      REQUIRE_MESSAGE(again.exit_code == 0, (again.describe + "\n" + d->describe()));
      CHECK(sorted(again.lines) == expected_sorted_lines("range(" + std::to_string(j + 3) + ")"));
    }
  }
}

TEST_CASE("dispatcher restart: a cross-trainer-cache job stays one - a trainer joining after "
          "the restart shares the cache") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  const std::vector<std::string> gc{"--job-gc-timeout", "60000"}; // the job outlives trainer a
  auto port = free_port();
  auto d1 = start_dispatcher(port, wd, "dispatcher1", gc);
  auto w = start_worker(port, "worker", {"--cross-trainer-cache-size-bytes", "1000000"});
  REQUIRE(w->wait_for_output("worker: ready", kStartTimeout));
  auto trainer = [&](const std::string& id) {
    return run_conveyor({"read", "--dispatcher", addr(port), "--dataset",
                         "range(100000000).repeat()", "--mode", "off", "--job-name", "ctc",
                         "--cross-trainer-cache", "--trainer-id", id, "--take", "50"},
                        kReadTimeout, "trainer-" + id);
  };
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i)
    expected.push_back(std::to_string(i));
  auto a = trainer("a");
  REQUIRE_MESSAGE(a.exit_code == 0, a.describe);
  CHECK(a.lines == expected);
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2", gc);
  REQUIRE_MESSAGE(d2->wait_for_output("1 job(s) (1 running again)", kStartTimeout), d2->describe());
  // The restored job is still a cache job (journaled): trainer b is admitted to it, and reads
  // from the start of the worker's cache what trainer a read before the restart.
  auto b = trainer("b");
  REQUIRE_MESSAGE(b.exit_code == 0, (b.describe + "\n" + d2->describe()));
  CHECK_MESSAGE(b.lines == expected, b.describe);
}

TEST_CASE("dispatcher restart: without --work-dir an OFF read (--on-worker-loss fail) fails naming "
          "the lost state, not the worker") {
  // Two paths race: the reader's re-join finds the job unknown, or the new dispatcher stops the
  // worker's task first and the reader loses it (OFF: its elements cannot be read again). Either
  // way the error must point at the dispatcher's lost state (before, the second named only the
  // worker, which was alive).
  auto d1 = start_dispatcher(free_port(), "", "dispatcher1");
  auto port = *d1->wait_listening(kStartTimeout);
  auto w1 = start_worker(port, "worker1");
  REQUIRE(w1->wait_for_output("worker: ready", kStartTimeout));
  const std::string dataset = "range(6000).map(sleep_us(us=300))";
  auto reader =
    ChildProcess::conveyor(std::vector<std::string>{"read", "--dispatcher", addr(port), "--dataset",
                                                    dataset, "--on-worker-loss", "fail"},
                           "read");
  REQUIRE(reader.ok());
  REQUIRE_MESSAGE(d1->wait_for_output("created job", kReadTimeout), d1->describe());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  REQUIRE_FALSE((*reader)->exited());
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, "", "dispatcher2");
  auto rc = (*reader)->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), (*reader)->describe());
  CHECK(*rc == 1);
  CHECK_MESSAGE((*reader)->stderr_text().find("--work-dir") != std::string::npos,
                (*reader)->describe());
}

TEST_CASE(
  "dispatcher gone for good: the reader's error reports the whole wait for it, not its last "
  "attempt's remaining milliseconds") {
  // The reader retries rejoining for 30 s (ConsumerStart::dispatcher_reconnect_timeout); its
  // last attempt has only what is left of that, which the error used to report ("within 1 ms").
  auto d1 = start_dispatcher(free_port(), "", "dispatcher-gone");
  auto port = *d1->wait_listening(kStartTimeout);
  auto w1 = start_worker(port, "worker1");
  REQUIRE(w1->wait_for_output("worker: ready", kStartTimeout));
  auto reader =
    ChildProcess::conveyor(std::vector<std::string>{"read", "--dispatcher", addr(port), "--dataset",
                                                    "range(1000000).map(sleep_us(us=2000))"},
                           "read-gone");
  REQUIRE(reader.ok());
  // Elements flowing: the reader joined the job and reads from the worker.
  REQUIRE_MESSAGE((*reader)->wait_for_stdout_lines(20, kReadTimeout), (*reader)->describe());
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto rc = (*reader)->wait_exit(Millis{120000});
  REQUIRE_MESSAGE(rc.has_value(), (*reader)->describe());
  CHECK(*rc == 1);
  const std::string err = (*reader)->stderr_text();
  CHECK_MESSAGE(err.find("did not come back with the job within") != std::string::npos,
                (*reader)->describe());
  static const std::regex kWithin(R"(did not come back with the job within (\d+) ms)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(err, m, kWithin), (*reader)->describe());
  CHECK(std::stoll(m[1]) >= 25000);
}

TEST_CASE("dispatcher restart: a damaged journal stops the dispatcher with the file and offset, "
          "and --journal-recover starts from the valid prefix") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto wd = dir.path() + "/work";
  auto port = free_port();
  auto d = start_dispatcher(port, wd, "dispatcher0");
  auto w = start_worker(port, "worker");
  REQUIRE(w->wait_for_output("worker: ready", kStartTimeout));
  for (int i = 0; i < 3; ++i) {
    auto r = run_conveyor(
      {"read", "--dispatcher", addr(port), "--dataset", "range(" + std::to_string(i + 3) + ")"},
      kReadTimeout, "register");
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe);
  }
  d->signal(SIGKILL);
  REQUIRE(d->wait_exit(kStartTimeout).has_value());
  // The issue's case: the second half of the journal zeroed. It used to be taken for a torn
  // tail: records dropped, the file truncated, a false "stopped in the middle of an append".
  const auto segment = wd + "/journal-00000000000000000000.log";
  std::string bytes;
  {
    std::ifstream in(segment, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(bytes.size() > 200);
  std::fill(bytes.begin() + static_cast<long>(bytes.size() / 2), bytes.end(), '\0');
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;

  auto refused = ChildProcess::conveyor(
    {"dispatcher", "--port", std::to_string(port), "--work-dir", wd}, "dispatcher-refused");
  REQUIRE(refused.ok());
  auto code = (*refused)->wait_exit(kStartTimeout);
  REQUIRE_MESSAGE(code.has_value(), (*refused)->describe());
  CHECK(*code != 0);
  const auto err = (*refused)->stderr_text();
  CHECK_MESSAGE(err.find(segment + " at byte ") != std::string::npos, err);
  CHECK_MESSAGE(err.find("--journal-recover") != std::string::npos, err);
  CHECK(std::filesystem::file_size(segment) == bytes.size()); // not truncated

  d = start_dispatcher(port, wd, "dispatcher-recovered", {"--journal-recover"});
  CHECK(d->wait_for_output("--journal-recover: ", kStartTimeout));
  bool moved = false;
  for (const auto& e : std::filesystem::directory_iterator(wd))
    moved = moved ||
            e.path().filename().string().rfind("journal-00000000000000000000.log.damaged-", 0) == 0;
  CHECK(moved);
  // The first dataset was registered early in the journal: it is in the kept prefix.
  auto again = run_conveyor({"read", "--dispatcher", addr(port), "--dataset-id", "1000"},
                            kReadTimeout, "reread");
  CHECK_MESSAGE(again.exit_code == 0, again.describe << "\n" << d->describe());
}

TEST_CASE("dispatcher restart: without --work-dir the start-up says state is in memory only") {
  auto d = start_dispatcher(free_port(), "", "dispatcher");
  CHECK(d->wait_for_output("state is in memory only", kStartTimeout));
}

TEST_CASE("startup order: a worker started before its dispatcher waits for it") {
  TempDir dir;
  auto port = free_port();
  auto w = start_worker(port, "early-worker", {"--dispatcher-timeout", "20000"});
  CHECK(w->wait_for_output("cannot register with the dispatcher", kStartTimeout));
  CHECK_FALSE(w->exited());
  auto d = start_dispatcher(port, dir.path() + "/work", "late-dispatcher");
  REQUIRE_MESSAGE(w->wait_for_output("worker: ready", kStartTimeout), w->describe());
  auto r = run_conveyor({"read", "--dispatcher", addr(port), "--dataset", "range(10)"},
                        kReadTimeout, "read");
  CHECK_MESSAGE(r.exit_code == 0, r.describe);
  CHECK(sorted(r.lines) == expected_sorted_lines("range(10)"));
}

TEST_CASE("startup order: a worker gives up after --dispatcher-timeout, naming it") {
  auto w = start_worker(free_port(), "lonely-worker",
                        {"--dispatcher-timeout", "700", "--connect-timeout", "200"});
  auto rc = w->wait_exit(kStartTimeout);
  REQUIRE(rc.has_value());
  CHECK(*rc != 0);
  CHECK(w->stderr_text().find("--dispatcher-timeout (700 ms)") != std::string::npos);
}

TEST_CASE("startup order: a reader started before its dispatcher retries until its connect "
          "timeout") {
  TempDir dir;
  auto port = free_port();
  auto reader = ChildProcess::conveyor(
    {"read", "--dispatcher", addr(port), "--dataset", "range(10)", "--connect-timeout", "15000"},
    "early-read");
  REQUIRE(reader.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600)); // the reader is trying by now
  CHECK_FALSE((*reader)->exited());
  auto d = start_dispatcher(port, dir.path() + "/work", "late-dispatcher");
  auto w = start_worker(port, "worker");
  auto rc = (*reader)->wait_exit(kReadTimeout);
  REQUIRE(rc.has_value());
  CHECK_MESSAGE(*rc == 0, (*reader)->describe());
  CHECK(sorted((*reader)->stdout_lines()) == expected_sorted_lines("range(10)"));
}

TEST_CASE("--connect-timeout bounds connecting: an absent dispatcher fails after it, not "
          "at once") {
  auto started = std::chrono::steady_clock::now();
  auto r = run_conveyor({"read", "--dispatcher", addr(free_port()), "--dataset", "range(3)",
                         "--connect-timeout", "1500"},
                        kReadTimeout, "read");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  started)
              .count();
  CHECK(r.exit_code == 1);
  CHECK(ms >= 1400);
  CHECK(ms < 15000);
  CHECK_MESSAGE(r.stderr_text.find("attempt(s)") != std::string::npos, r.describe);
}
