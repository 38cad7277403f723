// The example of docs/SIMULATION.md, as it is written there: a user's own pipeline (with the
// user's own map function) on 16 simulated workers, one of which crashes mid-job.
#include <doctest/doctest.h>

#include <chrono>
#include <set>

#include "sim/sim.hpp"
#include "pipeline/functions/functions.hpp"

using namespace std::chrono_literals;

namespace {

// The user's preprocessing step: x -> 10 * x + 1 on int64 scalars.
void register_my_function() {
  static bool done = false;
  if (done)
    return;
  done = true;
  conveyor::FunctionDef def;
  def.name = "my_preprocess";
  def.kind = conveyor::FunctionKind::map;
  def.doc = "10 * x + 1";
  def.map = [](const conveyor::Element& e,
               const conveyor::Params&) -> conveyor::Expected<conveyor::Element> {
    return conveyor::Element{conveyor::Tensor::scalar(10 * e[0].as_int64() + 1)};
  };
  REQUIRE(conveyor::FunctionRegistry::global().add(std::move(def)).ok());
}

} // namespace

TEST_CASE("docs example: my pipeline on 16 simulated workers, one of which crashes") {
  register_my_function();
  // --- as in docs/SIMULATION.md
  auto pipeline = conveyor::Dataset::range(10000).map("my_preprocess");

  conveyor::SimConfig cfg;
  cfg.workers = 16;
  cfg.options.policy = conveyor::ShardingPolicy::dynamic; // each element once
  cfg.seed = 42;
  cfg.faults.push_back(conveyor::Fault::crash("worker-3", 0us).at_fraction(0.5)); // halfway

  auto result = conveyor::simulate(pipeline, cfg);
  REQUIRE(result.ok());                           // the configuration was valid
  CHECK_MESSAGE(result->ok(), result->summary()); // every invariant held
  CHECK(result->consumers[0].status.ok());        // the stream ended normally

  // What the trainer received: every element exactly once — the splits worker-3 had not
  // finished were handed out again, and the consumer dropped what it already had of them.
  std::set<int64_t> seen;
  int repeated = 0;
  for (const auto& e : result->elements())
    repeated += seen.insert(e[0].as_int64()).second ? 0 : 1;
  CHECK(repeated == 0);
  CHECK(seen.size() == 10000);
  CHECK(*seen.begin() % 10 == 1);
  // --- end of the example

  REQUIRE(result->faults_injected.size() == 1);
  CHECK(result->faults_injected[0].find("crash(worker-3)@50%") == 0);
  // Same seed, same run.
  auto again = conveyor::simulate(pipeline, cfg);
  REQUIRE(again.ok());
  CHECK(again->trace_hash == result->trace_hash);
}
