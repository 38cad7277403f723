// LocalPipeline checkpoints (issue 36): the source's read cursor plus what the ops hold between
// two next() calls. A pipeline stopped after k elements and restored from its checkpoint over a
// source resumed at the cursor continues with exactly the elements an uninterrupted run gives.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "cluster_fixture.hpp"
#include "conveyor/local_pipeline.hpp"

namespace conveyor {
namespace {

// The ints [from, n), with the cursor "how many ints were pulled" (a resumable source).
LocalPipeline counting_from(int64_t from, int64_t n) {
  auto next = std::make_shared<int64_t>(from);
  return LocalPipeline(
    [n, next](Element& out, bool& end) {
      end = *next >= n;
      if (!end)
        out = Element{Tensor::scalar((*next)++)};
      return Status::OK();
    },
    [next]() -> Expected<std::string> { return std::to_string(*next); });
}

std::vector<int64_t> values(const Element& e) {
  std::vector<int64_t> row;
  for (int64_t k = 0; k < e[0].num_elements(); ++k)
    row.push_back(e[0].rank() == 0 ? e[0].as_int64() : e[0].at<int64_t>(k));
  return row;
}

// Reads up to `limit` elements (all when -1); bounded by 10000.
std::vector<std::vector<int64_t>> read(LocalPipeline& p, int64_t limit = -1) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < 10000 && (limit < 0 || static_cast<int64_t>(out.size()) < limit); ++i) {
    Element e;
    bool end = false;
    Status st = p.next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(values(e));
  }
  REQUIRE(limit >= 0);
  return out;
}

using Ops = std::function<LocalPipeline(const LocalPipeline&)>;

Expected<Element> times_ten(const Element& e) {
  return Element{Tensor::scalar(e[0].as_int64() * 10)};
}

const std::vector<std::pair<const char*, Ops>>& pipelines() {
  static const std::vector<std::pair<const char*, Ops>> all = {
    {"map, filter, seeded shuffle, batch, prefetch",
     [](const LocalPipeline& p) {
       return p.map(times_ten)
         .filter([](const Element& e) -> Expected<bool> { return e[0].as_int64() % 30 != 0; })
         .shuffle(5, 7)
         .batch(4)
         .prefetch(2);
     }},
    {"batch, prefetch, unbatch, parallel map, take",
     [](const LocalPipeline& p) {
       return p.batch(3).prefetch(3).unbatch().map(times_ten, 4).take(17);
     }},
    {"skip, seeded shuffle, two prefetches",
     [](const LocalPipeline& p) { return p.skip(5).shuffle(8, 1).prefetch(4).prefetch(1); }},
  };
  return all;
}

TEST_CASE("LocalPipeline checkpoint: a restored pipeline continues the uninterrupted sequence") {
  constexpr int64_t kN = 40;
  for (const auto& [name, ops] : pipelines()) {
    auto whole = ops(counting_from(0, kN));
    const auto expected = read(whole);
    REQUIRE(expected.size() > 3);
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, static_cast<int64_t>(expected.size()) - 1,
                      static_cast<int64_t>(expected.size())}) {
      CAPTURE(name);
      CAPTURE(k);
      auto first = ops(counting_from(0, kN));
      auto got = read(first, k);
      auto blob = first.checkpoint();
      REQUIRE_MESSAGE(blob.ok(), blob.status().to_string());
      auto cursor = LocalPipeline::read_cursor_of(*blob);
      REQUIRE(cursor.ok());
      auto second = ops(counting_from(std::stoll(*cursor), kN));
      Status st = second.restore(*blob);
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      auto rest = read(second);
      got.insert(got.end(), rest.begin(), rest.end());
      CHECK(got == expected);
    }
  }
}

TEST_CASE("LocalPipeline checkpoint: a finished take still saves the read cursor") {
  // take() releases its input at its end: the cursor comes from the source itself then.
  auto first = counting_from(0, 100).prefetch(3).take(5).batch(2);
  CHECK(read(first).size() == 3);
  auto blob = first.checkpoint();
  REQUIRE_MESSAGE(blob.ok(), blob.status().to_string());
  auto cursor = LocalPipeline::read_cursor_of(*blob);
  REQUIRE(cursor.ok());
  CHECK(std::stoll(*cursor) >= 5);
  auto second = counting_from(std::stoll(*cursor), 100).prefetch(3).take(5).batch(2);
  Status st = second.restore(*blob);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(read(second).empty());
}

TEST_CASE("LocalPipeline checkpoint: an unseeded shuffle goes on with its own generator") {
  constexpr int64_t kN = 60;
  for (int64_t k : {2, 25}) {
    auto first = counting_from(0, kN).shuffle(10).prefetch(2);
    auto got = read(first, k);
    auto blob = first.checkpoint();
    REQUIRE(blob.ok());
    auto second =
      counting_from(std::stoll(*LocalPipeline::read_cursor_of(*blob)), kN).shuffle(10).prefetch(2);
    REQUIRE(second.restore(*blob).ok());
    auto rest = read(second);
    got.insert(got.end(), rest.begin(), rest.end());
    std::vector<int64_t> flat;
    for (const auto& row : got)
      flat.push_back(row.at(0));
    std::sort(flat.begin(), flat.end());
    std::vector<int64_t> epoch(kN);
    for (int64_t i = 0; i < kN; ++i)
      epoch[static_cast<std::size_t>(i)] = i;
    CHECK(flat == epoch); // every element once
  }
}

// A source that counts an element before it has handed it over, as a network read does: a
// checkpoint taken while a prefetch fill is inside it would count an element no op holds.
LocalPipeline slow_counting_from(int64_t from, int64_t n) {
  auto next = std::make_shared<std::atomic<int64_t>>(from);
  return LocalPipeline(
    [n, next](Element& out, bool& end) {
      end = *next >= n;
      if (!end) {
        const int64_t value = (*next)++;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        out = Element{Tensor::scalar(value)};
      }
      return Status::OK();
    },
    [next]() -> Expected<std::string> { return std::to_string(next->load()); });
}

TEST_CASE("LocalPipeline checkpoint: prefetch fills pause while the state is taken") {
  constexpr int64_t kN = 12;
  std::vector<std::vector<int64_t>> epoch;
  for (int64_t i = 0; i < kN; ++i)
    epoch.push_back({i});
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto first = slow_counting_from(0, kN).prefetch(4);
    auto got = read(first, 1 + attempt % 3); // a fill is pulling now
    auto blob = first.checkpoint();
    REQUIRE(blob.ok());
    auto second =
      slow_counting_from(std::stoll(*LocalPipeline::read_cursor_of(*blob)), kN).prefetch(4);
    REQUIRE(second.restore(*blob).ok());
    auto rest = read(second);
    got.insert(got.end(), rest.begin(), rest.end());
    CHECK(got == epoch);
  }
}

TEST_CASE("LocalPipeline checkpoint: refused and failed restores say why") {
  auto p = counting_from(0, 10).map(times_ten).batch(2);
  read(p, 1);
  auto blob = p.checkpoint();
  REQUIRE(blob.ok());

  auto other = counting_from(0, 10).map(times_ten).batch(3);
  Status st = other.restore(*blob);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("batch(2)") != std::string::npos);
  CHECK(st.message().find("batch(3)") != std::string::npos);

  auto started = counting_from(0, 10).map(times_ten).batch(2);
  read(started, 1);
  CHECK(started.restore(*blob).code() == ErrorCode::failed_precondition);

  auto garbage = counting_from(0, 10).map(times_ten).batch(2);
  CHECK(garbage.restore("not a checkpoint").code() == ErrorCode::data_loss);
  auto truncated = counting_from(0, 10).map(times_ten).batch(2);
  CHECK(truncated.restore(blob->substr(0, blob->size() - 3)).code() == ErrorCode::data_loss);
  Element e;
  bool end = false;
  CHECK(truncated.next(e, end).code() == ErrorCode::data_loss); // never half restored

  // A pull function without a cursor cannot say where a resumed read starts.
  auto no_cursor = LocalPipeline([](Element&, bool& end_of_sequence) {
                     end_of_sequence = true;
                     return Status::OK();
                   }).batch(2);
  auto refused = no_cursor.checkpoint();
  CHECK(refused.status().code() == ErrorCode::failed_precondition);
  CHECK(refused.status().message().find("cursor") != std::string::npos);
}

TEST_CASE("LocalPipeline checkpoint over an ElementStream: the resumed read and the ops' state "
          "give every element once") {
  test::TestCluster cluster{2};
  Client client = cluster.client();
  DistributeOptions opts;
  opts.policy = ShardingPolicy::dynamic;
  const auto ops = [](ElementStream& stream) {
    return LocalPipeline::over(stream, std::chrono::seconds(20))
      .map(times_ten, 3)
      .shuffle(16, 5)
      .batch(5)
      .prefetch(2);
  };
  std::vector<int64_t> seen;
  std::string blob;
  {
    auto stream = client.distribute(Dataset::range(200), opts);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    auto p = ops(*stream);
    for (const auto& row : read(p, 7))
      seen.insert(seen.end(), row.begin(), row.end());
    auto checkpoint = p.checkpoint();
    REQUIRE_MESSAGE(checkpoint.ok(), checkpoint.status().to_string());
    blob = *checkpoint;
  } // the trainer stops: what the stream and the ops held but did not hand out is not seen
  auto cursor = LocalPipeline::read_cursor_of(blob);
  REQUIRE(cursor.ok());
  opts.resume_from = *cursor;
  auto stream = client.distribute(Dataset::range(200), opts);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  auto p = ops(*stream);
  Status st = p.restore(blob);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (const auto& row : read(p))
    seen.insert(seen.end(), row.begin(), row.end());
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> epoch;
  for (int64_t i = 0; i < 200; ++i)
    epoch.push_back(i * 10);
  CHECK(seen == epoch);
}

} // namespace
} // namespace conveyor
