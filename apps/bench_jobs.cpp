// `conveyor bench jobs`: does a dispatcher hold on to memory for jobs that are over?
// A `conveyor dispatcher` child process (its RSS is what is measured) and one in-process worker
// serve N short private jobs, one after the other, each read to its end by this process
// (range(10), OFF). The dispatcher's RSS (VmRSS of /proc/PID/status) and the number of jobs it
// still lists (`conveyor status`) are taken after the first `--baseline` jobs and after all N.
// A dispatcher that erases finished jobs shows no growth beyond the jobs it still holds.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "consumer/status_client.hpp"
#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "conveyor/client.hpp"
#include "conveyor/server.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench jobs", "[--jobs N] [--baseline M]",
  "Runs N short jobs (range(10), OFF, one at a time) against a `conveyor dispatcher` child\n"
  "process and reports its RSS and the jobs it still lists after M jobs and after N: what a\n"
  "dispatcher keeps of jobs that are over."};

// Resident set size in bytes, from /proc/PID/status (-1 when unknown).
int64_t rss_bytes(pid_t pid) {
  const int64_t kib = proc_status_number(std::to_string(pid), "VmRSS");
  return kib < 0 ? -1 : kib * 1024;
}

struct Sample {
  int64_t jobs_run = 0;
  int64_t rss = 0;
  int64_t jobs_listed = 0;
};

// Waits (up to 5 s) until the dispatcher released every job it ran, then samples. (It waited
// for an empty job list, which never came: the last finished jobs stay listed.)
Expected<Sample> sample(pid_t dispatcher, const std::string& address, int64_t run) {
  Sample s;
  s.jobs_run = run;
  auto status = actors::fetch_status_when_jobs_finished(address, std::chrono::milliseconds(5000),
                                                        std::chrono::seconds(5));
  if (!status.ok())
    return status.status();
  s.jobs_listed = static_cast<int64_t>(status->jobs.size());
  s.rss = rss_bytes(dispatcher);
  return s;
}

int bench_jobs(const std::vector<std::string>& args) {
  int64_t jobs = 10000;
  int64_t baseline = 100;
  po::options_description options("jobs benchmark options");
  // clang-format off
  options.add_options()
      ("jobs,n", po::value(&jobs)->default_value(jobs)->value_name("N"), "jobs to run in all")
      ("baseline", po::value(&baseline)->default_value(baseline)->value_name("M"),
       "jobs after which the first sample is taken");
  // clang-format on
  po::variables_map vm; // (the log level: this process's worker and client)
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (baseline < 1 || jobs <= baseline || jobs > 1000000)
    return bad(invalid_argument("need 1 <= `--baseline` < `--jobs` <= 1000000, got --baseline " +
                                std::to_string(baseline) + " --jobs " + std::to_string(jobs)));

  // The dispatcher is its own process (its RSS alone is measured), stopped however this ends.
  std::vector<ChildNode> children;
  StopChildrenOnExit stop{children};
  const auto log_dir = std::filesystem::temp_directory_path().string();
  auto child = start_child(self_executable(), "bench-jobs-dispatcher-" + std::to_string(::getpid()),
                           {"dispatcher", "--port", "0", "--host", "127.0.0.1"}, log_dir);
  if (!child.ok())
    return bad(child.status());
  children.push_back(std::move(child).value());
  if (Status st = wait_ready(children.back(), "listening on", std::chrono::milliseconds{15000});
      !st.ok())
    return bad(st);
  const pid_t dispatcher = children.back().pid;
  const std::string address = children.back().address;
  WorkerConfig wc;
  wc.dispatcher_address = address;
  WorkerServer worker{wc};
  if (Status st = worker.start(); !st.ok())
    return bad(st);
  auto client = Client::connect(address);
  if (!client.ok())
    return bad(client.status());
  auto id = client->register_dataset(Dataset::range(10));
  if (!id.ok())
    return bad(id.status());
  DistributeOptions off;
  off.policy = ShardingPolicy::off;

  std::optional<Sample> first;
  auto t0 = Clock::now();
  for (int64_t i = 1; i <= jobs; ++i) {
    auto stream = client->from_dataset_id(*id, off);
    if (!stream.ok())
      return bad(stream.status().with_context("job " + std::to_string(i)));
    int64_t n = 0;
    for (const Element& e : *stream) {
      (void)e;
      ++n;
    }
    if (!stream->status().ok())
      return bad(stream->status().with_context("job " + std::to_string(i)));
    if (n != 10)
      return bad(data_loss("job " + std::to_string(i) + " delivered " + std::to_string(n) +
                           " of 10 elements"));
    if (i == baseline) {
      auto s = sample(dispatcher, address, i);
      if (!s.ok())
        return bad(s.status());
      first = *s;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  auto last = sample(dispatcher, address, jobs);
  if (!last.ok())
    return bad(last.status());
  const double per_job = static_cast<double>(last->rss - first->rss) /
                         static_cast<double>(last->jobs_run - first->jobs_run);
  std::printf("jobs      : %lld in %.1f s (%.0f jobs/s), each range(10) OFF read to its end\n",
              static_cast<long long>(jobs), seconds, static_cast<double>(jobs) / seconds);
  for (const Sample* s : {&*first, &*last})
    std::printf("after %-6lld: dispatcher RSS %.1f MiB, jobs it still lists %lld\n",
                static_cast<long long>(s->jobs_run), static_cast<double>(s->rss) / (1 << 20),
                static_cast<long long>(s->jobs_listed));
  std::printf("growth    : %.0f bytes of dispatcher RSS per job after the first %lld\n", per_job,
              static_cast<long long>(baseline));
  return 0;
}

const Benchmark reg{"jobs", "dispatcher memory after many short jobs (RSS, jobs still held)",
                    bench_jobs};

} // namespace
} // namespace conveyor::apps
