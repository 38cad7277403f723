// `conveyor bench scaling`: does a CPU-bound pipeline scale out with its workers?
// For each worker count W (default 1, 2, 4, 8, 14): a dispatcher and W workers as child
// processes of this binary on loopback, and one consumer in this process reading
// range(...).map(burn(rounds=R)) in OFF mode (every worker runs the whole pipeline, so W
// workers can at best produce W times as fast). `burn` is a fixed amount of arithmetic (not a
// spin on the clock), sized at start-up to take --work-us on this machine's core, so workers
// that share a core show it. Elements/s is counted over --seconds after a warm-up; the speedup
// is against W = 1 of the same repetition, and the efficiency against W times the pipeline's
// own single-thread rate measured here without the service, once per repetition (a core's
// clock moves with the load, so a single reading taken at start-up is not a fair base).
//
// Each figure is checked before it is printed: every worker must have delivered elements (per
// the stream's per-worker counts), else the run fails instead of reporting a rate from fewer
// workers than it names.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "consumer/status_client.hpp"
#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "conveyor/client.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

constexpr CommandInfo kInfo{
  "bench scaling", "[--workers 1,2,4,8,14] [--work-us U] [--seconds T] [--reps R]",
  "Measures one consumer reading a CPU-bound map (about U microseconds of arithmetic per\n"
  "element) from W worker processes, for each W in the list: elements/s, the speedup over one\n"
  "worker, and the efficiency against W times the map's single-thread rate without the service."};

struct Flags {
  std::string workers = "1,2,4,8,14";
  int64_t work_us = 500;
  double seconds = 3;
  double warmup = 1;
  int64_t reps = 2;
  NetworkConfig network; // --scheduler-threads, for every node and the consumer
};

Expected<std::vector<int>> parse_worker_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 256)
      return invalid_argument(
        "`--workers` must be a comma-separated list of counts in [1, 256], got `" + text + "`");
    out.push_back(static_cast<int>(n));
  }
  if (out.empty())
    return invalid_argument("`--workers` must name at least one count, got `" + text + "`");
  return out;
}

// Infinite (repeat()): a worker stopped mid-read retires its task at once instead of draining
// to an end that never comes.
Dataset burn_pipeline(int64_t rounds) {
  return Dataset::range(1 << 20).repeat().map(FunctionRef{"burn", {{"rounds", rounds}}});
}

// Elements/s of the pipeline iterated on this thread, for about `budget`.
Expected<double> local_rate(int64_t rounds, Seconds budget) {
  auto it = burn_pipeline(rounds).make_iterator();
  if (!it.ok())
    return it.status();
  const auto start = Clock::now();
  int64_t n = 0;
  Element e;
  bool end = false;
  do {
    for (int i = 0; i < 16; ++i) {
      CONVEYOR_RETURN_IF_ERROR((*it)->get_next(e, end));
      ++n;
    }
  } while (Clock::now() - start < budget);
  return static_cast<double>(n) / Seconds(Clock::now() - start).count();
}

// The rounds that take about `work_us` on this core: rate at a trial size, scaled.
Expected<int64_t> calibrate_rounds(int64_t work_us) {
  constexpr int64_t kTrialRounds = 20000;
  auto rate = local_rate(kTrialRounds, Seconds{0.3});
  if (!rate.ok())
    return rate.status();
  const double trial_us = 1e6 / *rate;
  return std::max<int64_t>(
    1, static_cast<int64_t>(static_cast<double>(kTrialRounds) * work_us / trial_us));
}

struct Run {
  double elements_per_s = 0;
  int64_t min_worker = 0, max_worker = 0; // elements read from the least and most productive worker
};

// W worker processes, one consumer here; stopped however this ends. Their logs (in the temp
// directory) are removed after a good run and kept, for the error message, after a failed one.
Expected<Run> measure(int workers, int64_t rounds, const Flags& f) {
  std::vector<ChildNode> nodes;
  struct Stop {
    std::vector<ChildNode>& nodes;
    bool remove_logs = false;
    ~Stop() {
      stop_children(nodes, std::chrono::milliseconds{5000});
      std::error_code ignored;
      for (const auto& n : nodes)
        if (remove_logs)
          std::filesystem::remove(n.log_path, ignored);
    }
  } stop{nodes};
  const std::string prefix =
    "bench-scaling-" + std::to_string(::getpid()) + "-w" + std::to_string(workers) + "-";
  const std::vector<std::string> node_flags{"--scheduler-threads",
                                            std::to_string(f.network.scheduler_threads)};
  CONVEYOR_RETURN_IF_ERROR(start_process_cluster(nodes, workers, prefix, node_flags, node_flags,
                                                 std::filesystem::temp_directory_path().string()));
  ClientConfig config;
  config.network = f.network;
  const std::string dispatcher = nodes.front().address;
  auto client = Client::connect(dispatcher, config);
  if (!client.ok())
    return client.status();
  DistributeOptions off;
  off.policy = ShardingPolicy::off;
  off.compression = "NONE";
  std::optional<ElementStream> stream;
  if (auto started = client->distribute(burn_pipeline(rounds), off); started.ok())
    stream.emplace(std::move(started).value());
  else
    return started.status();
  // The reader leaves first, and the nodes are stopped once the dispatcher released its job
  // (else a worker may drain with the job's stop never coming, and wait out its drain timeout).
  struct Leave {
    std::optional<ElementStream>& stream;
    std::string dispatcher;
    ~Leave() {
      stream.reset();
      (void)actors::fetch_status_when_jobs_finished(dispatcher, std::chrono::milliseconds(2000),
                                                    std::chrono::seconds(5));
    }
  } leave{stream, dispatcher};

  Element e;
  bool end = false;
  const auto read_until = [&](auto until) -> Expected<int64_t> {
    int64_t n = 0;
    while (Clock::now() < until) {
      CONVEYOR_RETURN_IF_ERROR(stream->next(e, end, std::chrono::milliseconds{10000}));
      if (end)
        return data_loss("the endless pipeline ended after " + std::to_string(n) + " elements");
      ++n;
    }
    return n;
  };
  const auto warm = read_until(Clock::now() + Seconds{f.warmup});
  if (!warm.ok())
    return warm.status().with_context("warm-up with " + std::to_string(workers) + " workers");
  const StreamStats before = stream->stats();
  const auto start = Clock::now();
  const auto counted = read_until(start + Seconds{f.seconds});
  if (!counted.ok())
    return counted.status().with_context("measuring " + std::to_string(workers) + " workers");
  Run r;
  r.elements_per_s = static_cast<double>(*counted) / Seconds(Clock::now() - start).count();

  const StreamStats after = stream->stats();
  std::vector<int64_t> per_worker;
  for (const auto& [address, total] : after.per_worker) {
    const auto was = before.per_worker.find(address);
    per_worker.push_back(total - (was == before.per_worker.end() ? 0 : was->second));
  }
  const auto contributing =
    std::count_if(per_worker.begin(), per_worker.end(), [](int64_t n) { return n > 0; });
  if (contributing != workers)
    return data_loss(std::to_string(workers) + " workers started, but " +
                     std::to_string(contributing) + " delivered elements while measuring");
  r.min_worker = *std::min_element(per_worker.begin(), per_worker.end());
  r.max_worker = *std::max_element(per_worker.begin(), per_worker.end());
  stop.remove_logs = true;
  return r;
}

int bench_scaling(const std::vector<std::string>& args) {
  Flags f;
  po::options_description options("scaling benchmark options");
  // clang-format off
  options.add_options()
      ("workers,w", po::value(&f.workers)->default_value(f.workers)->value_name("LIST"),
       "worker counts to measure, comma-separated")
      ("work-us", po::value(&f.work_us)->default_value(f.work_us)->value_name("U"),
       "CPU work per element in microseconds on this machine's core (calibrated at start)")
      ("seconds,t", po::value(&f.seconds)->default_value(f.seconds)->value_name("T"),
       "measured seconds per worker count (after the warm-up)")
      ("warmup", po::value(&f.warmup)->default_value(f.warmup)->value_name("S"), "warm-up seconds per run")
      ("reps", po::value(&f.reps)->default_value(f.reps)->value_name("R"),
       "repetitions of the whole list (the order alternates, so drift hits every count)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "error", &f.network))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  auto counts = parse_worker_counts(f.workers);
  if (!counts.ok())
    return bad(counts.status());
  if (f.work_us < 1 || f.work_us > 1000000)
    return bad(
      invalid_argument("`--work-us` must be in [1, 1000000], got " + std::to_string(f.work_us)));
  if (!(f.seconds > 0 && f.seconds <= 600) || !(f.warmup >= 0 && f.warmup <= 600))
    return bad(invalid_argument("`--seconds` must be in (0, 600] and `--warmup` in [0, 600]"));
  if (f.reps < 1 || f.reps > 100)
    return bad(invalid_argument("`--reps` must be in [1, 100], got " + std::to_string(f.reps)));

  const unsigned cores = std::thread::hardware_concurrency();
  auto rounds = calibrate_rounds(f.work_us);
  if (!rounds.ok())
    return bad(rounds.status());
  std::printf("machine : %u cores, load %s\n", cores, load_average().c_str());
  std::printf("pipeline: range(...).map(burn(rounds=%lld)), OFF, 8-byte elements\n",
              static_cast<long long>(*rounds));
  const int most = *std::max_element(counts->begin(), counts->end());
  if (static_cast<unsigned>(most) + 2 > cores)
    std::printf(
      "note    : %d workers + the consumer + the dispatcher exceed %u cores: the largest counts "
      "measure shared cores, not scaling\n",
      most, cores);

  // rates[i][rep] for counts[i]
  std::vector<std::vector<double>> rates(counts->size());
  std::vector<double> singles; // the pipeline on one thread without the service, per repetition
  for (int64_t rep = 0; rep < f.reps; ++rep) {
    auto single = local_rate(*rounds, Seconds{1});
    if (!single.ok())
      return bad(single.status());
    singles.push_back(*single);
    std::printf("rep %lld : one thread without the service %.0f elements/s (%.0f us each)\n",
                static_cast<long long>(rep + 1), *single, 1e6 / *single);
    for (std::size_t k = 0; k < counts->size(); ++k) {
      const std::size_t i = rep % 2 == 0 ? k : counts->size() - 1 - k;
      const int w = (*counts)[i];
      auto r = measure(w, *rounds, f);
      if (!r.ok())
        return bad(r.status());
      rates[i].push_back(r->elements_per_s);
      std::printf(
        "rep %lld : %2d workers %10.0f elements/s (per worker %lld..%lld elements), load %s\n",
        static_cast<long long>(rep + 1), w, r->elements_per_s,
        static_cast<long long>(r->min_worker), static_cast<long long>(r->max_worker),
        load_average().c_str());
      std::fflush(stdout);
    }
  }

  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  // The speedup's base: W = 1 when measured, else the smallest count scaled to one worker.
  const double single = median(singles);
  const auto smallest = std::min_element(counts->begin(), counts->end()) - counts->begin();
  const double base = median(rates[smallest]) / (*counts)[smallest];
  std::printf("\nworkers  elements/s (min / median / max)       speedup  efficiency\n");
  for (std::size_t i = 0; i < counts->size(); ++i) {
    const int w = (*counts)[i];
    const double med = median(rates[i]);
    std::printf("%7d  %10.0f / %10.0f / %10.0f  %6.2fx  %9.0f%%\n", w,
                *std::min_element(rates[i].begin(), rates[i].end()), med,
                *std::max_element(rates[i].begin(), rates[i].end()), med / base,
                100 * med / (w * single));
  }
  std::printf(
    "speedup: median elements/s against %d worker%s median per worker; efficiency: against W x the "
    "median single-thread rate (%.0f elements/s)\nload    : %s\n",
    (*counts)[smallest], (*counts)[smallest] == 1 ? "'s" : "s'", single, load_average().c_str());
  return 0;
}

const Benchmark reg{"scaling", "CPU-bound map on 1..N worker processes into one consumer (speedup)",
                    bench_scaling};

} // namespace
} // namespace conveyor::apps
