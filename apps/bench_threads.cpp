// `conveyor bench threads`: do a worker's threads grow with its jobs?
// A `conveyor dispatcher` and one `conveyor worker` as child processes (the worker's thread count,
// Threads: of /proc/PID/status, is what is measured) serve N endless OFF jobs at once, each with a
// parallel map and a prefetch (`range(..).map(square, P).prefetch(2)`), read by this process. The
// count is taken idle, with one job open and with all N open. Pipeline work runs on one Executor
// per process (pipeline/runtime/executor.hpp), the task actors included (worker/executor_scheduled.hpp):
// the count should not grow with N. `--node-exe` runs the nodes from another build, to compare.
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
  "bench threads", "[--jobs N] [--parallel-calls P] [--node-exe PATH]",
  "Opens N endless jobs at once (range(..).map(square, P).prefetch(2), OFF) on a `conveyor\n"
  "worker` child process and reports its thread count idle, with 1 job and with N: whether a\n"
  "worker's threads grow with its jobs and maps."};

int64_t thread_count_of(pid_t pid) { return proc_status_number(std::to_string(pid), "Threads"); }

// The count once it held still for 300 ms (threads start and leave as work comes and goes),
// within 5 s.
int64_t settled_threads(pid_t pid) {
  int64_t last = thread_count_of(pid);
  auto still_since = std::chrono::steady_clock::now();
  const auto deadline = still_since + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t now = thread_count_of(pid);
    if (now != last) {
      last = now;
      still_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - still_since >= std::chrono::milliseconds(300)) {
      break;
    }
  }
  return last;
}

int bench_threads(const std::vector<std::string>& args) {
  int64_t jobs = 32;
  int64_t parallel_calls = 4;
  std::string node_exe;
  po::options_description options("threads benchmark options");
  // clang-format off
  options.add_options()
      ("jobs,n", po::value(&jobs)->default_value(jobs)->value_name("N"), "jobs open at once")
      ("parallel-calls,p", po::value(&parallel_calls)->default_value(parallel_calls)->value_name("P"),
       "num_parallel_calls of each job's map")
      ("node-exe", po::value(&node_exe)->value_name("PATH"),
       "run the dispatcher and worker from this `conveyor` binary (default: this one)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (jobs < 2 || jobs > 256)
    return bad(invalid_argument("`--jobs` must be in [2, 256], got " + std::to_string(jobs)));
  if (parallel_calls < 1 || parallel_calls > 64)
    return bad(invalid_argument("`--parallel-calls` must be in [1, 64], got " +
                                std::to_string(parallel_calls)));

  std::vector<ChildNode> children;
  StopChildrenOnExit stop{children};
  if (Status st = start_bench_node_pair(children, "threads", node_exe); !st.ok())
    return bad(st);
  const std::string address = children.front().address;
  const pid_t worker = children.back().pid;
  auto client = Client::connect(address);
  if (!client.ok())
    return bad(client.status());
  const int64_t idle = settled_threads(worker);

  const Dataset dataset = Dataset::range(1000000000).map("square", parallel_calls).prefetch(2);
  std::vector<ElementStream> streams;
  int64_t one = -1;
  for (int64_t i = 1; i <= jobs; ++i) {
    auto stream =
      open_running_job(*client, dataset, "job " + std::to_string(i), std::chrono::seconds(20));
    if (!stream.ok())
      return bad(stream.status());
    streams.push_back(std::move(*stream));
    if (i == 1)
      one = settled_threads(worker);
  }
  const int64_t all = settled_threads(worker);
  streams.clear();
  std::printf("worker    : %s, %u hardware threads here\n",
              node_exe.empty() ? "this binary" : node_exe.c_str(),
              std::thread::hardware_concurrency());
  std::printf(
    "threads   : idle %lld, 1 job %lld, %lld jobs %lld (each job: a map with %lld parallel "
    "calls and a prefetch)\n",
    static_cast<long long>(idle), static_cast<long long>(one), static_cast<long long>(jobs),
    static_cast<long long>(all), static_cast<long long>(parallel_calls));
  std::printf("per job   : %.2f threads for each job after the first\n",
              static_cast<double>(all - one) / static_cast<double>(jobs - 1));
  return 0;
}

const Benchmark reg{"threads", "a worker's threads with N jobs open at once", bench_threads};

} // namespace
} // namespace conveyor::apps
