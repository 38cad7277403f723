// `conveyor bench fairness`: does a job with quick elements keep its share of a worker that also
// runs jobs with slow ones? A `conveyor dispatcher` and one `conveyor worker` as child processes;
// this process reads a light job (`range(K).map(burn(rounds=R))`, ~1 ms per element here) alone,
// then while N heavy jobs (ten times the rounds per element, endless) keep the worker's pool busy.
// The worker's Executor shares its threads' time equally among the jobs with work
// (pipeline/runtime/executor.hpp), so with J = N + 1 jobs on C cores the light job should take about
// max(1, J / C) times as long as alone; in plain turns each heavy turn was ten light ones long.
// `--node-exe` runs the nodes from another build, to compare.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "conveyor/client.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "bench fairness", "[--heavy N] [--elements K] [--rounds R] [--reps T] [--node-exe PATH]",
  "Reads a light job (K elements of burn(rounds=R)) on a `conveyor worker` child process alone,\n"
  "then next to N endless heavy jobs (burn(rounds=10 R)), and reports how much longer it took\n"
  "against the share of the worker's cores an equal split would give it."};

Dataset burn(int64_t elements, int64_t rounds) {
  return Dataset::range(elements).map(FunctionRef{"burn", {{"rounds", rounds}}});
}

// Seconds to read the whole light job (a new job each time).
Expected<double> read_light(Client& client, int64_t elements, int64_t rounds) {
  DistributeOptions off;
  off.policy = ShardingPolicy::off;
  const auto start = std::chrono::steady_clock::now();
  auto stream = client.distribute(burn(elements, rounds), off);
  if (!stream.ok())
    return stream.status();
  int64_t got = 0;
  for (;;) {
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(stream->next(e, end, std::chrono::seconds(120)));
    if (end)
      break;
    ++got;
  }
  if (got != elements)
    return data_loss("the light job gave " + std::to_string(got) + " of " +
                     std::to_string(elements) + " elements");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int bench_fairness(const std::vector<std::string>& args) {
  int64_t heavy = 3;
  int64_t elements = 300;
  int64_t rounds = 1000000;
  int64_t reps = 3;
  std::string node_exe;
  po::options_description options("fairness benchmark options");
  // clang-format off
  options.add_options()
      ("heavy,n", po::value(&heavy)->default_value(heavy)->value_name("N"), "heavy jobs next to the light one")
      ("elements,k", po::value(&elements)->default_value(elements)->value_name("K"), "elements of the light job")
      ("rounds,r", po::value(&rounds)->default_value(rounds)->value_name("R"),
       "burn rounds per light element (heavy elements: 10 R)")
      ("reps", po::value(&reps)->default_value(reps)->value_name("T"), "light reads alone and loaded, each")
      ("node-exe", po::value(&node_exe)->value_name("PATH"),
       "run the dispatcher and worker from this `conveyor` binary (default: this one)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (heavy < 1 || heavy > 64)
    return bad(invalid_argument("`--heavy` must be in [1, 64], got " + std::to_string(heavy)));
  if (elements < 1 || elements > 1000000)
    return bad(
      invalid_argument("`--elements` must be in [1, 1000000], got " + std::to_string(elements)));
  if (rounds < 1 || rounds > 100000000)
    return bad(
      invalid_argument("`--rounds` must be in [1, 100000000], got " + std::to_string(rounds)));
  if (reps < 1 || reps > 20)
    return bad(invalid_argument("`--reps` must be in [1, 20], got " + std::to_string(reps)));

  std::vector<ChildNode> children;
  StopChildrenOnExit stop{children};
  if (Status st = start_bench_node_pair(children, "fairness", node_exe); !st.ok())
    return bad(st);
  auto client = Client::connect(children.front().address);
  if (!client.ok())
    return bad(client.status());
  const std::string load = load_average(); // before this benchmark's own jobs add to it

  // `reps` reads of the light job, each a new job.
  const auto light_reads = [&](const std::string& when) -> Expected<std::vector<double>> {
    std::vector<double> seconds;
    for (int64_t i = 0; i < reps; ++i) {
      auto t = read_light(*client, elements, rounds);
      if (!t.ok())
        return t.status().with_context("the light job " + when);
      seconds.push_back(*t);
    }
    return seconds;
  };
  auto alone = light_reads("alone");
  if (!alone.ok())
    return bad(alone.status());
  // The heavy jobs compute ahead into their task buffers whether or not they are read.
  std::vector<ElementStream> heavy_streams;
  for (int64_t i = 0; i < heavy; ++i) {
    auto stream = open_running_job(*client, burn(1000000000, 10 * rounds),
                                   "heavy job " + std::to_string(i + 1), std::chrono::seconds(60));
    if (!stream.ok())
      return bad(stream.status());
    heavy_streams.push_back(std::move(*stream));
  }
  auto loaded = light_reads("next to the heavy ones");
  if (!loaded.ok())
    return bad(loaded.status());
  heavy_streams.clear();

  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double fair = std::max(1.0, static_cast<double>(heavy + 1) / cores);
  std::printf("worker    : %s, %u hardware threads here\n",
              node_exe.empty() ? "this binary" : node_exe.c_str(), cores);
  std::printf("light job : %lld elements of burn(rounds=%lld), %.2f ms per element alone\n",
              static_cast<long long>(elements), static_cast<long long>(rounds),
              1000.0 * median(*alone) / static_cast<double>(elements));
  std::printf("alone     :");
  for (double t : *alone)
    std::printf(" %.3f", t);
  std::printf(" s\nloaded    :");
  for (double t : *loaded)
    std::printf(" %.3f", t);
  std::printf(" s (next to %lld endless jobs of burn(rounds=%lld))\n",
              static_cast<long long>(heavy), static_cast<long long>(10 * rounds));
  std::printf(
    "slowdown  : %.2f (median loaded / median alone); an equal split of %u cores among %lld "
    "jobs: %.2f\n",
    median(*loaded) / median(*alone), cores, static_cast<long long>(heavy + 1), fair);
  std::printf("load      : %s (at the start)\n", load.c_str());
  return 0;
}

const Benchmark reg{"fairness", "a light job's read time next to N heavy jobs on one worker",
                    bench_fairness};

} // namespace
} // namespace conveyor::apps
