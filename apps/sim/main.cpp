// `conveyor-sim`: runs a dataset on a simulated cluster (sim/sim.hpp) for one seed or a sweep of
// seeds, checks the invariants after every run and prints a summary. A failing run prints its
// seed, its failures and the command that replays it. A program of its own, built only with
// -DCONVEYOR_SIM=ON and never installed: it links the simulator and its planted bugs, which the
// `conveyor` binary must not contain (scripts/check_no_sim.sh).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/cli_common.hpp"
#include "sim/sim.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "sim",
  "--dataset EXPR [--workers N] [--consumers C] [--mode off|dynamic] [--seed S] [--faults SPEC] "
  "[--runs K] [flags]",
  "Runs the dataset EXPR on a simulated cluster: dispatcher, N workers and C consumers in one\n"
  "process, on a deterministic scheduler with virtual time and a simulated network, running the\n"
  "production actors. One seed decides everything (the trace hash proves it); --runs K sweeps\n"
  "seeds S..S+K-1. Faults (--faults): KIND:N draws N faults per seed (crash, restart, partition,\n"
  "disconnect, slow, drain: a graceful stop and a new process, dispatcher: a crash and restart "
  "from its simulated disk, trainer: the consumer killed and resumed from its checkpoint (DYNAMIC "
  "private reads), any: all but drain and trainer); KIND(NODE[,PEER])@WHEN[+DURATION] places one, "
  "e.g.\n"
  "crash(worker-1)@200ms or partition(worker-0,dispatcher)@30%+2s. Exit codes: 0 every run\n"
  "passed, 1 an invariant failed, 2 bad arguments."};

struct SimFlags {
  std::string dataset;
  std::string mode = "off";
  std::string faults;
  std::string plant_bug;
  int64_t workers = 2;
  int64_t consumers = 1;
  uint64_t seed = 1;
  int64_t runs = 1;
  int64_t stop_after = 0;
  int64_t time_limit_ms = 600000;
  bool trace = false;
  bool verbose = false;
};

void print_run(const SimResult& r, bool with_trace) {
  std::printf("%s\n", r.summary().c_str());
  std::printf("  derived: %s\n", r.derived_config.c_str());
  for (const auto& f : r.faults_injected)
    std::printf("  fault: %s\n", f.c_str());
  if (with_trace) {
    std::printf("  trace (%zu lines):\n", r.trace.size());
    for (const auto& line : r.trace)
      std::printf("    %s\n", line.c_str());
  }
  if (!r.ok())
    std::printf("  replay: %s\n", r.replay_command.c_str());
}

int run_sim(const std::vector<std::string>& args) {
  SimFlags f;
  po::options_description options("sim options");
  // clang-format off
  options.add_options()
    ("dataset", po::value(&f.dataset)->required()->value_name("EXPR"),
     "the dataset, in the pipeline text form, e.g. 'range(1000).map(square)' (finite)")
    ("workers,w", po::value(&f.workers)->default_value(2)->value_name("N"), "simulated workers")
    ("consumers,c", po::value(&f.consumers)->default_value(1)->value_name("C"),
     "simulated consumers (several share one job)")
    ("mode,m", po::value(&f.mode)->default_value("off")->value_name("MODE"),
     "processing mode: off (every worker produces the whole dataset) or dynamic (each element "
     "once across the workers)")
    ("seed,s", po::value(&f.seed)->default_value(1)->value_name("S"), "the seed (of the first run)")
    ("runs,k", po::value(&f.runs)->default_value(1)->value_name("K"), "sweep seeds S..S+K-1")
    ("faults,f", po::value(&f.faults)->value_name("SPEC"), "faults to inject (see above)")
    ("credits", po::value<int64_t>()->value_name("M"),
     "max_outstanding_requests of every consumer (default: drawn from the seed)")
    ("job-name", po::value<std::string>()->value_name("NAME"), "the shared job's name")
    ("num-consumers", po::value<int64_t>()->value_name("N"),
     "coordinated reads: the C consumers read with num_consumers N (= C) and indices 0..N-1, each "
     "stopping after --take rounds; the dataset is infinite and expands x to x*N..x*N+N-1, e.g. "
     "'range(1000).flat_map(group_fn(n=N)).repeat()'")
    ("take", po::value<int64_t>()->value_name("R"),
     "coordinated reads: rounds per consumer; cross-trainer cache reads: elements per consumer; "
     "--mode off with one consumer and no --job-name: an endless read of elements "
     "(with --endless-period)")
    ("endless-period", po::value<int64_t>()->value_name("N"),
     "an endless OFF read (--take): the dataset is range(N).repeat(), whose task streams the "
     "checks expect to be 0, 1, ..., N-1, 0, ...")
    ("cross-trainer-cache", po::bool_switch(),
     "the C consumers read a shared job through the workers' cross-trainer cache as trainers "
     "trainer-0..trainer-C-1, each stopping after --take elements; the dataset is infinite, e.g. "
     "'range(1000000).repeat()'")
    ("cross-trainer-finite-epoch", po::bool_switch(),
     "with --cross-trainer-cache: whole-epoch sharing of a finite dataset instead (no --take); "
     "every trainer must read the whole epoch")
    ("late-workers", po::value<int>()->default_value(0)->value_name("L"),
     "the last L workers start once the consumers received a share drawn from the seed (10..60 %), "
     "or when no other worker is up; they join the running job")
    ("consumer-stagger-ms", po::value<int64_t>()->default_value(0)->value_name("MS"),
     "consumer i starts i x MS later (with --consumers > 1: late consumers of the named job)")
    ("latency-us", po::value<int64_t>()->value_name("US"), "one-way link latency (default: drawn)")
    ("jitter-us", po::value<int64_t>()->value_name("US"), "extra delay per message, up to US (default: drawn)")
    ("consumer-step-us", po::value<int64_t>()->value_name("US"),
     "the trainer's time per batch, up to US (default: drawn)")
    ("time-limit-ms", po::value(&f.time_limit_ms)->default_value(600000)->value_name("MS"),
     "virtual time after which a run that did not end fails")
    ("stop-after", po::value(&f.stop_after)->default_value(0)->value_name("F"),
     "stop the sweep after F failed runs (0 = never)")
    ("plugin", po::value<std::vector<std::string>>()->composing()->value_name("LIB"),
     "load the functions of a plugin shared library (repeatable), as workers do")
    ("trace", po::bool_switch(&f.trace), "print the readable event log of each printed run")
    ("verbose,v", po::bool_switch(&f.verbose), "print every run, not only the failed ones");
  // clang-format on
  po::options_description hidden;
  // clang-format off
  hidden.add_options()("plant-bug", po::value(&f.plant_bug)->value_name("NAME"),
                       "test-only: switch on a planted protocol bug (duplicate-split, forget-lost-split, forget-held-split, "
                       "skip-round)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm, &hidden))
    return *stop;

  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = load_plugin_flags(vm); !st.ok())
    return bad(st);
  auto dataset = parse_dataset(f.dataset);
  if (!dataset.ok())
    return bad(Status(dataset.status().code(), "`--dataset`: " + dataset.status().message()));
  SimConfig cfg;
  auto policy = parse_processing_mode(f.mode);
  if (!policy.ok())
    return bad(Status(policy.status().code(), "`--mode`: " + policy.status().message()));
  cfg.options.policy = *policy;
  if (auto st = check_at_least("--workers", f.workers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--consumers", f.consumers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--runs", f.runs, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--stop-after", f.stop_after, 0); !st.ok())
    return bad(st);
  cfg.workers = static_cast<int>(f.workers);
  cfg.consumers = static_cast<int>(f.consumers);
  cfg.seed = f.seed;
  cfg.random_faults = f.faults;
  cfg.plant_bug = f.plant_bug;
  cfg.keep_trace = f.trace;
  auto limit = check_millis("--time-limit-ms", f.time_limit_ms);
  if (!limit.ok())
    return bad(limit.status());
  cfg.time_limit = *limit;
  if (vm.count("credits"))
    cfg.options.max_outstanding_requests = vm["credits"].as<int64_t>();
  if (vm.count("job-name"))
    cfg.options.job_name = vm["job-name"].as<std::string>();
  if (vm.count("num-consumers")) {
    cfg.options.num_consumers = vm["num-consumers"].as<int64_t>();
    cfg.options.consumer_index = 0; // each consumer reads its own index
    if (!cfg.options.job_name)
      cfg.options.job_name = "sim";
  }
  if (vm["cross-trainer-finite-epoch"].as<bool>() && !vm["cross-trainer-cache"].as<bool>())
    return bad(
      invalid_argument("`--cross-trainer-finite-epoch` is used only with `--cross-trainer-cache`"));
  if (vm["cross-trainer-cache"].as<bool>()) {
    cfg.options.cross_trainer_cache =
      CrossTrainerCacheOptions{"trainer-0", // per consumer
                               vm["cross-trainer-finite-epoch"].as<bool>()};
    if (!cfg.options.job_name)
      cfg.options.job_name = "sim";
  }
  if (vm.count("take"))
    cfg.take = vm["take"].as<int64_t>();
  if (vm.count("endless-period")) {
    if (!vm.count("take") || cfg.options.num_consumers || cfg.options.cross_trainer_cache)
      return bad(invalid_argument("`--endless-period` is used only with an endless OFF read "
                                  "(`--take` without --num-consumers or --cross-trainer-cache)"));
    const auto period = vm["endless-period"].as<int64_t>();
    if (auto st = check_at_least("--endless-period", period, 1); !st.ok())
      return bad(st);
    cfg.endless_period = period;
  }
  cfg.late_workers = vm["late-workers"].as<int>();
  cfg.consumer_stagger = std::chrono::milliseconds{vm["consumer-stagger-ms"].as<int64_t>()};
  for (const char* flag : {"latency-us", "jitter-us", "consumer-step-us"}) {
    if (!vm.count(flag))
      continue;
    auto v = vm[flag].as<int64_t>();
    if (auto st = check_at_least(std::string{"--"} + flag, v, 0); !st.ok())
      return bad(st);
    std::chrono::microseconds us{v};
    if (std::string{flag} == "latency-us")
      cfg.latency = us;
    else if (std::string{flag} == "jitter-us")
      cfg.jitter = us;
    else
      cfg.consumer_step = us;
  }

  if (f.runs == 1) {
    auto r = simulate(*dataset, cfg);
    if (!r.ok())
      return bad(r.status());
    print_run(*r, f.trace);
    return r->ok() ? kExitOk : kExitFailure;
  }
  auto s = sweep(*dataset, cfg, f.seed, static_cast<int>(f.runs), static_cast<int>(f.stop_after),
                 [&](const SimResult& r) {
                   if (f.verbose || !r.ok())
                     print_run(r, f.trace && !r.ok());
                   std::fflush(stdout);
                 });
  if (!s.ok())
    return bad(s.status());
  std::printf("%s\n", s->summary().c_str());
  return s->failed_runs == 0 ? kExitOk : kExitFailure;
}

} // namespace
} // namespace conveyor::apps

int main(int argc, char** argv) {
  conveyor::apps::set_single_command_program("conveyor-sim");
  return conveyor::apps::run_sim(std::vector<std::string>(argv + 1, argv + argc));
}
