// The cross-trainer cache in the simulator: three trainers (distinct trainer ids) read one
// shared job of an infinite dataset from two workers through the workers' caches, with the
// cache window drawn per seed (8 or 32 elements, so slow trainers fall behind it and skip
// ahead, or large enough never to evict). The invariants (check_cross_trainer_cache in
// actors/sim/invariants.cpp) check that every trainer reads each task's sequence in order,
// the whole of it when nothing could be evicted.
// CONVEYOR_SIM_SEEDS sets the number of seeds (default 500; this sweep runs a fifth of them).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "conveyor/sim.hpp"
#include "pipeline/text_form.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::sim_test::env_int;
using conveyor::sim_test::failures_of;

namespace {

conveyor::SimConfig cache_config() {
  conveyor::SimConfig cfg;
  cfg.workers = 2;
  cfg.consumers = 3;
  cfg.options.job_name = "ctc";
  cfg.options.cross_trainer_cache = conveyor::CrossTrainerCacheOptions{"trainer-0"};
  cfg.take = 200;
  return cfg;
}

} // namespace

TEST_CASE("CI sweep: cross-trainer cache - every trainer reads each task's sequence in order") {
  auto d = conveyor::parse_dataset("range(1000000).repeat()");
  REQUIRE(d.ok());
  const auto cfg = cache_config();
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 5 + 1;
  int whole = 0, skipped = 0;
  auto s = conveyor::sweep(*d, cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    // Whether some trainer skipped ahead (a window that evicts, and a trainer behind it).
    bool gap = false;
    for (const auto& c : r.consumers) {
      std::map<std::string, int64_t> last;
      for (std::size_t i = 0; i < c.elements.size(); ++i) {
        const auto v = c.elements[i].components.at(0).as_int64();
        auto at = last.find(c.sources[i]);
        gap = gap || (at == last.end() ? v != 0 : v != at->second + 1);
        last[c.sources[i]] = v;
      }
    }
    (gap ? skipped : whole) += 1;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("cross-trainer cache: " << s->summary() << "; a trainer skipped ahead in " << skipped
                                  << " run(s), every trainer read every task whole in " << whole);
  CHECK(s->runs == runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  // Both behaviours are exercised: the slow-trainer skip (the reference's documented one) and
  // the lossless sharing.
  CHECK(skipped > 0);
  CHECK(whole > 0);
}
