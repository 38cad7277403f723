// The reference's worked examples (000_0e6e112c7a85afc7.txt) on real processes: a dispatcher,
// workers and `conveyor read` consumers over loopback TCP.
#include <fstream>

#include <doctest/doctest.h>

#include "pipeline/tensor/codec.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Runs the read and returns its output as sorted integers; REQUIREs a clean exit.
std::vector<int64_t> read_ints(const Cluster& cluster, const std::string& dataset,
                               std::vector<std::string> flags) {
  auto r = cluster.read(dataset, std::move(flags));
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe);
  auto ints = sorted_ints(r.lines);
  CHECK_MESSAGE(ints.unparsed.empty(), r.describe);
  return ints.sorted;
}

} // namespace

// What `conveyor read` says once it has joined its job and no worker serves it yet.
const std::string kNoWorkers = "no workers are registered with the dispatcher";

TEST_CASE("reference: parallel_epochs on two workers produces every element twice") {
  Cluster cluster(2);
  // >>> dataset = tf.data.Dataset.range(10) ... processing_mode="parallel_epochs"
  CHECK(read_ints(cluster, "range(10)", {"--mode", "parallel_epochs"}) ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9});
  // The brief's smaller form, with the OFF spelling of the same mode.
  CHECK(read_ints(cluster, "range(5)", {"--mode", "off"}) ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
}

TEST_CASE("reference: distributed_epoch on two workers produces every element once") {
  Cluster cluster(2);
  CHECK(read_ints(cluster, "range(10)", {"--mode", "distributed_epoch"}) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(read_ints(cluster, "range(5)", {"--mode", "dynamic"}) ==
        std::vector<int64_t>{0, 1, 2, 3, 4});
  // Many splits (range_split_size defaults to 64): still each element exactly once.
  std::vector<int64_t> all(1000);
  for (int64_t i = 0; i < 1000; ++i)
    all[static_cast<std::size_t>(i)] = i;
  CHECK(read_ints(cluster, "range(1000)", {"--mode", "dynamic"}) == all);
}

TEST_CASE("reference: operations before distribute run on the workers") {
  // range(5).map(x*x) under parallel_epochs on two workers, then x+1 locally:
  // [1, 1, 2, 2, 5, 5, 10, 10, 17, 17]. Here the whole pipeline runs on the workers.
  Cluster cluster(2);
  CHECK(read_ints(cluster, "range(5).map(square).map(add(k=1))", {"--mode", "parallel_epochs"}) ==
        std::vector<int64_t>{1, 1, 2, 2, 5, 5, 10, 10, 17, 17});
}

TEST_CASE("reference: two consumers sharing a named DYNAMIC job together get each element once") {
  // Both consumers join the job before any worker serves it (a job ends with its consumers: one
  // that joined after the other had read everything would read the next repetition).
  Cluster cluster(0);
  const std::string dataset = "range(200).map(sleep_us(us=5000))";
  const std::vector<std::string> flags{"--mode", "dynamic",      "--job-name",
                                       "shared", "--timeout-ms", "30000"};
  auto a = cluster.start_read(dataset, flags, "consumer-a");
  auto b = cluster.start_read(dataset, flags, "consumer-b");
  REQUIRE_MESSAGE(a->wait_for_output(kNoWorkers, kReadTimeout), a->describe());
  REQUIRE_MESSAGE(b->wait_for_output(kNoWorkers, kReadTimeout), b->describe());
  cluster.add_worker();
  cluster.add_worker();
  REQUIRE_MESSAGE(a->wait_exit(kReadTimeout) == 0, a->describe());
  REQUIRE_MESSAGE(b->wait_exit(kReadTimeout) == 0, b->describe());
  auto lines = a->stdout_lines();
  const auto b_lines = b->stdout_lines();
  CHECK_MESSAGE(!lines.empty(), "consumer a got nothing\n" << a->describe());
  CHECK_MESSAGE(!b_lines.empty(), "consumer b got nothing\n" << b->describe());
  lines.insert(lines.end(), b_lines.begin(), b_lines.end());
  std::vector<int64_t> all(200);
  for (int64_t i = 0; i < 200; ++i)
    all[static_cast<std::size_t>(i)] = i;
  CHECK(sorted_ints(lines).sorted == all);
}

TEST_CASE("reference: consumers of a named OFF job on one worker split its elements") {
  // "The elements of each job will be split between the two processes": with a single worker,
  // the union of what both consumers print is range(5) exactly once.
  // Both processes join the job before its worker serves it (a job ends with its consumers: one
  // that joined after the other had read everything would read the next repetition).
  Cluster cluster(0);
  const std::string dataset = "range(5).map(sleep_us(us=100000))";
  const std::vector<std::string> flags{"--mode", "parallel_epochs", "--job-name", "my_job_name"};
  auto a = cluster.start_read(dataset, flags, "process-1");
  auto b = cluster.start_read(dataset, flags, "process-2");
  REQUIRE_MESSAGE(a->wait_for_output(kNoWorkers, kReadTimeout), a->describe());
  REQUIRE_MESSAGE(b->wait_for_output(kNoWorkers, kReadTimeout), b->describe());
  cluster.add_worker();
  REQUIRE_MESSAGE(a->wait_exit(kReadTimeout) == 0, a->describe());
  REQUIRE_MESSAGE(b->wait_exit(kReadTimeout) == 0, b->describe());
  auto lines = a->stdout_lines();
  const auto b_lines = b->stdout_lines();
  lines.insert(lines.end(), b_lines.begin(), b_lines.end());
  CHECK(sorted_ints(lines).sorted == std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("epochs: repeat produces every epoch, in both modes") {
  Cluster cluster(2);
  // DYNAMIC: the job hands out each epoch's splits once, so 3 epochs give each element 3 times.
  CHECK(read_ints(cluster, "range(5).repeat(3)", {"--mode", "dynamic"}) ==
        std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
  // OFF: each of the 2 workers runs both epochs.
  CHECK(read_ints(cluster, "range(3).repeat(2)", {"--mode", "off"}) ==
        std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
}

TEST_CASE("an empty dataset ends at once with no elements, in both modes") {
  Cluster cluster(2);
  for (const char* mode : {"off", "dynamic"}) {
    CAPTURE(mode);
    auto r = cluster.read("range(0)", {"--mode", mode});
    CHECK_MESSAGE(r.exit_code == 0, r.describe);
    CHECK(r.lines.empty());
    auto filtered = cluster.read("range(10).filter(mod_eq(m=100, r=50))", {"--mode", mode});
    CHECK_MESSAGE(filtered.exit_code == 0, filtered.describe);
    CHECK(filtered.lines.empty());
  }
}

TEST_CASE("elements print in the pipeline text form") {
  Cluster cluster(1);
  const std::string dataset = "zip(range(3), from_tensor_slices([\"a\", \"b\", \"c\"])).batch(2)";
  auto r = cluster.read(dataset, {"--mode", "off"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe);
  CHECK(sorted(r.lines) == expected_sorted_lines(dataset));
}

TEST_CASE("a large element (9 MiB) arrives intact") {
  Cluster cluster(1);
  const std::string dataset = "range(3).map(bytes(size=9437184))";
  for (const char* compression : {"NONE", "AUTO"}) {
    CAPTURE(compression);
    auto r = cluster.read(dataset,
                          {"--mode", "dynamic", "--print", "digest", "--compression", compression});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe);
    // Digest = size and crc32c of the element's encoding, computed here without the service.
    std::vector<std::string> expected;
    auto elements = parse_dataset(dataset)->collect();
    REQUIRE(elements.ok());
    for (const auto& e : *elements) {
      std::string encoded;
      encode_element(e, encoded);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%zu %08x", e.byte_size(),
                    crc32c(encoded.data(), encoded.size()));
      expected.push_back(buf);
    }
    CHECK(sorted(r.lines) == sorted(expected));
  }
}

TEST_CASE("a worker started mid-job joins the running job") {
  Cluster cluster(1);
  // OFF mode: every worker produces the whole dataset, so the second worker's task shows up as
  // a second copy of every element. One worker needs about 30 x 250 ms = 7.5 s: long enough for a
  // second worker to start and register while the job still runs, also in a loaded sanitizer build
  // (3 s was not: CI once saw the job end before the new worker registered).
  const std::string dataset = "range(30).map(sleep_us(us=250000))";
  auto reader = cluster.start_read(dataset, {"--mode", "off", "--stats", "--timeout-ms", "30000"});
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(1, kStartTimeout),
                  (reader->describe() + "\n" + cluster.describe()));
  cluster.add_worker();
  // If the job had already ended, the worker rightly got no task and the check below says nothing
  // about joining: say so instead of failing on the element count.
  REQUIRE_MESSAGE(!reader->exited(),
                  ("the job ended before the second worker registered; the test needs a "
                   "longer dataset\n" +
                   reader->describe()));
  REQUIRE_MESSAGE(reader->wait_exit(kReadTimeout) == 0,
                  (reader->describe() + "\n" + cluster.describe()));
  std::vector<int64_t> twice;
  for (int64_t i = 0; i < 30; ++i)
    twice.insert(twice.end(), {i, i});
  CHECK_MESSAGE(sorted_ints(reader->stdout_lines()).sorted == twice, reader->describe());
  // The reader's per-worker statistics name both workers.
  const std::string stats = reader->stderr_text();
  CHECK_MESSAGE(stats.find("read: 60 elements") != std::string::npos, stats);
  std::size_t worker_lines = 0;
  for (std::size_t at = 0; (at = stats.find("read:   ", at)) != std::string::npos; ++at)
    ++worker_lines;
  CHECK_MESSAGE(worker_lines == 2, stats);
}

TEST_CASE("a worker advertising another address than it binds is reached through that address") {
  Cluster cluster(0);
  // Binds 127.0.0.1, tells the dispatcher (and so the consumers) "localhost:<bound port>".
  ChildProcess& worker = cluster.add_worker({"--advertise", "localhost:%port%"});
  auto r = cluster.read("range(4)", {"--stats"});
  CAPTURE(r.describe);
  CAPTURE(worker.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(sorted_ints(r.lines).sorted == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(r.stderr_text.find("read:   localhost:") != std::string::npos);
}

TEST_CASE("functions from a plugin run on the workers that load it") {
  const std::string plugin = std::string(CONVEYOR_BINARY_DIR) + "/libtest_plugin.so";
  REQUIRE_MESSAGE(std::ifstream(plugin).good(),
                  plugin << " is missing: build the test_plugin target");
  Cluster cluster(0);
  cluster.add_worker({"--plugin", plugin});
  // The reader checks the dataset before registering it, so it loads the plugin too.
  auto r = cluster.read("range(4).map(plugin_triple)", {"--plugin", plugin});
  CAPTURE(r.describe);
  REQUIRE(r.exit_code == 0);
  CHECK(sorted_ints(r.lines).sorted == std::vector<int64_t>{0, 3, 6, 9});
  // Without it, the reader refuses the unknown function before any job starts.
  auto unknown = cluster.read("range(4).map(plugin_triple)");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.stderr_text.find("plugin_triple") != std::string::npos);
}
