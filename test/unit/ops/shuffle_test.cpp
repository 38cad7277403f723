// shuffle: buffer semantics, seeded determinism, reshuffle_each_iteration.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops_test_util.hpp"

using namespace conveyor;

namespace {

std::vector<int64_t> values(const Dataset& ds) {
  std::vector<int64_t> out;
  for (const auto& e : test::run(ds))
    out.push_back(e[0].as_int64());
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

} // namespace

TEST_CASE("shuffle yields a permutation - a seed gives the same order every time") {
  auto ds = Dataset::range(50).shuffle(50, 7);
  auto first = values(ds);
  CHECK(first != iota(50));
  auto sorted = first;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(50));
  CHECK(values(ds) == first);
  CHECK(values(Dataset::range(50).shuffle(50, 8)) != first);
}

TEST_CASE("shuffle's order does not depend on the run or the machine: pinned for seed 7") {
  // std::mt19937_64 and the rejection sampling in the kernels are exactly specified, so this order
  // is the same in every process, with every compiler and standard library.
  CHECK(test::show(Dataset::range(10).shuffle(10, 7)) == "[3, 2, 5, 9, 6, 1, 4, 0, 8, 7]");
}

TEST_CASE("buffer_size 1 keeps the order - a small buffer only moves elements a bounded distance") {
  CHECK(values(Dataset::range(20).shuffle(1, 3)) == iota(20));
  // With a buffer of b, the element output at position p is one of the first p + b inputs.
  const int64_t b = 4;
  auto out = values(Dataset::range(200).shuffle(b, 11));
  for (std::size_t p = 0; p < out.size(); ++p)
    CHECK(out[p] < static_cast<int64_t>(p) + b);
  auto sorted = out;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(200));
}

TEST_CASE("reshuffle_each_iteration: each repeat pass reshuffles, deterministically with a seed") {
  auto reshuffled = values(Dataset::range(20).shuffle(20, 5, true).repeat(3));
  REQUIRE(reshuffled.size() == 60);
  std::vector<std::vector<int64_t>> passes;
  for (int p = 0; p < 3; ++p)
    passes.emplace_back(reshuffled.begin() + 20 * p, reshuffled.begin() + 20 * (p + 1));
  CHECK(passes[0] != passes[1]);
  CHECK(passes[1] != passes[2]);
  CHECK(passes[0] == values(Dataset::range(20).shuffle(20, 5, true)));
  CHECK(values(Dataset::range(20).shuffle(20, 5, true).repeat(3)) == reshuffled);

  auto fixed = values(Dataset::range(20).shuffle(20, 5, false).repeat(3));
  CHECK(std::equal(fixed.begin(), fixed.begin() + 20, fixed.begin() + 20));
  CHECK(std::equal(fixed.begin(), fixed.begin() + 20, fixed.begin() + 40));
}

TEST_CASE("without a seed: a random order, still fixed across passes when not reshuffling") {
  auto ds = Dataset::range(30).shuffle(30);
  // Two random permutations of 30 agree with probability 1/30!.
  CHECK(values(ds) != values(ds));
  auto fixed = values(Dataset::range(30).shuffle(30, kNoSeed, false).repeat(2));
  CHECK(std::equal(fixed.begin(), fixed.begin() + 30, fixed.begin() + 30));
}

TEST_CASE("shuffle rejects a non-positive buffer") {
  Status st = test::first_error(Dataset::range(3).shuffle(0));
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("buffer_size") != std::string::npos);
}
