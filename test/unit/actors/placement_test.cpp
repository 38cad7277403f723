// Placement (consumer/placement.hpp): target_workers parsing, worker tags, the reference's rule of
// which tasks a consumer reads, and its start-up errors; then in-process clusters reading with
// LOCAL (the in-process path, large elements included) and the checks around it.
#include <doctest/doctest.h>

#include "worker/local_workers.hpp"
#include "node/metrics.hpp"
#include "messages/status.hpp"
#include "consumer/placement.hpp"
#include "consumer/status_client.hpp"
#include "cluster_fixture.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/support/free_port.hpp"

#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::test;

TEST_CASE("target_workers: the reference's three names, exactly") {
  CHECK(*parse_target_workers("AUTO") == TargetWorkers::automatic);
  CHECK(*parse_target_workers("ANY") == TargetWorkers::any);
  CHECK(*parse_target_workers("LOCAL") == TargetWorkers::local);
  auto bad = parse_target_workers("local");
  REQUIRE_FALSE(bad.ok());
  CHECK(
    bad.status().message() ==
    "Invalid `target_workers` argument: \"local\". Must be one of [\"AUTO\", \"ANY\", \"LOCAL\"].");
  for (auto t : {TargetWorkers::automatic, TargetWorkers::any, TargetWorkers::local})
    CHECK(*parse_target_workers(to_string(t)) == t);
}

TEST_CASE("worker tags: parsed from a comma list, checked, COLOCATED recognised") {
  auto tags = parse_worker_tags("COLOCATED,gpu-host.1");
  REQUIRE(tags.ok());
  CHECK(*tags == std::vector<std::string>{"COLOCATED", "gpu-host.1"});
  CHECK(is_colocated(*tags));
  CHECK_FALSE(is_colocated({"colocated"})); // exact, as the reference's tag
  CHECK(parse_worker_tags("")->empty());
  // As lenient as tf.data (issue 32): spaces and the empty tag are tags.
  CHECK(*parse_worker_tags("a,,b") == std::vector<std::string>{"a", "", "b"});
  CHECK(*parse_worker_tags("rack 7,gpu host") == std::vector<std::string>{"rack 7", "gpu host"});
  CHECK(parse_worker_tags("a\tb").status().message() ==
        "worker tag \"a\tb\" contains a control character (byte 9)");
  CHECK(parse_worker_tags("x,x").status().message() == "worker tag \"x\" is given twice");
  CHECK(validate_worker_tags(std::vector<std::string>(33, "t")).code() ==
        ErrorCode::invalid_argument);
  CHECK(validate_worker_tags({std::string(256, 'a')}).ok());
  CHECK_FALSE(validate_worker_tags({std::string(257, 'a')}).ok());
}

TEST_CASE("which tasks a consumer reads: the reference's ShouldReadFromTask") {
  const std::vector<std::string> none, colocated{"COLOCATED"}, other{"ssd"};
  using T = TargetWorkers;
  // ANY: everything.
  for (bool local : {false, true})
    for (const auto* tags : {&none, &colocated, &other})
      CHECK(should_read_from_task(T::any, false, local, *tags));
  // LOCAL: only this process's workers, whatever their tags.
  CHECK(should_read_from_task(T::local, false, true, none));
  CHECK(should_read_from_task(T::local, false, true, colocated));
  CHECK_FALSE(should_read_from_task(T::local, false, false, none));
  CHECK_FALSE(should_read_from_task(T::local, false, false, colocated));
  // AUTO: everything except another process's COLOCATED worker.
  CHECK(should_read_from_task(T::automatic, false, false, none));
  CHECK(should_read_from_task(T::automatic, false, false, other));
  CHECK(should_read_from_task(T::automatic, false, true, colocated));
  CHECK_FALSE(should_read_from_task(T::automatic, false, false, colocated));
  // Coordinated reads read every task.
  CHECK(should_read_from_task(T::automatic, true, false, colocated));
  // LOCAL and AUTO reads of a local worker take the in-process path; ANY is always the network.
  CHECK(reads_in_process(T::local, true));
  CHECK(reads_in_process(T::automatic, true));
  CHECK_FALSE(reads_in_process(T::local, false));
  CHECK_FALSE(reads_in_process(T::automatic, false));
  CHECK_FALSE(reads_in_process(T::any, true));
}

TEST_CASE(
  "LOCAL without a local worker, and LOCAL with coordinated reads: the reference's errors") {
  using T = TargetWorkers;
  CHECK(check_target_workers(T::any, false, ShardingPolicy::off, false).ok());
  CHECK(check_target_workers(T::automatic, false, ShardingPolicy::off, false).ok());
  CHECK(check_target_workers(T::local, true, ShardingPolicy::dynamic, false).ok());
  auto none = check_target_workers(T::local, false, ShardingPolicy::off, false);
  CHECK(none.code() == ErrorCode::invalid_argument);
  CHECK(none.message().find("Local reads require local tf.data workers, but no local worker is "
                            "found.") == 0);
  auto fixed = check_target_workers(T::local, false, ShardingPolicy::file_or_data, false);
  CHECK(fixed.message().find("Static sharding policy <FILE_OR_DATA> requires local tf.data "
                             "workers, but no local worker is found.") == 0);
  CHECK(check_target_workers(T::local, true, ShardingPolicy::off, true).message() ==
        "Coordinated reads require non-local workers, but `target_workers` is \"LOCAL\".");
}

namespace {

DistributeOptions local_off() {
  DistributeOptions o;
  o.policy = ShardingPolicy::off;
  o.target_workers = "LOCAL";
  return o;
}

// The test cluster keeps its workers off the in-process path (cluster_fixture.hpp); these
// tests are about that path.
WorkerConfig in_process_config() {
  auto wc = test_worker_config();
  wc.in_process_reads = true;
  return wc;
}

TestCluster in_process_cluster(int workers) {
  return TestCluster{workers, test_dispatcher_config(), in_process_config()};
}

} // namespace

TEST_CASE("WorkerServer lists itself as a local worker while it runs") {
  TestCluster cluster{0};
  CHECK(LocalWorkers::empty());
  auto& w = cluster.add_worker(in_process_config());
  CHECK(LocalWorkers::contains(w.worker_address()));
  w.stop();
  CHECK_FALSE(LocalWorkers::contains(w.worker_address()));
  CHECK(LocalWorkers::empty());
}

TEST_CASE("a forked child (a DataLoader worker) does not see its parent's local workers") {
  TestCluster cluster{0};
  auto& w = cluster.add_worker(in_process_config());
  REQUIRE(LocalWorkers::contains(w.worker_address()));
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) // the worker's threads did not come along: LOCAL must not look for it here
    _exit(LocalWorkers::empty() && !LocalWorkers::contains(w.worker_address()) ? 0 : 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(LocalWorkers::contains(w.worker_address())); // the parent's registry is unchanged
}

TEST_CASE(
  "LOCAL reads the in-process workers: small elements, and 1 MiB ones as in-process frames") {
  auto cluster = in_process_cluster(2);
  auto client = cluster.client();
  auto small = client.distribute(Dataset::range(20), local_off());
  REQUIRE_MESSAGE(small.ok(), small.status().to_string());
  auto got = sorted(ints(read_all(*small)));
  std::vector<int64_t> twice;
  for (int64_t i = 0; i < 20; ++i)
    twice.insert(twice.end(), {i, i});
  CHECK(got == twice);
  CHECK(small->stats().per_worker.size() == 2);

  auto parsed = parse_dataset("range(6).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  auto expected = parsed->collect();
  REQUIRE(expected.ok());
  const auto frames_before = LocalWorkers::frames_delivered();
  auto options = local_off();
  options.compression = "NONE";
  auto large = client.distribute(*parsed, options);
  REQUIRE(large.ok());
  auto elements = read_all(*large);
  REQUIRE(elements.size() == 12);
  auto key = [](const Element& e) { return e[0].strings()[0]; };
  std::sort(elements.begin(), elements.end(), [&](auto& a, auto& b) { return key(a) < key(b); });
  std::sort(expected->begin(), expected->end(), [&](auto& a, auto& b) { return key(a) < key(b); });
  for (std::size_t i = 0; i < elements.size(); ++i)
    CHECK(elements[i] == (*expected)[i / 2]);
  // The first elements of a task may go inline until its channel is open; the rest come as
  // in-process frames.
  CHECK(LocalWorkers::frames_delivered() > frames_before);

  // ANY reads the same workers over the network: no in-process frame.
  const auto frames_any = LocalWorkers::frames_delivered();
  auto any = local_off();
  any.target_workers = "ANY";
  any.compression = "NONE";
  auto over_tcp = client.distribute(*parsed, any);
  REQUIRE(over_tcp.ok());
  CHECK(read_all(*over_tcp).size() == 12);
  CHECK(LocalWorkers::frames_delivered() == frames_any);
}

namespace {

// The value a string of bytes(size=...) was seeded with, from its first 8 bytes (values < 4096).
int64_t bytes_seed(const std::string& payload) {
  static const std::map<std::string, int64_t> seeds = [] {
    std::map<std::string, int64_t> m;
    auto table = parse_dataset("range(4096).map(bytes(size=8))")->collect();
    REQUIRE(table.ok());
    for (std::size_t v = 0; v < table->size(); ++v)
      m[(*table)[v][0].strings()[0]] = static_cast<int64_t>(v);
    return m;
  }();
  auto it = seeds.find(payload.substr(0, 8));
  return it == seeds.end() ? -1 : it->second;
}

// An in-process worker that advertises a loopback port nothing listens on: only a reader that
// takes the in-process path can read it at all.
WorkerConfig unreachable_over_tcp() {
  auto wc = in_process_config();
  const uint16_t port = conveyor::testing::free_loopback_port();
  REQUIRE(port != 0);
  wc.advertised_address = "127.0.0.1:" + std::to_string(port);
  return wc;
}

} // namespace

TEST_CASE("AUTO reads a worker of this process in-process - 1 MiB elements as in-process frames") {
  TestCluster cluster{0};
  cluster.add_worker(unreachable_over_tcp());
  // Large elements go inline until the consumer's in-process bulk channel is open (it opens
  // after the first reply): with a small credit the first requests cannot take all of them, so
  // later ones must come as frames (with 6 elements and the default credit, all went inline in
  // 2 of ~30 runs).
  auto parsed = parse_dataset("range(24).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  const auto frames_before = LocalWorkers::frames_delivered();
  DistributeOptions o; // target_workers AUTO, the default
  o.compression = "NONE";
  o.max_outstanding_requests = 2;
  auto client = cluster.client();
  auto stream = client.distribute(*parsed, o);
  REQUIRE(stream.ok());
  std::vector<int64_t> seeds;
  for (const auto& e : read_all(*stream))
    seeds.push_back(bytes_seed(e[0].strings()[0]));
  std::vector<int64_t> expected(24);
  for (int64_t i = 0; i < 24; ++i)
    expected[static_cast<std::size_t>(i)] = i;
  CHECK(sorted(seeds) == expected);
  CHECK(LocalWorkers::frames_delivered() > frames_before);
}

TEST_CASE(
  "AUTO reads a worker of this process in-process - coordinated rounds stay aligned there") {
  TestCluster cluster{0};
  cluster.add_worker(unreachable_over_tcp());
  cluster.add_worker(unreachable_over_tcp());
  // Element x of range expands to the group [2x, 2x+1]; each becomes 1 MiB seeded by its value.
  auto parsed =
    parse_dataset("range(1000000).flat_map(group_fn(n=2)).repeat().map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  constexpr int kRounds = 24;
  std::vector<std::vector<int64_t>> seen(2);
  std::vector<Status> results(2);
  std::vector<Client> clients;
  for (int i = 0; i < 2; ++i)
    clients.push_back(cluster.client());
  std::vector<DistributeOptions> options(2); // target_workers AUTO, the default
  for (int i = 0; i < 2; ++i) {
    options[static_cast<std::size_t>(i)].job_name = "auto-in-process-coordinated";
    options[static_cast<std::size_t>(i)].num_consumers = 2;
    options[static_cast<std::size_t>(i)].consumer_index = i;
    options[static_cast<std::size_t>(i)].compression = "NONE";
  }
  std::vector<std::thread> consumers;
  for (int i = 0; i < 2; ++i)
    consumers.emplace_back([&, i] {
      const auto at = static_cast<std::size_t>(i);
      auto stream = clients[at].distribute(*parsed, options[at]);
      if (!stream.ok()) {
        results[static_cast<std::size_t>(i)] = stream.status();
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        Element e;
        bool end = false;
        Status st = stream->next(e, end, std::chrono::seconds(30));
        if (!st.ok() || end) {
          results[static_cast<std::size_t>(i)] = st.ok() ? internal_error("early end") : st;
          return;
        }
        seen[static_cast<std::size_t>(i)].push_back(bytes_seed(e[0].strings()[0]));
      }
    });
  for (auto& t : consumers)
    t.join();
  for (const auto& st : results)
    REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (int r = 0; r < kRounds; ++r) { // round r: one group, split across the two consumers
    const auto a = seen[0][static_cast<std::size_t>(r)], b = seen[1][static_cast<std::size_t>(r)];
    CHECK_MESSAGE((a >= 0 && a % 2 == 0 && b == a + 1), "round " << r << ": " << a << ", " << b);
  }
}

TEST_CASE(
  "AUTO reads this process's worker in-process and another over TCP - each client shuts down") {
  // The consumer then gets messages from two actor systems. CAF 0.17 resumes an actor on the
  // sender's scheduler: before ConsumerActor::enqueue kept it on its own, the consumer sometimes
  // ran on the local worker's threads, spawned there, and pinned its own system: ~Client never
  // returned (consumer_actor.cpp). Several client lifetimes, each under a watchdog.
  TestCluster cluster{1};                     // a worker reached over TCP only
  cluster.add_worker(unreachable_over_tcp()); // a worker reached in-process only
  auto parsed = parse_dataset("range(4).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  for (int round = 0; round < 12; ++round) {
    std::optional<Client> client{cluster.client()};
    DistributeOptions o; // AUTO
    o.compression = "NONE";
    {
      auto stream = client->distribute(*parsed, o);
      REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
      // OFF: range(4) from each worker; the local one is out of reach but in-process.
      CHECK(read_all(*stream).size() == 8);
    }
    std::atomic<bool> closed{false};
    std::thread watchdog([&closed, round] {
      for (int i = 0; i < 600 && !closed; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!closed) { // a hung destructor cannot be failed gracefully: say so and stop
        std::fprintf(stderr, "client %d did not shut down within 60 s\n", round);
        std::abort();
      }
    });
    client.reset();
    closed = true;
    watchdog.join();
  }
}

TEST_CASE(
  "a worker with in_process_reads = false is no local worker - AUTO reads it over the network") {
  TestCluster cluster{1}; // test_worker_config(): in_process_reads = false
  CHECK(LocalWorkers::empty());
  auto parsed = parse_dataset("range(4).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  const auto frames_before = LocalWorkers::frames_delivered();
  DistributeOptions o;
  o.compression = "NONE";
  auto client = cluster.client();
  auto stream = client.distribute(*parsed, o);
  REQUIRE(stream.ok());
  CHECK(read_all(*stream).size() == 4);
  CHECK(LocalWorkers::frames_delivered() == frames_before);
  // LOCAL finds no worker of its own.
  auto local = client.distribute(*parsed, local_off());
  Status status = local.ok() ? Status::OK() : local.status();
  if (local.ok()) {
    Element e;
    bool end = false;
    status = local->next(e, end, std::chrono::seconds(10));
  }
  CHECK(status.code() == ErrorCode::invalid_argument);
}

TEST_CASE("LOCAL with no worker in this process fails with the reference's error") {
  TestCluster cluster{0};
  REQUIRE(LocalWorkers::empty());
  auto client = cluster.client();
  auto stream = client.distribute(Dataset::range(3), local_off());
  Status status = stream.ok() ? Status::OK() : stream.status();
  if (stream.ok()) {
    Element e;
    bool end = false;
    status = stream->next(e, end, std::chrono::seconds(10));
  }
  CHECK(status.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(status.message().find("Local reads require local tf.data workers") !=
                  std::string::npos,
                status.to_string());
}

TEST_CASE("consumers of a named job must agree on target_workers") {
  auto cluster = in_process_cluster(1);
  auto client = cluster.client();
  DistributeOptions a;
  a.job_name = "placement-agree";
  a.target_workers = "AUTO";
  auto first = client.distribute(Dataset::range(1000000), a);
  REQUIRE(first.ok());
  Element e;
  bool end = false;
  REQUIRE(first->next(e, end, std::chrono::seconds(10)).ok()); // the job runs
  auto b = a;
  b.target_workers = "LOCAL";
  auto second = client.distribute(Dataset::range(1000000), b);
  Status status = second.ok() ? second->next(e, end, std::chrono::seconds(10)) : second.status();
  CHECK(status.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(status.message().find("runs with target_workers AUTO; a consumer asked for "
                                      "target_workers LOCAL") != std::string::npos,
                status.to_string());
}

TEST_CASE("worker tags reach the dispatcher's status - bad tags are refused at start") {
  auto wc = test_worker_config();
  wc.worker_tags = {"COLOCATED", "zone-a"};
  TestCluster cluster{1, test_dispatcher_config(), wc};
  cluster.add_worker(); // untagged
  auto status = fetch_status(cluster.target(), std::chrono::seconds(5));
  REQUIRE_MESSAGE(status.ok(), status.status().to_string());
  REQUIRE(status->workers.size() == 2);
  std::vector<std::vector<std::string>> tags;
  for (const auto& w : status->workers)
    tags.push_back(w.tags);
  std::sort(tags.begin(), tags.end());
  CHECK(tags == std::vector<std::vector<std::string>>{{}, {"COLOCATED", "zone-a"}});

  auto bad = test_worker_config();
  bad.dispatcher_address = cluster.target();
  bad.worker_tags = {"no\ncontrol characters"};
  WorkerServer w{bad};
  auto st = w.start();
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("`worker_tags`") != std::string::npos);
}

TEST_CASE(
  "LOCAL with DYNAMIC: every element once, small and 1 MiB (acks over the in-process path)") {
  auto cluster = in_process_cluster(2);
  auto client = cluster.client();
  auto options = local_off();
  options.policy = ShardingPolicy::dynamic;
  auto small = client.distribute(Dataset::range(500), options);
  REQUIRE(small.ok());
  std::vector<int64_t> all(500);
  for (int64_t i = 0; i < 500; ++i)
    all[static_cast<std::size_t>(i)] = i;
  CHECK(sorted(ints(read_all(*small))) == all);

  auto parsed = parse_dataset("range(8).map(bytes(size=1048576))");
  REQUIRE(parsed.ok());
  options.compression = "NONE";
  auto large = client.distribute(*parsed, options);
  REQUIRE(large.ok());
  auto got = read_all(*large);
  CHECK(got.size() == 8);
  std::set<std::string> distinct;
  for (const auto& e : got)
    distinct.insert(e[0].strings()[0]);
  CHECK(distinct.size() == 8);
}

TEST_CASE("metrics: the dispatcher's samples carry each worker's tags") {
  msg::cluster_status st;
  msg::worker_status w;
  w.address = "10.0.0.1:6000";
  w.tags = {"COLOCATED", "zone-a"};
  st.workers.push_back(w);
  bool found = false;
  for (const auto& s : metrics::status_samples(st))
    if (s.name == "conveyor_worker_info") {
      found = true;
      CHECK(s.labels.at("worker") == "10.0.0.1:6000");
      CHECK(s.labels.at("tags") == "COLOCATED,zone-a");
      CHECK(s.value == 1);
    }
  CHECK(found);
}

TEST_CASE("LOCAL with DYNAMIC beside remote workers: only the read worker takes splits, no hang") {
  // Issue 32: one in-process worker and three remote ones; a LOCAL DYNAMIC read waited for end
  // of sequence, first because the remote workers' tasks took splits that no LOCAL reader reads
  // (the job now hands splits only to tasks a consumer says it reads), then because those
  // tasks, with no split in the epoch, waited for the next one, which the job held for a reader
  // for good: the job never ended (JobCore::get_splits now asks the provider whether the epoch
  // has a split left).
  TestCluster cluster{3};                  // workers this process reads over TCP only
  cluster.add_worker(in_process_config()); // the one LOCAL reads
  auto client = cluster.client();
  auto options = local_off();
  options.policy = ShardingPolicy::dynamic;
  for (int round = 0; round < 3; ++round) { // splits of several sizes, fresh jobs
    CAPTURE(round);
    const int64_t n = 300 + 700 * round;
    auto stream = client.distribute(Dataset::range(n), options);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    std::vector<int64_t> all(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      all[static_cast<std::size_t>(i)] = i;
    CHECK(sorted(ints(read_all(*stream, 1000000, std::chrono::seconds(10)))) == all);
    CHECK(stream->stats().per_worker.size() == 1);
  }
}
