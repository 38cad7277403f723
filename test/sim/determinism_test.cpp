// One seed decides everything: the same seed gives the same trace hash (whether or not the
// readable trace is kept, in a sweep or alone), and other seeds explore other runs.
#include <doctest/doctest.h>

#include <set>

#include "sim/sim.hpp"

using namespace std::chrono_literals;
using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;

namespace {

SimConfig faulty(uint64_t seed) {
  SimConfig cfg;
  cfg.workers = 4;
  cfg.consumers = 2;
  cfg.options.policy = ShardingPolicy::dynamic;
  cfg.random_faults = "any:3";
  cfg.seed = seed;
  return cfg;
}

std::string hash_of(const SimConfig& cfg) {
  auto r = conveyor::simulate(Dataset::range(300), cfg);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return r->trace_hash;
}

} // namespace

TEST_CASE("two runs of the same seed give the same trace hash") {
  for (uint64_t seed : {1u, 2u, 3u, 17u}) {
    auto cfg = faulty(seed);
    auto first = conveyor::simulate(Dataset::range(300), cfg);
    auto second = conveyor::simulate(Dataset::range(300), cfg);
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    CHECK(first->trace_hash == second->trace_hash);
    CHECK(first->steps == second->steps);
    CHECK(first->faults_injected == second->faults_injected);
    CHECK(first->elements() == second->elements());
  }
}

TEST_CASE("keeping the readable trace does not change the run") {
  auto cfg = faulty(5);
  auto plain = hash_of(cfg);
  cfg.keep_trace = true;
  auto r = conveyor::simulate(Dataset::range(300), cfg);
  REQUIRE(r.ok());
  CHECK(r->trace_hash == plain);
  CHECK(r->trace.size() > 50);
  CHECK(r->trace.front().find("start dispatcher") != std::string::npos);
}

TEST_CASE("different seeds explore different runs") {
  std::set<std::string> hashes;
  for (uint64_t seed = 100; seed < 110; ++seed)
    hashes.insert(hash_of(faulty(seed)));
  CHECK(hashes.size() == 10);
}

TEST_CASE("a seed from a sweep replays alone with the same trace") {
  auto cfg = faulty(0);
  std::vector<std::pair<uint64_t, std::string>> seen;
  auto s = conveyor::sweep(Dataset::range(300), cfg, 40, 5, 0, [&](const conveyor::SimResult& r) {
    seen.emplace_back(r.seed, r.trace_hash);
  });
  REQUIRE(s.ok());
  REQUIRE(seen.size() == 5);
  for (const auto& [seed, hash] : seen) {
    cfg.seed = seed;
    CHECK(hash_of(cfg) == hash);
  }
}
