// Snapshots with real processes: `conveyor save --dispatcher`, whose streams the workers write,
// through a cluster whose worker and dispatcher are SIGKILLed mid-save; a load(wait=true) that
// reads while a save writes; snapshot progress in `conveyor status`; the command's argument
// errors.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "conveyor/dataset.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "test/integration/cluster.hpp"
#include "test/integration/restartable_nodes.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = i;
  return v;
}

// Committed chunks in the snapshot at `dir` (0 while it does not exist yet).
int64_t committed(const std::string& dir) {
  auto chunks = snapshot::committed_chunks(dir);
  return chunks.ok() ? static_cast<int64_t>(chunks->size()) : 0;
}

// Waits (bounded) until at least `n` chunks are committed; false when the time ran out.
bool wait_chunks(const std::string& dir, int64_t n, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (committed(dir) >= n)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Every int of the elements' first components (a batch's too), sorted.
std::vector<int64_t> sorted_values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    for (int64_t k = 0; k < e[0].num_elements(); ++k)
      out.push_back(e[0].at<int64_t>(k));
  std::sort(out.begin(), out.end());
  return out;
}

// Saves `dataset` through 3 workers, SIGKILLs one worker after `kill_at` committed chunks and the
// dispatcher `kill_at` chunks later, restarts the dispatcher on its work dir; the save must end
// with DONE and its load yield `expected` (sorted) exactly once.
void save_through_kills(const std::string& dataset, const std::vector<int64_t>& expected,
                        const std::string& chunk_bytes, int64_t kill_at) {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string wd = dir.path() + "/work", snap = dir.path() + "/snap";
  const std::vector<std::string> allow{"--allow-path", dir.path()};
  auto d1 = start_dispatcher(free_port(), wd, "dispatcher1", allow);
  const uint16_t port = *d1->wait_listening(kStartTimeout);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(start_worker(port, "worker" + std::to_string(i + 1), allow));
    REQUIRE(workers.back()->wait_for_output("worker: ready", kStartTimeout));
  }
  auto saver = ChildProcess::conveyor({"save", "--dispatcher", addr(port), "--dataset", dataset,
                                       "--path", snap, "--chunk-bytes", chunk_bytes},
                                      "save");
  REQUIRE(saver.ok());
  REQUIRE_MESSAGE(d1->wait_for_output("created snapshot", kReadTimeout), d1->describe());
  // Each worker writes a stream of its own.
  for (const auto& w : workers)
    REQUIRE_MESSAGE(w->wait_for_output("writing stream", kReadTimeout), w->describe());
  REQUIRE_MESSAGE(wait_chunks(snap, kill_at, kReadTimeout), d1->describe());
  workers[2]->signal(SIGKILL);
  REQUIRE_MESSAGE(d1->wait_for_output("lost its worker", kReadTimeout), d1->describe());
  REQUIRE_MESSAGE(wait_chunks(snap, committed(snap) + kill_at, kReadTimeout), d1->describe());
  REQUIRE_FALSE((*saver)->exited()); // the save was not over yet
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  const int64_t before_restart = committed(snap);
  auto d2 = start_dispatcher(port, wd, "dispatcher2", allow);
  REQUIRE_MESSAGE(d2->wait_for_output("resuming the snapshot", kReadTimeout), d2->describe());
  // Who writes which stream is journaled: the restarted dispatcher keeps the live workers'
  // streams for them from the start rather than handing them to whoever asks first.
  CHECK_MESSAGE(d2->wait_for_output("(journaled)", kStartTimeout), d2->describe());
  auto rc = (*saver)->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), (*saver)->describe());
  REQUIRE_MESSAGE(*rc == 0, ((*saver)->describe() + "\n" + d2->describe()));
  CHECK(committed(snap) > before_restart); // written on after the restart
  // Each live worker kept its stream across the restart: none was given to another worker.
  for (int i = 0; i < 2; ++i) {
    const std::string out = workers[static_cast<std::size_t>(i)]->stdout_text() +
                            workers[static_cast<std::size_t>(i)]->stderr_text();
    CHECK_MESSAGE(out.find("gave it to another worker") == std::string::npos, out);
  }
  // The lost worker's stream was taken over: every stream is done.
  CHECK_MESSAGE(d2->wait_for_output("is done", kStartTimeout), d2->describe());
  // Done: the streams' checkpoints are no longer needed (the log line comes after their removal).
  CHECK_FALSE(std::filesystem::exists(snap + "/checkpoints"));
  CHECK(snapshot::progress(snap).value().state == snapshot::State::done);
  auto loaded = Dataset::load(snap).collect();
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(sorted_values(*loaded) == expected);
  // Elements as saved (batches of a batched dataset), each once.
  CHECK((*saver)->stdout_text().find("saved " + std::to_string(loaded->size()) + " elements") !=
        std::string::npos);
  // `conveyor status` shows the snapshot's progress.
  auto status = run_conveyor({"status", "--dispatcher", addr(port), "--json"}, kReadTimeout);
  REQUIRE_MESSAGE(status.exit_code == 0, status.describe);
  CHECK_MESSAGE(status.stdout_text.find("\"state\":\"done\"") != std::string::npos,
                status.stdout_text);
  CHECK(status.stdout_text.find("\"streams\":3") != std::string::npos);
}

// Reads a load(wait=true) iterator to its end while `saver` writes the snapshot: the first
// element arrives before the save exits, the save exits 0, and range(n) comes out exactly once.
// Bounded: the load ends at DONE and fails at ERROR.
void load_while_saving(Iterator& it, ChildProcess& saver, int64_t n) {
  std::vector<Element> got;
  bool first_before_exit = false;
  for (;;) {
    Element e;
    bool end = false;
    auto st = it.get_next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      break;
    if (got.empty())
      first_before_exit = !saver.exited();
    got.push_back(std::move(e));
  }
  auto rc = saver.wait_exit(kReadTimeout);
  REQUIRE(rc.has_value());
  CHECK_MESSAGE(*rc == 0, saver.describe());
  CHECK(first_before_exit);
  CHECK(sorted_values(got) == iota(n));
}

// A dispatcher on `port` whose workers may be slow to heartbeat (60 s timeout), writing under `dir`.
std::unique_ptr<ChildProcess> start_snapshot_dispatcher(uint16_t port, const std::string& dir) {
  auto d = ChildProcess::conveyor({"dispatcher", "--port", std::to_string(port), "--worker-timeout",
                                   "60000", "--allow-path", dir},
                                  "dispatcher");
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  REQUIRE_MESSAGE((*d)->wait_listening(kStartTimeout).ok(), (*d)->describe());
  return std::move(d).value();
}

} // namespace

TEST_CASE("snapshot: the workers write a save's streams, it survives a worker SIGKILL and a "
          "dispatcher SIGKILL, and its load yields every element exactly once") {
  // ~1.2 s of work on 3 workers (12000 x 300 us) in ~50 small chunks: both kills land mid-save.
  save_through_kills("range(12000).map(sleep_us(us=300))", iota(12000), "4000", 4);
}

TEST_CASE("snapshot: a pipeline that is not per-split (seeded shuffle, batch) resumes its streams "
          "from their checkpoints through a worker SIGKILL and a dispatcher SIGKILL, every "
          "element exactly once") {
  // Chunks of ~50 batches of 7; the taken-over and the restarted streams restore the pipeline
  // (its shuffle buffer, partial batch and split) saved with their last committed chunk.
  save_through_kills("range(12000).map(sleep_us(us=300)).shuffle(64, seed=5).batch(7)", iota(12000),
                     "4000", 4);
}

TEST_CASE("snapshot: a `cache` pipeline's streams resume from their checkpoints through a worker "
          "SIGKILL and a dispatcher SIGKILL, every element exactly once") {
  // The taken-over and the restarted streams restore the memory cache's filling pass (its
  // input's state) saved with their last committed chunk.
  save_through_kills("range(12000).map(sleep_us(us=300)).shuffle(64, seed=5).cache().batch(7)",
                     iota(12000), "4000", 4);
}

TEST_CASE("snapshot: range(10**6).map(square) saved by 3 workers through a worker SIGKILL and a "
          "dispatcher SIGKILL loads every element exactly once") {
  // One chunk per split (3906 elements): 256 chunks, the kills after 20 and 40 of them.
  std::vector<int64_t> squares(1000000);
  for (int64_t i = 0; i < 1000000; ++i)
    squares[static_cast<std::size_t>(i)] = i * i;
  save_through_kills("range(1000000).map(square)", squares, "1000", 20);
}

TEST_CASE("snapshot: load(wait=true) started before a save reads everything exactly once while "
          "the save runs") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  auto it = Dataset::load(snap, /*wait=*/true).make_iterator();
  REQUIRE(it.ok());
  // ~1 s of work in the saving process, committed in ~40 chunks.
  auto saver = ChildProcess::conveyor({"save", "--dataset", "range(4000).map(sleep_us(us=250))",
                                       "--path", snap, "--chunk-bytes", "1000"},
                                      "save");
  REQUIRE(saver.ok());
  load_while_saving(**it, **saver, 4000);
}

TEST_CASE("snapshot: load(wait=true) started before a distributed save reads what the workers "
          "commit, every element exactly once, while the save runs") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  const std::vector<std::string> allow{"--allow-path", dir.path()};
  auto d = start_dispatcher(free_port(), "", "dispatcher", allow);
  const uint16_t port = *d->wait_listening(kStartTimeout);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(start_worker(port, "worker" + std::to_string(i + 1), allow));
    REQUIRE(workers.back()->wait_for_output("worker: ready", kStartTimeout));
  }
  auto it = Dataset::load(snap, /*wait=*/true).make_iterator();
  REQUIRE(it.ok());
  // ~0.5 s of work on 2 workers, committed in ~40 chunks.
  auto saver = ChildProcess::conveyor({"save", "--dispatcher", addr(port), "--dataset",
                                       "range(4000).map(sleep_us(us=250))", "--path", snap,
                                       "--chunk-bytes", "1000"},
                                      "save");
  REQUIRE(saver.ok());
  load_while_saving(**it, **saver, 4000);
}

TEST_CASE("snapshot: a distributed save starts at once, not at the workers' next heartbeat") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  const uint16_t port = free_port();
  auto d = start_snapshot_dispatcher(port, dir.path());
  // Heartbeats far apart: a worker that learnt of its stream only with its next heartbeat ack
  // would start writing up to 8 s after the save started; the dispatcher's nudge starts it now.
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    auto w = ChildProcess::conveyor({"worker", "--dispatcher", addr(port), "--port", "0",
                                     "--heartbeat-interval", "8000", "--allow-path", dir.path()},
                                    "worker" + std::to_string(i + 1));
    REQUIRE_MESSAGE(w.ok(), w.status().to_string());
    REQUIRE_MESSAGE((*w)->wait_for_output("worker: ready", kStartTimeout), (*w)->describe());
    workers.push_back(std::move(*w));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto saved = run_conveyor(
    {"save", "--dispatcher", addr(port), "--dataset", "range(2000)", "--path", snap}, kReadTimeout);
  const auto took =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE_MESSAGE(saved.exit_code == 0, saved.describe);
  CHECK_MESSAGE(took < std::chrono::milliseconds(4000),
                "the save took " << took.count() << " ms; " << d->describe());
  auto loaded = Dataset::load(snap).collect();
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(sorted_values(*loaded) == iota(2000));
}

TEST_CASE("snapshot: a worker that registers while a save waits for workers writes at once") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  const uint16_t port = free_port();
  auto d = start_snapshot_dispatcher(port, dir.path());
  auto saver = ChildProcess::conveyor(
    {"save", "--dispatcher", addr(port), "--dataset", "range(2000)", "--path", snap}, "save");
  REQUIRE_MESSAGE(saver.ok(), saver.status().to_string());
  REQUIRE_MESSAGE(d->wait_for_output("created snapshot at", kStartTimeout), d->describe());
  // The snapshot waits for a worker. This one heartbeats every 8 s: without the nudge that
  // follows its registration it would learn of its stream only with its first heartbeat's ack.
  const auto t0 = std::chrono::steady_clock::now();
  auto w = ChildProcess::conveyor({"worker", "--dispatcher", addr(port), "--port", "0",
                                   "--heartbeat-interval", "8000", "--allow-path", dir.path()},
                                  "worker1");
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  const auto code = (*saver)->wait_exit(kReadTimeout);
  const auto took =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE_MESSAGE(code.has_value(), (*saver)->describe());
  REQUIRE_MESSAGE(*code == 0, (*saver)->describe());
  CHECK_MESSAGE(took < std::chrono::milliseconds(5000),
                "the save ended " << took.count() << " ms after the worker started; "
                                  << (*w)->describe());
  auto loaded = Dataset::load(snap).collect();
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(sorted_values(*loaded) == iota(2000));
}

TEST_CASE("snapshot: `conveyor save` refuses bad arguments and an existing snapshot (exit 2)") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string snap = dir.path() + "/snap";
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), "save");
    return run_conveyor(args, kReadTimeout);
  };
  auto ok = run({"--dataset", "range(10)", "--path", snap});
  CHECK_MESSAGE(ok.exit_code == 0, ok.describe);
  CHECK(ok.stdout_text.find("saved 10 elements in 1 chunks") != std::string::npos);
  auto again = run({"--dataset", "range(10)", "--path", snap});
  CHECK(again.exit_code == 2);
  CHECK(again.stderr_text.find("written once") != std::string::npos);
  auto compression = run({"--dataset", "range(10)", "--path", snap + "2", "--compression", "zstd"});
  CHECK(compression.exit_code == 2);
  CHECK(compression.stderr_text.find("`--compression` must be lz4 or none") != std::string::npos);
  auto infinite = run({"--dataset", "range(10).repeat()", "--path", snap + "3"});
  CHECK(infinite.exit_code == 2);
  CHECK(infinite.stderr_text.find("infinite") != std::string::npos);
  auto timeout = run({"--dataset", "range(10)", "--path", snap + "4", "--connect-timeout", "10"});
  CHECK(timeout.exit_code == 2);
  CHECK(timeout.stderr_text.find("only with `--dispatcher`") != std::string::npos);
}

TEST_CASE("snapshot: a distributed save with no worker fails after --stall-timeout and marks the "
          "snapshot failed; without it the save waits") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string wd = dir.path() + "/work", snap = dir.path() + "/snap";
  const std::vector<std::string> allow{"--allow-path", dir.path()};
  auto d = start_dispatcher(free_port(), wd, "dispatcher", allow);
  const uint16_t port = *d->wait_listening(kStartTimeout);
  auto stalled = run_conveyor({"save", "--dispatcher", addr(port), "--dataset", "range(100)",
                               "--path", snap, "--stall-timeout", "1500"},
                              kReadTimeout);
  CHECK_MESSAGE(stalled.exit_code == 1, stalled.describe);
  CHECK_MESSAGE(stalled.stderr_text.find("no element arrived for") != std::string::npos,
                stalled.describe);
  CHECK(stalled.stderr_text.find("stall_timeout 1500 ms") != std::string::npos);
  // The snapshot records the cause: a load fails with it.
  auto loaded = Dataset::load(snap).make_iterator();
  std::string load_error = loaded.ok() ? "" : loaded.status().to_string();
  if (loaded.ok()) {
    Element e;
    bool end = false;
    load_error = (*loaded)->get_next(e, end).to_string();
  }
  CHECK_MESSAGE(load_error.find("no element arrived for") != std::string::npos, load_error);
  // Without the flag the save waits for a worker: one that registers late completes it.
  auto waiting = ChildProcess::conveyor(
    {"save", "--dispatcher", addr(port), "--dataset", "range(100)", "--path", snap + "2"}, "save");
  REQUIRE(waiting.ok());
  REQUIRE_MESSAGE(d->wait_for_output("created snapshot", kReadTimeout), d->describe());
  auto worker = start_worker(port, "worker", allow);
  auto rc = (*waiting)->wait_exit(kReadTimeout);
  REQUIRE(rc.has_value());
  CHECK_MESSAGE(*rc == 0, (*waiting)->describe());
  auto bad =
    run_conveyor({"save", "--dataset", "range(10)", "--path", snap + "3", "--stall-timeout", "10"},
                 kReadTimeout);
  CHECK(bad.exit_code == 2);
  CHECK(bad.stderr_text.find("`--stall-timeout` is used only with `--dispatcher`") !=
        std::string::npos);
}

TEST_CASE("snapshot: --snapshot-reuse reads a registered dataset from the finished snapshot of "
          "its fingerprint instead of running it") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string lines_file = dir.path() + "/lines.txt", snaps = dir.path() + "/snaps";
  auto write_lines = [&](const std::string& prefix) {
    std::ofstream out(lines_file, std::ios::trunc);
    for (int i = 0; i < 5; ++i)
      out << prefix << i << "\n";
  };
  write_lines("old");
  const std::string dataset = "text_lines(\"" + lines_file + "\")";
  auto saved = run_conveyor({"save", "--dataset", dataset, "--path", snaps + "/one"}, kReadTimeout);
  REQUIRE_MESSAGE(saved.exit_code == 0, saved.describe);
  // The file changes after the save: a read that runs the pipeline sees "new", one that reads
  // the snapshot sees "old".
  write_lines("new");
  auto d = start_dispatcher(free_port(), "", "dispatcher",
                            {"--allow-path", dir.path(), "--snapshot-reuse", snaps});
  const uint16_t port = *d->wait_listening(kStartTimeout);
  auto worker = start_worker(port, "worker", {"--allow-path", dir.path()});
  REQUIRE(worker->wait_for_output("worker: ready", kStartTimeout));
  for (const char* mode : {"off", "dynamic"}) {
    auto read = run_conveyor(
      {"read", "--dispatcher", addr(port), "--dataset", dataset, "--mode", mode}, kReadTimeout);
    CHECK_MESSAGE(read.exit_code == 0, read.describe);
    CHECK_MESSAGE(read.lines.size() == 5, read.describe);
    CHECK_MESSAGE(read.stdout_text.find("old0") != std::string::npos, read.describe);
    CHECK_MESSAGE(read.stdout_text.find("new") == std::string::npos, read.describe);
  }
  CHECK_MESSAGE(
    d->wait_for_output("reading the finished snapshot at " + snaps + "/one", kStartTimeout),
    d->describe());
  // Another fingerprint runs its pipeline.
  auto other = run_conveyor({"read", "--dispatcher", addr(port), "--dataset", dataset + ".take(5)"},
                            kReadTimeout);
  CHECK_MESSAGE(other.exit_code == 0, other.describe);
  CHECK_MESSAGE(other.stdout_text.find("new0") != std::string::npos, other.describe);
  // A reuse directory the dispatcher may not list is refused at start-up.
  auto refused = run_conveyor(
    {"dispatcher", "--port", "0", "--allow-path", snaps + "/one", "--snapshot-reuse", dir.path()},
    kReadTimeout);
  CHECK_MESSAGE(refused.exit_code.value_or(0) != 0, refused.describe);
  CHECK_MESSAGE(refused.stderr_text.find("`--snapshot-reuse`") != std::string::npos,
                refused.describe);
}
