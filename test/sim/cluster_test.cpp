// The service core's behaviours replayed on the simulated cluster: the reference's examples
// (range(5) on 2 workers: OFF gives each element twice, DYNAMIC once), shared jobs, epochs,
// an empty dataset, workers that crash, restart or are partitioned away.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "conveyor/sim.hpp"
#include "pipeline/dataset.hpp"

using namespace std::chrono_literals;
using conveyor::Dataset;
using conveyor::Element;
using conveyor::Fault;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;
using conveyor::SimResult;

namespace {

SimResult run(const Dataset& ds, SimConfig cfg) {
  auto r = conveyor::simulate(ds, cfg);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  INFO(r->summary());
  return std::move(*r);
}

std::vector<int64_t> values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    out.push_back(e[0].as_int64());
  std::sort(out.begin(), out.end());
  return out;
}

SimConfig config(int workers, ShardingPolicy policy, uint64_t seed = 1) {
  SimConfig cfg;
  cfg.workers = workers;
  cfg.options.policy = policy;
  cfg.seed = seed;
  return cfg;
}

} // namespace

TEST_CASE("OFF: range(5) on 2 simulated workers gives every element twice") {
  auto r = run(Dataset::range(5), config(2, ShardingPolicy::off));
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(values(r.elements()) == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
  REQUIRE(r.consumers.size() == 1);
  CHECK(r.consumers[0].status.ok());
  // Per worker, the stream is the dataset in order.
  std::map<std::string, std::vector<int64_t>> per_worker;
  for (std::size_t i = 0; i < r.consumers[0].elements.size(); ++i)
    per_worker[r.consumers[0].sources[i]].push_back(r.consumers[0].elements[i][0].as_int64());
  REQUIRE(per_worker.size() == 2);
  for (const auto& [worker, seq] : per_worker)
    CHECK(seq == std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("DYNAMIC: range(5) on 2 simulated workers gives every element once") {
  auto r = run(Dataset::range(5), config(2, ShardingPolicy::dynamic));
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(values(r.elements()) == std::vector<int64_t>{0, 1, 2, 3, 4});
}
