// sim/sim.hpp: simulate, sweep, replay commands and result summaries.
#include <chrono>
#include <cstdio>

#include "node/shell_quote.hpp"
#include "sim/cluster.hpp"
#include "sim/derived_config.hpp"
#include "sim/trace.hpp"
#include "sim/sim.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor {

namespace {

std::string fault_text(const SimConfig& config) {
  std::string spec = config.random_faults;
  for (const auto& f : config.faults)
    spec += (spec.empty() ? "" : ",") + f.to_string();
  return spec;
}

} // namespace

std::vector<Element> SimResult::elements() const {
  std::vector<Element> all;
  for (const auto& c : consumers)
    all.insert(all.end(), c.elements.begin(), c.elements.end());
  return all;
}

std::string SimResult::summary() const {
  std::size_t n = 0;
  for (const auto& c : consumers)
    n += c.elements.size();
  std::string s = "seed " + std::to_string(seed) + ": " + (ok() ? "PASS" : "FAIL") + "  " +
                  std::to_string(n) + " elements, " + sim::format_time(virtual_time) +
                  " virtual, " + std::to_string(faults_injected.size()) + " fault(s), " +
                  std::to_string(steps) + " steps, " + std::to_string(messages) +
                  " network messages, trace " + trace_hash;
  for (const auto& f : failures)
    s += "\n  - " + f;
  return s;
}

std::string SweepResult::summary() const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", real_seconds);
  std::string s = std::to_string(runs) + " run(s), " + std::to_string(faults_injected) +
                  " fault(s) injected, " + std::to_string(failed_runs) +
                  " run(s) with invariant failures, " + secs + " s";
  if (!failing_seeds.empty()) {
    s += "\nfailing seeds:";
    for (auto seed : failing_seeds)
      s += " " + std::to_string(seed);
  }
  return s;
}

std::string replay_command(const Dataset& dataset, const SimConfig& config) {
  std::string cmd = "conveyor-sim --workers " + std::to_string(config.workers) + " --consumers " +
                    std::to_string(config.consumers) + " --dataset " +
                    shell_quote(dataset.to_text()) + " --mode " +
                    (config.options.policy == ShardingPolicy::dynamic ? "dynamic" : "off") +
                    " --seed " + std::to_string(config.seed);
  auto faults = fault_text(config);
  if (!faults.empty())
    cmd += " --faults " + shell_quote(faults);
  if (config.options.max_outstanding_requests)
    cmd += " --credits " + std::to_string(*config.options.max_outstanding_requests);
  if (config.options.job_name)
    cmd += " --job-name " + shell_quote(*config.options.job_name);
  if (config.latency)
    cmd += " --latency-us " + std::to_string(config.latency->count());
  if (config.jitter)
    cmd += " --jitter-us " + std::to_string(config.jitter->count());
  if (config.consumer_step)
    cmd += " --consumer-step-us " + std::to_string(config.consumer_step->count());
  if (!config.plant_bug.empty() && config.plant_bug != "none")
    cmd += " --plant-bug " + config.plant_bug;
  if (config.options.num_consumers)
    cmd += " --num-consumers " + std::to_string(*config.options.num_consumers) + " --take " +
           std::to_string(config.take);
  if (config.options.cross_trainer_cache && config.options.cross_trainer_cache->finite_epoch)
    cmd += " --cross-trainer-cache --cross-trainer-finite-epoch";
  else if (config.options.cross_trainer_cache)
    cmd += " --cross-trainer-cache --take " + std::to_string(config.take);
  else if (config.take > 0) // an endless OFF read
    cmd += " --take " + std::to_string(config.take) + " --endless-period " +
           std::to_string(config.endless_period);
  if (config.late_workers > 0)
    cmd += " --late-workers " + std::to_string(config.late_workers);
  if (config.consumer_stagger.count() > 0)
    cmd += " --consumer-stagger-ms " + std::to_string(config.consumer_stagger.count());
  return cmd + " --trace";
}

namespace {

// The dataset run locally, which the invariants compare the streams with; none for reads that
// stop after `take` elements of an infinite dataset (coordinated rounds, cache trainers,
// endless OFF reads).
Expected<sim::Reference> reference_for(const Dataset& dataset, const SimConfig& config) {
  const bool finite_epoch =
    config.options.cross_trainer_cache && config.options.cross_trainer_cache->finite_epoch;
  if (config.options.num_consumers || (config.options.cross_trainer_cache && !finite_epoch) ||
      config.take > 0)
    return sim::Reference{};
  return sim::make_reference(dataset);
}

} // namespace

Expected<SimResult> simulate(const Dataset& dataset, const SimConfig& config) {
  auto spec = parse_faults(config.random_faults);
  if (!spec.ok())
    return spec.status();
  CONVEYOR_RETURN_IF_ERROR(sim::validate_config(config, *spec));
  CONVEYOR_RETURN_IF_ERROR(dataset.validate());
  auto reference = reference_for(dataset, config);
  if (!reference.ok())
    return reference.status();
  return sim::run_cluster(dataset, config, *reference, *spec);
}

Expected<SweepResult> sweep(const Dataset& dataset, SimConfig config, uint64_t first_seed, int runs,
                            int stop_after_failures,
                            const std::function<void(const SimResult&)>& on_run) {
  if (runs < 1)
    return invalid_argument("`runs` must be at least 1, got " + std::to_string(runs));
  auto spec = parse_faults(config.random_faults);
  if (!spec.ok())
    return spec.status();
  CONVEYOR_RETURN_IF_ERROR(sim::validate_config(config, *spec));
  CONVEYOR_RETURN_IF_ERROR(dataset.validate());
  auto reference = reference_for(dataset, config); // once for every seed
  if (!reference.ok())
    return reference.status();
  auto start = std::chrono::steady_clock::now();
  SweepResult out;
  for (int i = 0; i < runs; ++i) {
    config.seed = first_seed + static_cast<uint64_t>(i);
    auto r = sim::run_cluster(dataset, config, *reference, *spec);
    ++out.runs;
    out.faults_injected += static_cast<int64_t>(r.faults_injected.size());
    if (on_run)
      on_run(r);
    if (!r.ok()) {
      ++out.failed_runs;
      out.failing_seeds.push_back(r.seed);
      if (out.failures.size() < 10)
        out.failures.push_back(std::move(r));
      if (stop_after_failures > 0 && out.failed_runs >= stop_after_failures)
        break;
    }
  }
  out.real_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

} // namespace conveyor
