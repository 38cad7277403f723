// `conveyor bench fairness`: does a job with quick elements keep its share of a worker that also
// runs jobs with slow ones? A `conveyor dispatcher` and one `conveyor worker` as child processes;
// this process reads a light job (`range(K).map(burn(rounds=R))`, ~1 ms per element here) alone,
// then while N heavy jobs (ten times the rounds per element, endless) keep the worker's pool busy.
// The worker's Executor shares its threads' time equally among the jobs with work
// (pipeline/runtime/executor.hpp), so with J = N + 1 jobs on C cores the light job should take about
// max(1, J / C) times as long as alone; in plain turns each heavy turn was ten light ones long.
// `--node-exe` runs the nodes from another build, to compare.
//
// `--weights 3,1` measures the shares across tenants instead (issue 38): one endless CPU-bound
// job per weight, each its own tenant of that weight, read continuously so that the worker stays
// saturated (more parallel calls than threads); the worker's executor counters (its thread time
// per tenant, from `conveyor status`) over `--seconds` give each tenant's share, against the
// weights' proportions.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "consumer/status_client.hpp"
#include "conveyor/client.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "bench fairness",
  "[--heavy N] [--elements K] [--rounds R] [--reps T] [--weights W,W,...] [--seconds S] "
  "[--node-exe PATH]",
  "Reads a light job (K elements of burn(rounds=R)) on a `conveyor worker` child process alone,\n"
  "then next to N endless heavy jobs (burn(rounds=10 R)), and reports how much longer it took\n"
  "against the share of the worker's cores an equal split would give it. With --weights: one\n"
  "endless job per weight, each its own tenant, and each tenant's share of the worker's thread\n"
  "time over S seconds against its weight's share."};

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

// "3,1" -> {3, 1}: 2 to 8 weights, each in [1, 1000].
Expected<std::vector<int64_t>> parse_weights(const std::string& text) {
  std::vector<int64_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    int64_t w = 0;
    std::size_t used = 0;
    try {
      w = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || w < 1 || w > 1000)
      return invalid_argument("`--weights`: \"" + part +
                              "\" is not a weight; expected integers in [1, 1000] separated by "
                              "commas, e.g. 3,1");
    out.push_back(w);
    at = comma + 1;
  }
  if (out.size() < 2 || out.size() > 8)
    return invalid_argument("`--weights` needs 2 to 8 weights, got " + std::to_string(out.size()) +
                            ": \"" + text + "\"");
  return out;
}

// The worker's thread seconds per tenant, as of its last heartbeat.
Expected<std::map<std::string, double>> tenant_seconds(const std::string& dispatcher) {
  auto status = actors::fetch_status(dispatcher, std::chrono::seconds(5), false);
  if (!status.ok())
    return status.status();
  if (status->workers.size() != 1)
    return failed_precondition("expected one worker, the dispatcher lists " +
                               std::to_string(status->workers.size()));
  std::map<std::string, double> out;
  for (const auto& t : status->workers.front().tenants)
    out[t.tenant] = t.thread_seconds;
  return out;
}

int bench_weights(const std::vector<int64_t>& weights, int64_t rounds, int64_t seconds,
                  const std::string& node_exe) {
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  std::vector<ChildNode> children;
  StopChildrenOnExit stop{children};
  if (Status st = start_bench_node_pair(children, "fairness", node_exe); !st.ok())
    return bad(st);
  const std::string dispatcher = children.front().address;
  auto client = Client::connect(dispatcher);
  if (!client.ok())
    return bad(client.status());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // Many more parallel calls per job than the worker has threads: every tenant always has work,
  // even after the executor added a thread or two on a loaded machine.
  const int64_t parallel = 4 * static_cast<int64_t>(cores);
  std::atomic<bool> stopping{false};
  std::vector<std::thread> readers;
  // Why a reader stopped before the end (its tenant's share would no longer mean anything).
  std::mutex failed_mu;
  std::vector<std::string> failed;
  const auto join_readers = [&] {
    stopping = true;
    for (auto& r : readers)
      r.join();
    readers.clear();
  };
  std::vector<std::string> tenants;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    DistributeOptions options;
    options.tenant = "tenant" + std::to_string(i + 1);
    options.tenant_weight = weights[i];
    tenants.push_back(options.tenant);
    auto stream = open_running_job(
      *client,
      Dataset::range(1000000000).map(FunctionRef{"burn", {{"rounds", rounds}}}, parallel, false),
      "the job of " + options.tenant, std::chrono::seconds(60), options);
    if (!stream.ok()) {
      join_readers();
      return bad(stream.status());
    }
    // Read on so that the task never stops for want of credit (bounded by `stopping`). A wait
    // that runs out is no reason to stop: on a loaded machine a weight-1 tenant's elements of a
    // few ms may take over a second, and a reader that gave up ended its job (the other tenant
    // then measured 0.96-0.99 of the threads with --rounds 4000000).
    readers.emplace_back(
      [s = std::move(*stream), &stopping, &failed_mu, &failed, tenant = options.tenant]() mutable {
        while (!stopping) {
          Element e;
          bool end = false;
          Status st = s.next(e, end, std::chrono::seconds(1));
          if (st.code() == ErrorCode::deadline_exceeded)
            continue;
          if (!st.ok() || end) {
            std::lock_guard<std::mutex> lock(failed_mu);
            failed.push_back("the reader of " + tenant + " stopped: " +
                             (end ? std::string("its endless job ended") : st.to_string()));
            return;
          }
        }
      });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1)); // (past the jobs' start)
  const std::string load = load_average();
  // The worker's threads over the window: its executor adds some only while items block or run
  // long (more would let the OS scheduler, not the weights, decide who runs).
  const std::string worker_pid = std::to_string(children.back().pid);
  const int64_t threads_before = proc_status_number(worker_pid, "Threads");
  int64_t threads_most = threads_before;
  auto before = tenant_seconds(dispatcher);
  const auto window_end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < window_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    threads_most = std::max(threads_most, proc_status_number(worker_pid, "Threads"));
  }
  auto after = tenant_seconds(dispatcher);
  const int64_t threads_after = proc_status_number(worker_pid, "Threads");
  join_readers();
  if (!before.ok() || !after.ok())
    return bad(!before.ok() ? before.status() : after.status());
  if (!failed.empty())
    return bad(failed_precondition(failed.front() + " (within the window)"));
  double total = 0;
  int64_t weight_sum = 0;
  std::vector<double> used;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    used.push_back((*after)[tenants[i]] - (*before)[tenants[i]]);
    total += used.back();
    weight_sum += weights[i];
  }
  std::printf("worker    : %s, %u hardware threads here; each job %lld parallel calls of "
              "burn(rounds=%lld)\n",
              node_exe.empty() ? "this binary" : node_exe.c_str(), cores,
              static_cast<long long>(parallel), static_cast<long long>(rounds));
  std::printf("window    : %lld s, %.2f thread-seconds in all\n", static_cast<long long>(seconds),
              total);
  std::printf("%-10s %-7s %-9s %-9s %s\n", "tenant", "weight", "expected", "measured",
              "thread-seconds");
  double worst = 0;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const double expected = static_cast<double>(weights[i]) / static_cast<double>(weight_sum);
    const double measured = total > 0 ? used[i] / total : 0.0;
    worst = std::max(worst, std::abs(measured - expected));
    std::printf("%-10s %-7lld %-9.3f %-9.3f %.2f\n", tenants[i].c_str(),
                static_cast<long long>(weights[i]), expected, measured, used[i]);
  }
  std::printf("deviation : %.3f (largest |measured - expected|)\n", worst);
  std::printf("threads   : the worker's %lld at the start, at most %lld, %lld at the end\n",
              static_cast<long long>(threads_before), static_cast<long long>(threads_most),
              static_cast<long long>(threads_after));
  std::printf("load      : %s (at the start)\n", load.c_str());
  return 0;
}

int bench_fairness(const std::vector<std::string>& args) {
  int64_t heavy = 3;
  int64_t elements = 300;
  int64_t rounds = 1000000;
  int64_t reps = 3;
  int64_t seconds = 10;
  std::string weights_text;
  std::string node_exe;
  po::options_description options("fairness benchmark options");
  // clang-format off
  options.add_options()
      ("heavy,n", po::value(&heavy)->default_value(heavy)->value_name("N"), "heavy jobs next to the light one")
      ("elements,k", po::value(&elements)->default_value(elements)->value_name("K"), "elements of the light job")
      ("rounds,r", po::value(&rounds)->default_value(rounds)->value_name("R"),
       "burn rounds per light element (heavy elements: 10 R)")
      ("reps", po::value(&reps)->default_value(reps)->value_name("T"), "light reads alone and loaded, each")
      ("weights", po::value(&weights_text)->value_name("W,W,..."),
       "instead: one endless job per weight, each its own tenant of that weight, and each "
       "tenant's measured share of the worker's thread time (uses --rounds and --seconds)")
      ("seconds", po::value(&seconds)->default_value(seconds)->value_name("S"),
       "with --weights: the measuring window")
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
  if (seconds < 1 || seconds > 3600)
    return bad(
      invalid_argument("`--seconds` must be in [1, 3600], got " + std::to_string(seconds)));
  if (vm.count("seconds") && !vm["seconds"].defaulted() && weights_text.empty())
    return bad(invalid_argument("`--seconds` is the window of --weights: give --weights too"));
  if (!weights_text.empty()) {
    for (const char* light_only : {"heavy", "elements", "reps"})
      if (!vm[light_only].defaulted())
        return bad(invalid_argument(std::string{"`--"} + light_only +
                                    "` is for the light-job run, not with --weights"));
    auto weights = parse_weights(weights_text);
    if (!weights.ok())
      return bad(weights.status());
    return bench_weights(*weights, rounds, seconds, node_exe);
  }

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
