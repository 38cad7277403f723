// In-process clusters over 127.0.0.1: the reference's examples (000_0e6e112c7a85afc7.txt)
// with their exact outputs, job sharing, epochs, empty datasets, a large element, a worker
// joining mid-job.
#include <doctest/doctest.h>

#include <thread>

#include "cluster_fixture.hpp"
#include "pipeline/graph/text_form.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

DistributeOptions mode(ShardingPolicy policy) {
  DistributeOptions o;
  o.policy = policy;
  return o;
}

Dataset parse(const char* text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return *d;
}

std::vector<int64_t> range_times(int64_t n, int times) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    for (int t = 0; t < times; ++t)
      v.push_back(i);
  return v;
}

// An OFF read of range(kLossElements) on two workers, the second stopped after 100 elements: what
// the read ended with, how many elements it gave, and the lost tasks it counted.
constexpr int64_t kLossElements = 5000;
struct LossRead {
  Status status;
  int64_t elements = 0;
  int64_t lost_tasks = 0;
};
LossRead read_off_losing_worker(std::optional<std::string> on_worker_loss) {
  WorkerConfig small = test_worker_config();
  small.task_buffer_elements = 128;
  TestCluster cluster{2, test_dispatcher_config(), small};
  auto client = cluster.client();
  auto options = mode(ShardingPolicy::off);
  options.on_worker_loss = std::move(on_worker_loss);
  options.max_outstanding_requests = 32;
  auto stream = client.distribute(Dataset::range(kLossElements), options);
  REQUIRE(stream.ok());
  LossRead r;
  for (int i = 0; i < 100; ++i) {
    Element e;
    bool end = false;
    REQUIRE(stream->next(e, end, std::chrono::seconds(10)).ok());
    REQUIRE_FALSE(end);
    ++r.elements;
  }
  cluster.stop_worker(1); // OFF: the rest of its copy cannot be read elsewhere
  for (const Element& x : *stream) {
    (void)x;
    ++r.elements;
  }
  r.status = stream->status();
  r.lost_tasks = stream->stats().lost_tasks;
  return r;
}

} // namespace

TEST_CASE("parallel_epochs (OFF) on two workers produces every element twice") {
  TestCluster cluster{2};
  auto client = cluster.client();
  auto stream = client.distribute(Dataset::range(5), mode(ShardingPolicy::off));
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  CHECK(sorted(ints(read_all(*stream))) == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(stream->stats().per_worker.size() == 2);

  // The reference's example: the map before distribute runs on the workers, +1 after it runs
  // locally: [1, 1, 2, 2, 5, 5, 10, 10, 17, 17].
  auto squares = client.distribute(Dataset::range(5).map("square"), mode(ShardingPolicy::off));
  REQUIRE(squares.ok());
  std::vector<int64_t> plus_one;
  for (const Element& e : *squares)
    plus_one.push_back(e[0].as_int64() + 1);
  CHECK(squares->status().ok());
  CHECK(sorted(plus_one) == std::vector<int64_t>{1, 1, 2, 2, 5, 5, 10, 10, 17, 17});
}

TEST_CASE("distributed_epoch (DYNAMIC) on two workers produces every element once") {
  TestCluster cluster{2};
  auto client = cluster.client();
  auto five = client.distribute(Dataset::range(5), mode(ShardingPolicy::dynamic));
  REQUIRE_MESSAGE(five.ok(), five.status().to_string());
  CHECK(sorted(ints(read_all(*five))) == std::vector<int64_t>{0, 1, 2, 3, 4});
  auto ten = client.distribute(Dataset::range(10), mode(ShardingPolicy::dynamic));
  REQUIRE(ten.ok());
  CHECK(sorted(ints(read_all(*ten))) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("two consumers sharing a named DYNAMIC job together get each element once") {
  auto dc = test_dispatcher_config();
  dc.range_split_size = 8; // many splits, so that both workers get some
  TestCluster cluster{2, dc};
  auto client = cluster.client();
  auto options = mode(ShardingPolicy::dynamic);
  options.job_name = "shared";
  options.max_outstanding_requests = 16;
  auto a = client.distribute(Dataset::range(400), options);
  auto b = client.distribute(Dataset::range(400), options);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->job_id() == b->job_id());
  std::vector<Element> from_b;
  std::thread reader{[&] { from_b = read_all(*b); }};
  auto from_a = read_all(*a);
  reader.join();
  auto all = ints(from_a);
  for (auto v : ints(from_b))
    all.push_back(v);
  CHECK(sorted(all) == range_times(400, 1));
}

TEST_CASE("a named OFF job with one worker is split between its consumers") {
  TestCluster cluster{1};
  auto client = cluster.client();
  auto options = mode(ShardingPolicy::off);
  options.job_name = "my_job_name";
  // Slow enough (~0.5 s) that both consumers join before the job can end: a consumer that
  // asks for a finished iteration of a named job reads end of sequence.
  const auto slow =
    Dataset::range(5).map(conveyor::FunctionRef{"sleep_us", {{"us", int64_t{100000}}}});
  auto a = client.distribute(slow, options);
  auto b = client.distribute(slow, options);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<Element> from_b;
  std::thread reader{[&] { from_b = read_all(*b); }};
  auto all = ints(read_all(*a));
  reader.join();
  for (auto v : ints(from_b))
    all.push_back(v);
  CHECK(sorted(all) == std::vector<int64_t>{0, 1, 2, 3, 4});
  // The job ended with its consumers: a late consumer of the same iteration reads end of
  // sequence (tf.data), one reading the name again (iteration 1) reads it all again.
  auto late = client.distribute(slow, options);
  REQUIRE(late.ok());
  CHECK(read_all(*late).empty());
  CHECK(late->job_id() == a->job_id());
  auto again = options;
  again.iteration = 1;
  auto second = client.distribute(slow, again);
  REQUIRE(second.ok());
  CHECK(sorted(ints(read_all(*second))) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(second->job_id() != a->job_id());
}

TEST_CASE(
  "expected_consumers: a consumer that joins after the others read everything gets end of input") {
  // DataLoader's loader processes as consumers: one may start only after another read the whole
  // epoch. Without expected_consumers it would start the name's next repetition and the trainer
  // would see every element twice.
  TestCluster cluster{2};
  auto client = cluster.client();
  for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    CAPTURE(to_string(policy));
    auto options = mode(policy);
    options.job_name = std::string{"loader-"} + to_string(policy);
    options.expected_consumers = 2;
    const auto copies = policy == ShardingPolicy::off ? 2 : 1;
    for (int epoch = 0; epoch < 2; ++epoch) {
      CAPTURE(epoch);
      options.iteration = epoch;
      auto first = client.distribute(Dataset::range(50), options);
      REQUIRE_MESSAGE(first.ok(), first.status().to_string());
      CHECK(sorted(ints(read_all(*first))) == range_times(50, copies));
      auto late = client.distribute(Dataset::range(50), options);
      REQUIRE_MESSAGE(late.ok(), late.status().to_string());
      CHECK(late->job_id() == first->job_id()); // the same repetition: ...
      CHECK(read_all(*late).empty());           // ... already read by the first consumer
    }
    // Consumers of the name must agree on it.
    auto other = options;
    other.expected_consumers = 3;
    auto a = client.distribute(Dataset::range(50), options);
    REQUIRE(a.ok());
    auto b = client.distribute(Dataset::range(50), other);
    REQUIRE_FALSE(b.ok());
    CHECK_MESSAGE(b.status().message().find("expected_consumers") != std::string::npos,
                  b.status().to_string());
    (void)read_all(*a);
  }
  DistributeOptions unnamed;
  unnamed.expected_consumers = 2;
  auto refused = client.distribute(Dataset::range(5), unnamed);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(refused.status().message().find("`job_name` must be set") != std::string::npos,
                refused.status().to_string());
}

TEST_CASE("repeat: every epoch is produced, once per epoch in DYNAMIC") {
  TestCluster cluster{2};
  auto client = cluster.client();
  auto dynamic = client.distribute(Dataset::range(5).repeat(3), mode(ShardingPolicy::dynamic));
  REQUIRE(dynamic.ok());
  CHECK(sorted(ints(read_all(*dynamic))) == range_times(5, 3));
  auto off = client.distribute(Dataset::range(3).repeat(2), mode(ShardingPolicy::off));
  REQUIRE(off.ok());
  CHECK(sorted(ints(read_all(*off))) == range_times(3, 4));
}

TEST_CASE("an empty dataset ends at once in both modes") {
  TestCluster cluster{2};
  auto client = cluster.client();
  for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    auto stream = client.distribute(Dataset::range(0), mode(policy));
    REQUIRE(stream.ok());
    Element e;
    bool end = false;
    auto st = stream->next(e, end, std::chrono::seconds(10));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(end);
    // It stays ended.
    CHECK(stream->next(e, end).ok());
    CHECK(end);
  }
}

TEST_CASE("an 8 MiB element crosses the network in chunks and arrives intact") {
  TestCluster cluster{1};
  auto client = cluster.client();
  auto dataset = parse("range(2).map(bytes(size=8388608))");
  auto expected = dataset.collect();
  REQUIRE(expected.ok());
  auto options = mode(ShardingPolicy::off);
  options.compression = "NONE"; // keep all 8 MiB on the wire
  auto stream = client.distribute(dataset, options);
  REQUIRE(stream.ok());
  auto got = read_all(*stream);
  REQUIRE(got.size() == 2);
  auto key = [](const Element& e) { return e[0].strings()[0]; };
  std::sort(got.begin(), got.end(), [&](auto& x, auto& y) { return key(x) < key(y); });
  std::sort(expected->begin(), expected->end(), [&](auto& x, auto& y) { return key(x) < key(y); });
  CHECK(got[0] == (*expected)[0]);
  CHECK(got[1] == (*expected)[1]);
  CHECK(got[0][0].strings()[0].size() == 8388608u);
  auto stats = stream->stats();
  CHECK(stats.bytes > 2 * 8388608);
  CHECK(stats.messages >= 4); // at least two chunks per element
}

TEST_CASE("a worker started mid-job gets a task for the running job (OFF: it starts over)") {
  WorkerConfig small = test_worker_config();
  small.task_buffer_elements = 256;
  TestCluster cluster{1, test_dispatcher_config(), small};
  auto client = cluster.client();
  auto options = mode(ShardingPolicy::off);
  options.max_outstanding_requests = 64;
  constexpr int64_t n = 20000;
  auto stream = client.distribute(Dataset::range(n), options);
  REQUIRE(stream.ok());
  // Worker 1's task is held back by its bounded buffer and our credits.
  Element e;
  bool end = false;
  REQUIRE(stream->next(e, end, std::chrono::seconds(10)).ok());
  REQUIRE_FALSE(end);
  std::vector<int64_t> got{e[0].as_int64()};
  cluster.add_worker(small);
  for (const Element& x : *stream)
    got.push_back(x[0].as_int64());
  REQUIRE_MESSAGE(stream->status().ok(), stream->status().to_string());
  CHECK(got.size() == static_cast<std::size_t>(2 * n));
  CHECK(sorted(got) == range_times(n, 2));
  CHECK(stream->stats().per_worker.size() == 2);
}

TEST_CASE("OFF, on_worker_loss fail: a worker that leaves mid-job fails the read loudly (never "
          "short and OK)") {
  auto r = read_off_losing_worker(/*on_worker_loss=*/"fail");
  // Never "OK" with the copy short: the read fails naming the worker, or it was complete.
  if (r.status.ok())
    CHECK(r.elements == 2 * kLossElements);
  else
    CHECK_MESSAGE(r.status.message().find("worker") != std::string::npos, r.status.to_string());
}

TEST_CASE("OFF, on_worker_loss continue (the default): a worker that leaves mid-job - the read "
          "ends OK, the loss counted") {
  auto r = read_off_losing_worker(std::nullopt); // the default: continue
  REQUIRE_MESSAGE(r.status.ok(), r.status.to_string());
  CHECK(r.elements >= kLossElements); // the survivor's whole copy
  if (r.elements < 2 * kLossElements) // short: counted, never silent
    CHECK(r.lost_tasks == 1);
  else
    CHECK(r.lost_tasks == 0);
}

TEST_CASE(
  "a named job's iteration that ended still refuses a consumer asking another processing mode") {
  // Issue 32: an OFF consumer of a DYNAMIC job's name was accepted once the DYNAMIC job had
  // ended (it was erased, and the OFF consumer started the name's next repetition).
  TestCluster cluster{1};
  auto client = cluster.client();
  auto dynamic = mode(ShardingPolicy::dynamic);
  dynamic.job_name = "mode-check";
  auto first = client.distribute(Dataset::range(20), dynamic);
  REQUIRE(first.ok());
  CHECK(read_all(*first).size() == 20);
  auto off = mode(ShardingPolicy::off);
  off.job_name = "mode-check";
  auto refused = client.distribute(Dataset::range(20), off);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(refused.status().message().find("runs with processing_mode DYNAMIC; a consumer "
                                                "asked for processing_mode OFF") !=
                  std::string::npos,
                refused.status().to_string());
}
