// Resumable DYNAMIC reads with real processes (issue 36): a `conveyor read --checkpoint-to` trainer
// is SIGKILLed at random points mid-epoch and restarted with `--resume-from` its last cursor; the
// elements its cursors covered, over all attempts, must be the epoch exactly once.
//
// What "consumed" means here: `conveyor read` flushes the lines it printed before it replaces
// the cursor file, and a resumed read says how many elements its cursor covers ("after M consumed
// element(s)"). So of an attempt that was killed, exactly the first M - M_before lines it printed
// are covered (it may have printed more, which the next attempt reads again); the last attempt
// runs to its end. The union fails on an element repeated (a cursor that covers too little is
// not possible here: the count is the cursor's) or skipped (an element covered but never printed
// makes an attempt's line count short, which fails too).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/integration/cursor_file.hpp"
#include "test/integration/restartable_nodes.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using conveyor::testing::ChildProcess;
using conveyor::testing::Cluster;
using conveyor::testing::CursorFile;
using conveyor::testing::Millis;
using conveyor::testing::resumed_after;

namespace {

using namespace conveyor::testing;

// `conveyor read` of `dataset` in `mode` with `extra` flags, started.
std::unique_ptr<ChildProcess> start_read(uint16_t port, const std::string& dataset,
                                         const std::string& mode, std::vector<std::string> extra,
                                         const std::string& name) {
  std::vector<std::string> args{"read",  "--dispatcher", addr(port), "--dataset",
                                dataset, "--mode",       mode};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = ChildProcess::conveyor(args, name);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return std::move(r).value();
}

enum class Fault { none, worker, cluster };

// range(n) read by `attempts` killed trainers and one that runs to its end. `fault`: also a
// worker SIGKILLed during the second attempt, or the whole cluster (dispatcher and workers)
// replaced by a new one before each resume. `mode` off: each of the 2 workers' tasks (the read's
// slots) produces range(n), so every element is consumed exactly twice, once per slot.
void kill_and_resume(int64_t n, int attempts, Fault fault, const std::string& mode = "dynamic") {
  const int64_t copies = mode == "off" ? 2 : 1;
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  // A killed trainer's private job is dropped after --client-timeout: until then its tasks keep
  // their paused pipelines, and the workers' drain at the cluster's teardown would wait for them.
  const std::vector<std::string> dispatcher_flags{"--client-timeout", "2000"};
  auto cluster = std::make_unique<Cluster>(2, dispatcher_flags);
  const std::string dataset = "range(" + std::to_string(n) + ").map(sleep_us(us=1000))";
  CursorFile cursor;
  std::vector<std::string> flags{
    "--mode",       mode,   "--checkpoint-to", cursor.path, "--checkpoint-every", "50",
    "--timeout-ms", "60000"};
  std::vector<std::string> consumed; // what the cursors covered, all attempts
  std::vector<std::string> last_lines;
  int64_t covered = 0; // elements the last saved cursor covered
  int killed = 0;
  for (int attempt = 0; attempt <= attempts; ++attempt) {
    std::vector<std::string> args = flags;
    if (cursor.exists()) {
      args.push_back("--resume-from");
      args.push_back(cursor.path);
    }
    auto reader = cluster->start_read(dataset, args, "trainer");
    if (cursor.exists()) {
      const int64_t m = resumed_after(*reader);
      // The killed attempt's first (m - covered) lines are what its last saved cursor added.
      REQUIRE_MESSAGE(m >= covered, reader->describe());
      REQUIRE_MESSAGE(static_cast<int64_t>(last_lines.size()) >= m - covered,
                      "the cursor covers " << m - covered
                                           << " elements, the killed trainer printed "
                                           << last_lines.size());
      consumed.insert(consumed.end(), last_lines.begin(), last_lines.begin() + (m - covered));
      covered = m;
    }
    if (attempt == attempts) { // the last one reads to the end
      auto code = reader->wait_exit(Millis{120000});
      REQUIRE(code.has_value());
      REQUIRE_MESSAGE(*code == 0, std::string(reader->describe() + cluster->describe()));
      auto lines = reader->stdout_lines();
      consumed.insert(consumed.end(), lines.begin(), lines.end());
      break;
    }
    // Killed somewhere in the next 20..40% of the epoch.
    std::uniform_int_distribution<int64_t> at{copies * n / 5, 2 * copies * n / 5};
    const auto kill_at = static_cast<std::size_t>(at(rng));
    if (!reader->wait_for_stdout_lines(kill_at, Millis{60000})) {
      // It ended first (or failed): then it must have read everything.
      auto code = reader->wait_exit(Millis{60000});
      REQUIRE_MESSAGE(code == std::optional<int>{0},
                      std::string(reader->describe() + cluster->describe()));
      auto lines = reader->stdout_lines();
      consumed.insert(consumed.end(), lines.begin(), lines.end());
      break;
    }
    if (fault == Fault::worker && attempt == 1) {
      cluster->worker(1).signal(SIGKILL);
      REQUIRE(reader->wait_for_stdout_lines(kill_at + 100, Millis{60000}));
    }
    reader->signal(SIGKILL);
    REQUIRE(reader->wait_exit(Millis{30000}).has_value());
    ++killed;
    last_lines = reader->stdout_lines();
    if (fault == Fault::cluster) { // a new dispatcher and new workers: nothing of the old job
      cluster.reset();
      cluster = std::make_unique<Cluster>(2, dispatcher_flags);
    }
  }
  INFO("killed " << killed << " trainer(s)");
  CHECK(killed >= 1);
  std::vector<int64_t> got;
  got.reserve(consumed.size());
  for (const auto& l : consumed)
    got.push_back(std::stoll(l));
  std::sort(got.begin(), got.end());
  CHECK(static_cast<int64_t>(got.size()) == copies * n);
  int64_t repeated = 0, missing = 0;
  for (int64_t i = 0, k = 0; i < n; ++i) {
    int64_t c = 0;
    while (k < static_cast<int64_t>(got.size()) && got[static_cast<std::size_t>(k)] == i) {
      ++c;
      ++k;
    }
    if (c < copies)
      missing += copies - c;
    if (c > copies)
      repeated += c - copies;
  }
  CHECK(missing == 0);
  CHECK(repeated == 0);
}

// How many of the values 0..n-1 `got` lacks and has too many of, against `copies` of each.
std::pair<int64_t, int64_t> missing_and_repeated(std::vector<int64_t> got, int64_t n,
                                                 int64_t copies) {
  std::sort(got.begin(), got.end());
  int64_t missing = 0, repeated = 0;
  for (int64_t v = 0, k = 0; v < n; ++v) {
    int64_t c = 0;
    for (; k < static_cast<int64_t>(got.size()) && got[static_cast<std::size_t>(k)] == v; ++k)
      ++c;
    missing += std::max<int64_t>(0, copies - c);
    repeated += std::max<int64_t>(0, c - copies);
  }
  return {missing, repeated};
}

} // namespace

TEST_CASE("resume: a DYNAMIC trainer SIGKILLed at random points and resumed from its cursor "
          "consumes the epoch exactly once") {
  kill_and_resume(3000, 3, Fault::none);
}

TEST_CASE("resume: an OFF trainer on 2 workers SIGKILLed at two random points and resumed from "
          "its cursor consumes each task's copy of the dataset exactly once") {
  kill_and_resume(1500, 2, Fault::none, "off");
}

TEST_CASE("resume: an OFF read resumes on a new cluster from the cursor alone") {
  kill_and_resume(1000, 1, Fault::cluster, "off");
}

TEST_CASE("resume: a worker SIGKILLed too - the resumed trainer still consumes the epoch once") {
  kill_and_resume(3000, 2, Fault::worker);
}

TEST_CASE("resume: the whole cluster restarted before each resume (no journal) - the cursor "
          "alone continues the epoch exactly once") {
  kill_and_resume(3000, 2, Fault::cluster);
}

TEST_CASE("resume: refused clearly - another dataset's cursor, another mode, a pipeline that "
          "mixes splits, and the same dataset reads exactly the rest") {
  // A refused read may leave the moment its job is made, before its connection to the worker:
  // the job then waits for it to re-join, and at the end of the test its task's drain waits for
  // it up to --drain-timeout (30 s by default) — longer than the cluster's shutdown waits.
  Cluster cluster(0);
  cluster.add_worker({"--drain-timeout", "3000"});
  CursorFile cursor;
  auto first = cluster.read("range(100)", {"--mode", "dynamic", "--checkpoint-to", cursor.path,
                                           "--checkpoint-every", "10", "--take", "30"});
  REQUIRE_MESSAGE(first.exit_code == std::optional<int>{0}, first.describe);
  REQUIRE(cursor.exists());
  // Another dataset: the dispatcher compares fingerprints.
  auto other = cluster.read("range(200)", {"--mode", "dynamic", "--resume-from", cursor.path});
  CHECK(other.exit_code != std::optional<int>{0});
  CHECK_MESSAGE(other.stderr_text.find("`resume_from` is a cursor of another dataset") !=
                  std::string::npos,
                other.describe);
  // A DYNAMIC cursor does not resume an OFF read (refused before anything touches the network).
  auto off = cluster.read("range(100)", {"--mode", "off", "--resume-from", cursor.path});
  CHECK(off.exit_code == std::optional<int>{2});
  CHECK_MESSAGE(off.stderr_text.find("is the cursor of a DYNAMIC (distributed_epoch) read, but "
                                     "this read is OFF") != std::string::npos,
                off.describe);
  // An OFF read of an unseeded shuffle has no cursor: a new task would draw another order.
  CursorFile shuffled;
  auto unseeded =
    cluster.read("range(100).shuffle(10)", {"--mode", "off", "--checkpoint-to", shuffled.path});
  CHECK(unseeded.exit_code != std::optional<int>{0});
  CHECK_MESSAGE(unseeded.stderr_text.find("`shuffle` without a seed") != std::string::npos,
                unseeded.describe);
  // A pipeline whose elements do not name their split has no cursor.
  CursorFile unused;
  auto batched =
    cluster.read("range(100).batch(4)", {"--mode", "dynamic", "--checkpoint-to", unused.path});
  CHECK(batched.exit_code != std::optional<int>{0});
  CHECK_MESSAGE(batched.stderr_text.find("cannot be resumed") != std::string::npos,
                batched.describe);
  // The same dataset resumes: the 70 elements the first read did not print.
  auto rest = cluster.read("range(100)", {"--mode", "dynamic", "--resume-from", cursor.path});
  REQUIRE_MESSAGE(rest.exit_code == std::optional<int>{0}, rest.describe);
  CHECK(first.lines.size() == 30);
  CHECK(rest.lines.size() == 70);
  std::vector<std::string> all = first.lines;
  all.insert(all.end(), rest.lines.begin(), rest.lines.end());
  CHECK(conveyor::testing::sorted(all) == conveyor::testing::expected_sorted_lines("range(100)"));
}

// The resumed job's tasks spend their first seconds dropping the partial splits' consumed
// prefixes, a stretch in which their pipelines return no element and the task actors read no
// message: the restored job's re-assignment reaches the workers before their old tasks have seen
// their job go. Handed those doomed tasks, the restored job kept a task that vanished and the read
// retried it forever; the workers start such a task afresh under its id (worker_actor.cpp).
TEST_CASE("resume: the dispatcher SIGKILLed mid resumed read and restarted on its work dir - the "
          "restored job does not know the cursor, the consumer drops what it covers") {
  using namespace conveyor::testing;
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string wd = dir.path() + "/work";
  JournaledPair nodes(wd);
  auto& d1 = nodes.dispatcher;
  const uint16_t port = nodes.port;
  const std::string dataset = "range(8000).map(sleep_us(us=2000))";
  CursorFile cursor;
  const auto read = [&](std::vector<std::string> extra, const std::string& name) {
    return start_read(port, dataset, "dynamic", std::move(extra), name);
  };
  // 2000 elements consumed, then the rest from the cursor.
  auto first =
    read({"--take", "2000", "--checkpoint-to", cursor.path, "--checkpoint-every", "100"}, "first");
  REQUIRE(first->wait_exit(kReadTimeout) == std::optional<int>{0});
  auto rest = read({"--resume-from", cursor.path}, "rest");
  // Killed while the partial splits (handed out first, with their skip) still run: the restored
  // job hands them out again whole, and only the consumer's cursor drops their consumed prefix.
  REQUIRE_MESSAGE(d1->wait_for_output("resumed from a read cursor", kReadTimeout), d1->describe());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE_FALSE(rest->exited()); // the read was not over yet
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2");
  auto rc = rest->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), rest->describe());
  CHECK_MESSAGE(*rc == 0, std::string(rest->describe() + d2->describe()));
  CHECK(first->stdout_lines().size() == 2000);
  std::vector<std::string> all = first->stdout_lines();
  const auto more = rest->stdout_lines();
  all.insert(all.end(), more.begin(), more.end());
  CHECK_MESSAGE(sorted(all) == expected_sorted_lines(dataset),
                "first " << first->stdout_lines().size() << " + rest " << more.size());
}

// A resumed OFF job's slots are journaled (journal format 15). Here the resumed read starts with
// one worker for two slots: the second slot waits for a worker. The dispatcher is SIGKILLed and
// restarted on its work dir meanwhile, and a worker that joins the restored job gets the waiting
// slot's task (with its skip). Before, the restored job did not know its slots: the joining worker
// got a task of the whole dataset, repeating the slot's consumed prefix.
TEST_CASE("resume: an OFF read's slots survive a dispatcher restart - a worker that joins the "
          "restored job serves the slot left, each slot's elements exactly once") {
  using namespace conveyor::testing;
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string wd = dir.path() + "/work";
  JournaledPair nodes(wd);
  auto& d1 = nodes.dispatcher;
  auto& w1 = nodes.w1;
  auto& w2 = nodes.w2;
  const uint16_t port = nodes.port;
  constexpr int64_t kN = 4000;
  // ~12 s per slot: the restart and the joining worker come well before the first slot's end.
  const std::string dataset = "range(4000).map(sleep_us(us=3000))";
  CursorFile cursor;
  const auto read = [&](std::vector<std::string> extra, const std::string& name) {
    return start_read(port, dataset, "off", std::move(extra), name);
  };
  // 400 elements of the two slots (the two workers' tasks), then the cursor.
  auto first =
    read({"--take", "400", "--checkpoint-to", cursor.path, "--checkpoint-every", "50"}, "first");
  REQUIRE(first->wait_exit(kReadTimeout) == std::optional<int>{0});
  // The second worker leaves (drained) and is removed: the resumed job has a worker for one slot.
  w2->signal(SIGTERM);
  REQUIRE(w2->wait_exit(kStartTimeout) == std::optional<int>{0});
  REQUIRE_MESSAGE(d1->wait_for_output("removed (worker", kStartTimeout), d1->describe());
  auto rest = read({"--resume-from", cursor.path}, "rest");
  REQUIRE_MESSAGE(d1->wait_for_output("resumed from a read cursor", kReadTimeout), d1->describe());
  REQUIRE_MESSAGE(rest->wait_for_stdout_lines(100, kReadTimeout), rest->describe());
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2");
  auto w3 = start_worker(port, "worker3");
  REQUIRE_MESSAGE(w3->wait_for_output("started task", kReadTimeout), w3->describe());
  auto rc = rest->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), rest->describe());
  CHECK_MESSAGE(*rc == 0, std::string(rest->describe() + d2->describe() + w3->describe()));
  REQUIRE_FALSE(w1->exited());
  // Each value once per slot: the first read's part of it plus the resumed read's.
  std::vector<int64_t> got;
  for (const auto& lines : {first->stdout_lines(), rest->stdout_lines()})
    for (const auto& l : lines)
      got.push_back(std::stoll(l));
  const auto [missing, repeated] = missing_and_repeated(got, kN, 2);
  CHECK_MESSAGE(got.size() == static_cast<std::size_t>(2 * kN),
                "first " << first->stdout_lines().size() << " + rest "
                         << rest->stdout_lines().size());
  CHECK(missing == 0);
  CHECK(repeated == 0);
}

// The cursor learns an OFF task's end while the read goes on (ConsumerCore::take_ended_slots: the
// end often comes in an empty reply after the task's last batch), so a trainer killed after one
// slot ended but before the read's end resumes without that slot. Here the second worker is
// stopped (SIGSTOP) until the first one's task has run to its end, then continued; the trainer is
// SIGKILLed once its cursor says the first slot ended, and the first worker SIGKILLed too: the
// resumed read has one worker, for the one slot left. A cursor that did not know the end would
// make the resumed job wait for a second worker, and the read would not end.
TEST_CASE("resume: an OFF slot that ended mid-read is ended in the cursor - the resumed read on "
          "the one worker left needs no task for it, each slot's elements exactly once") {
  constexpr int64_t kN = 500;
  const std::string dataset = "range(" + std::to_string(kN) + ").map(sleep_us(us=4000))";
  // Heartbeats of the stopped worker are missed for a few seconds: not a loss here.
  Cluster cluster(2, {"--client-timeout", "2000", "--worker-timeout", "60000"});
  CursorFile cursor;
  auto first = cluster.start_read(dataset,
                                  {"--mode", "off", "--checkpoint-to", cursor.path,
                                   "--checkpoint-every", "10", "--timeout-ms", "60000"},
                                  "trainer");
  REQUIRE_MESSAGE(first->wait_for_stdout_lines(40, kReadTimeout), first->describe());
  cluster.worker(1).signal(SIGSTOP);
  // The first worker's slot runs on alone: all its kN elements (the other slot's few before).
  const bool first_slot_done = first->wait_for_stdout_lines(kN, kReadTimeout);
  cluster.worker(1).signal(SIGCONT);
  REQUIRE_MESSAGE(first_slot_done, std::string(first->describe() + cluster.describe()));
  // The next cursor written names the ended slot ("slot S CONSUMED ENDED") while the other one
  // is still open. (A cursor that learned task ends only at the read's end has both at once.)
  const std::regex ended_slot("slot \\d+ " + std::to_string(kN) + " 1\n");
  const std::regex open_slot("slot \\d+ \\d+ 0\n");
  const auto one_ended = [&](const std::string& text) {
    return std::regex_search(text, ended_slot) && std::regex_search(text, open_slot);
  };
  const auto deadline = std::chrono::steady_clock::now() + kReadTimeout;
  std::string text;
  bool ended = false;
  while (!ended && !first->exited() && std::chrono::steady_clock::now() < deadline) {
    text = cursor.text();
    ended = one_ended(text);
    if (!ended)
      std::this_thread::sleep_for(std::chrono::milliseconds(20)); // polling the file
  }
  REQUIRE_MESSAGE(
    ended, std::string("no cursor with one slot ended, the last:\n" + text + first->describe()));
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(Millis{30000}).has_value());
  const std::string saved = cursor.text();
  REQUIRE_MESSAGE(one_ended(saved), "the other slot ended before the kill: " << saved);
  cluster.worker(0).signal(SIGKILL);
  REQUIRE(cluster.worker(0).wait_exit(Millis{30000}).has_value());
  REQUIRE_MESSAGE(cluster.dispatcher().wait_for_output("removed (worker", kStartTimeout),
                  cluster.dispatcher().describe());

  auto rest =
    cluster.start_read(dataset, {"--mode", "off", "--resume-from", cursor.path}, "resumed");
  const int64_t m = resumed_after(*rest);
  auto rc = rest->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), std::string(rest->describe() + cluster.describe()));
  REQUIRE_MESSAGE(*rc == 0, std::string(rest->describe() + cluster.describe()));
  const auto killed_lines = first->stdout_lines();
  REQUIRE(static_cast<int64_t>(killed_lines.size()) >= m);
  std::vector<int64_t> got;
  for (int64_t i = 0; i < m; ++i)
    got.push_back(std::stoll(killed_lines[static_cast<std::size_t>(i)]));
  for (const auto& l : rest->stdout_lines())
    got.push_back(std::stoll(l));
  const auto [missing, repeated] = missing_and_repeated(got, kN, 2);
  CHECK_MESSAGE(got.size() == static_cast<std::size_t>(2 * kN),
                "covered " << m << " + resumed " << rest->stdout_lines().size());
  CHECK(missing == 0);
  CHECK(repeated == 0);
}
