// LocalPipeline: ops in the trainer's process over a pull function and over an ElementStream
// read from an in-process cluster.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "cluster_fixture.hpp"
#include "conveyor/local_pipeline.hpp"

namespace conveyor {
namespace {

// A source of the ints [0, n), counting how many were pulled.
LocalPipeline::Pull counting(int64_t n, int64_t* pulled) {
  return [n, pulled, i = int64_t{0}](Element& out, bool& end) mutable {
    end = i >= n;
    if (!end) {
      out = Element{Tensor::scalar(i++)};
      ++*pulled;
    }
    return Status::OK();
  };
}

std::vector<std::vector<int64_t>> drain(LocalPipeline& p, Status* final_status = nullptr) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < 10000; ++i) { // bounded: every test reads far fewer
    Element e;
    bool end = false;
    Status st = p.next(e, end);
    if (!st.ok() || end) {
      if (final_status != nullptr)
        *final_status = st;
      else
        REQUIRE_MESSAGE(st.ok(), st.to_string());
      return out;
    }
    std::vector<int64_t> row;
    for (int64_t k = 0; k < e[0].num_elements(); ++k)
      row.push_back(e[0].rank() == 0 ? e[0].as_int64() : e[0].at<int64_t>(k));
    out.push_back(row);
  }
  FAIL("the pipeline did not end");
  return out;
}

TEST_CASE("LocalPipeline: map, filter, batch and prefetch run C++ callables over a pull source") {
  int64_t pulled = 0;
  auto p = LocalPipeline(counting(10, &pulled))
             .map([](const Element& e) -> Expected<Element> {
               return Element{Tensor::scalar(e[0].as_int64() * 10)};
             })
             .filter([](const Element& e) -> Expected<bool> { return e[0].as_int64() != 30; })
             .batch(4)
             .prefetch(2);
  CHECK(p.to_text() == "source(local_source).map(local_fn_1).filter(local_predicate_2).batch(4)."
                       "prefetch(buffer_size=2)");
  CHECK(drain(p) == std::vector<std::vector<int64_t>>{{0, 10, 20, 40}, {50, 60, 70, 80}, {90}});
  CHECK(pulled == 10);
}

TEST_CASE("LocalPipeline: take stops pulling, skip and unbatch, parallel map keeps the order") {
  int64_t pulled = 0;
  auto taken = LocalPipeline(counting(1000000, &pulled)).take(3);
  CHECK(drain(taken) == std::vector<std::vector<int64_t>>{{0}, {1}, {2}});
  CHECK(pulled == 3);
  auto rows = LocalPipeline(counting(7, &pulled)).batch(3).unbatch().skip(2);
  CHECK(drain(rows) == std::vector<std::vector<int64_t>>{{2}, {3}, {4}, {5}, {6}});
  auto parallel = LocalPipeline(counting(50, &pulled))
                    .map([](const Element& e) -> Expected<Element> { return e; }, 4)
                    .batch(50);
  std::vector<int64_t> all(50);
  for (int64_t i = 0; i < 50; ++i)
    all[static_cast<std::size_t>(i)] = i;
  CHECK(drain(parallel) == std::vector<std::vector<int64_t>>{all});
}

TEST_CASE("LocalPipeline: a seeded shuffle is a reproducible permutation") {
  int64_t pulled = 0;
  auto a = LocalPipeline(counting(30, &pulled)).shuffle(8, 42).batch(30);
  auto b = LocalPipeline(counting(30, &pulled)).shuffle(8, 42).batch(30);
  auto first = drain(a), second = drain(b);
  REQUIRE(first.size() == 1);
  CHECK(first == second);
  auto sorted = first[0];
  std::sort(sorted.begin(), sorted.end());
  auto in_order = LocalPipeline(counting(30, &pulled)).batch(30);
  CHECK(sorted == drain(in_order)[0]);
  CHECK(first[0] != sorted);
}

TEST_CASE("LocalPipeline: errors from the callable, the source and the arguments") {
  int64_t pulled = 0;
  auto failing =
    LocalPipeline(counting(10, &pulled)).map([](const Element& e) -> Expected<Element> {
      if (e[0].as_int64() == 5)
        return invalid_argument("element five");
      return e;
    });
  Status st;
  CHECK(drain(failing, &st).size() == 5);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("element five") != std::string::npos);

  auto bad_source = LocalPipeline([](Element&, bool&) { return data_loss("the stream broke"); });
  CHECK(drain(bad_source, &st).empty());
  CHECK(st.message() == "the stream broke");

  auto zero = LocalPipeline(counting(3, &pulled)).batch(0);
  CHECK(drain(zero, &st).empty());
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("batch_size") != std::string::npos);

  // Two pipelines over one source: the second to start is refused, not handed half the elements.
  LocalPipeline base(counting(4, &pulled));
  auto one = base.batch(2);
  auto two = base.take(1);
  CHECK(drain(one).size() == 2);
  CHECK(drain(two, &st).empty());
  CHECK(st.code() == ErrorCode::failed_precondition);
}

TEST_CASE("LocalPipeline: over an ElementStream from the service") {
  test::TestCluster cluster{1};
  Client client = cluster.client();
  DistributeOptions opts;
  opts.policy = ShardingPolicy::off; // one worker: the dataset's order
  auto stream = client.distribute(Dataset::range(10), opts);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  auto p = LocalPipeline::over(*stream, std::chrono::seconds(20))
             .map([](const Element& e) -> Expected<Element> {
               return Element{Tensor::scalar(e[0].as_int64() + 100)};
             })
             .batch(4)
             .prefetch(1);
  CHECK(drain(p) ==
        std::vector<std::vector<int64_t>>{{100, 101, 102, 103}, {104, 105, 106, 107}, {108, 109}});
}

} // namespace
} // namespace conveyor
