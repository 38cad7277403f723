// `conveyor run`: the README's one-command demo. Starts a local cluster — a dispatcher and N
// workers as child processes of this same binary (or, with --in-process, as servers inside this
// process) on 127.0.0.1 with free ports — reads a sample pipeline through it, and prints the
// topology, sample elements, progress and a throughput summary. Children are always stopped and
// reaped: on success, on failure and on Ctrl-C.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "apps/local_autoscale.hpp"
#include "apps/subcommand.hpp"
#include "conveyor/client.hpp"
#include "conveyor/server.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr CommandInfo kInfo{
  "run",
  "[--workers N] [--dataset EXPR] [--mode dynamic|off] [--take N] [--autoscale --min-workers A "
  "--max-workers B] [flags]",
  "Starts a local cluster (a dispatcher and N workers, each a child process of this binary, on\n"
  "127.0.0.1 with free ports), reads a sample pipeline through it and prints the topology, a few\n"
  "elements, progress and a throughput summary. With --autoscale the dispatcher's autoscaler\n"
  "decides the worker count and run starts and drains worker processes to follow it.\n"
  "Ctrl-C stops everything cleanly."};

// The default sample: four million squares in batches of 256 (a few seconds), read in DYNAMIC
// mode, so the workers share one epoch and every element arrives exactly once.
constexpr const char* kDefaultDataset = "range(4000000).map(square).batch(256)";

// The cluster, either as child processes or in-process servers. Stops everything on destruction.
class LocalCluster {
public:
  ~LocalCluster() { stop(); }

  // Directories the workers' datasets may read and write, and the dispatcher may list for
  // DYNAMIC file sources (--allow-path).
  std::vector<std::string> allow_paths;
  // Function plugins every worker loads (--plugin), as absolute paths.
  std::vector<std::string> plugins;

  Status start_processes(int workers, int64_t range_split_size, const std::string& log_dir,
                         const std::vector<std::string>& extra_dispatcher_flags) {
    std::vector<std::string> path_flags;
    for (const auto& dir : allow_paths) {
      path_flags.push_back("--allow-path");
      path_flags.push_back(dir);
    }
    std::vector<std::string> dispatcher_flags{"--range-split-size",
                                              std::to_string(range_split_size)};
    dispatcher_flags.insert(dispatcher_flags.end(), path_flags.begin(), path_flags.end());
    dispatcher_flags.insert(dispatcher_flags.end(), extra_dispatcher_flags.begin(),
                            extra_dispatcher_flags.end());
    worker_flags_ = path_flags;
    for (const auto& lib : plugins) {
      worker_flags_.push_back("--plugin");
      worker_flags_.push_back(lib);
    }
    // Every worker registered before the job starts, so that an OFF job produces everything N times.
    CONVEYOR_RETURN_IF_ERROR(
      start_process_cluster(children_, workers, "", dispatcher_flags, worker_flags_, log_dir));
    dispatcher_address_ = children_.front().address;
    return Status::OK();
  }

  Status start_in_process(int workers, int64_t range_split_size) {
    DispatcherConfig config;
    config.range_split_size = range_split_size;
    config.allowed_paths = allow_paths;
    dispatcher_ = std::make_unique<DispatchServer>(config);
    CONVEYOR_RETURN_IF_ERROR(dispatcher_->start());
    dispatcher_address_ = dispatcher_->target();
    for (int i = 0; i < workers; ++i) {
      WorkerConfig config;
      config.dispatcher_address = dispatcher_address_;
      config.allowed_paths = allow_paths;
      config.plugins = plugins;
      workers_.push_back(std::make_unique<WorkerServer>(config));
      CONVEYOR_RETURN_IF_ERROR(workers_.back()->start());
    }
    return Status::OK();
  }

  const std::string& dispatcher_address() const { return dispatcher_address_; }
  // The child processes (the dispatcher first), for the autoscaler to add and drain workers.
  std::vector<ChildNode>& children() { return children_; }
  const std::vector<std::string>& worker_flags() const { return worker_flags_; }

  // role, address, pid (0 in-process)
  struct NodeInfo {
    std::string role, address;
    pid_t pid;
  };
  std::vector<NodeInfo> nodes() const {
    std::vector<NodeInfo> out;
    for (const auto& c : children_)
      out.push_back({c.role, c.address, c.pid});
    if (dispatcher_)
      out.push_back({"dispatcher", dispatcher_address_, 0});
    for (std::size_t i = 0; i < workers_.size(); ++i)
      out.push_back({"worker-" + std::to_string(i + 1), workers_[i]->worker_address(), 0});
    return out;
  }

  // Nodes that exited on their own while the demo ran (a crash, a failed start).
  std::vector<std::string> died() {
    std::vector<std::string> out;
    for (auto& c : children_)
      if (check_exited(c))
        out.push_back(c.role + " (exit status " + std::to_string(c.exit_status) + ", log " +
                      c.log_path + ")");
    return out;
  }

  void stop() {
    stop_children(children_, milliseconds{5000});
    for (auto& w : workers_)
      w->stop();
    workers_.clear();
    if (dispatcher_)
      dispatcher_->stop();
    dispatcher_.reset();
  }

private:
  std::vector<ChildNode> children_;
  std::unique_ptr<DispatchServer> dispatcher_;
  std::vector<std::unique_ptr<WorkerServer>> workers_;
  std::string dispatcher_address_;
  std::vector<std::string> worker_flags_;
};

std::string human_rate(double per_second) {
  char buf[32];
  if (per_second >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", per_second / 1e6);
  else if (per_second >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", per_second / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", per_second);
  return buf;
}

struct RunFlags {
  int64_t workers = 2;
  std::string dataset_text = kDefaultDataset;
  std::string mode = "dynamic";
  int64_t take = -1;
  int64_t samples = 5;
  int64_t progress_ms = 1000;
  int64_t timeout_ms = 30000;
  int64_t range_split_size = 1024;
  bool in_process = false;
  std::string log_dir;
  std::vector<std::string> allow_paths;
  std::vector<std::string> plugins;
  bool autoscale = false;
  LocalAutoscaleConfig scale;
  int64_t step_us = 0;
};

// The --autoscale flags: refused without it (they would be ignored), checked with it; fills
// f.scale and the starting worker count.
Status check_autoscale_flags(const po::variables_map& vm, RunFlags& f, int64_t min_workers,
                             int64_t max_workers, int64_t interval_ms, int64_t cooldown_ms) {
  if (!f.autoscale) {
    for (const char* flag :
         {"min-workers", "max-workers", "autoscale-interval-ms", "scale-cooldown-ms"})
      if (!vm[flag].defaulted())
        return invalid_argument(std::string{"`--"} + flag + "` is used only with `--autoscale`");
    return Status::OK();
  }
  if (f.in_process)
    return invalid_argument("`--autoscale` starts and drains worker processes: it cannot be used "
                            "with `--in-process`");
  if (auto mode = parse_processing_mode(f.mode); mode.ok() && *mode != ShardingPolicy::dynamic)
    return invalid_argument("`--autoscale` needs `--mode dynamic` (an OFF job's output depends on "
                            "the worker count), got `--mode " +
                            f.mode + "`");
  CONVEYOR_RETURN_IF_ERROR(check_at_least("--min-workers", min_workers, 1));
  CONVEYOR_RETURN_IF_ERROR(check_at_least("--max-workers", max_workers, min_workers));
  if (max_workers > 64)
    return invalid_argument("`--max-workers` must be at most 64 on one machine, got " +
                            std::to_string(max_workers));
  auto interval = check_millis("--autoscale-interval-ms", interval_ms);
  if (!interval.ok())
    return interval.status();
  auto cooldown = check_millis("--scale-cooldown-ms", cooldown_ms, /*allow_zero=*/true);
  if (!cooldown.ok())
    return cooldown.status();
  f.scale = {min_workers, max_workers, *interval, *cooldown};
  if (vm["workers"].defaulted())
    f.workers = min_workers;
  else if (f.workers < min_workers || f.workers > max_workers)
    return invalid_argument("`--workers` (the starting count with `--autoscale`) must be within "
                            "`--min-workers` " +
                            std::to_string(min_workers) + " and `--max-workers` " +
                            std::to_string(max_workers) + ", got " + std::to_string(f.workers));
  return Status::OK();
}

int run_run(const std::vector<std::string>& args) {
  RunFlags f;
  int64_t min_workers = 1, max_workers = 4, interval_ms = 1000, cooldown_ms = 3000;
  po::options_description options("run options");
  // clang-format off
  options.add_options()
      ("workers,w", po::value(&f.workers)->default_value(2)->value_name("N"), "number of worker processes")
      ("dataset", po::value(&f.dataset_text)->default_value(kDefaultDataset)->value_name("EXPR"),
       "the pipeline to serve, in the pipeline text form")
      ("mode,m", po::value(&f.mode)->default_value("dynamic")->value_name("MODE"),
       "dynamic (each element once across the workers) or off (every worker produces everything)")
      ("take", po::value(&f.take)->default_value(-1)->value_name("N"), "stop after N elements (-1 = all)")
      ("samples", po::value(&f.samples)->default_value(5)->value_name("K"), "print the first K elements")
      ("progress-ms", po::value(&f.progress_ms)->default_value(1000)->value_name("MS"),
       "print progress every MS milliseconds")
      ("timeout-ms", po::value(&f.timeout_ms)->default_value(30000)->value_name("T"),
       "fail when no element arrives for T milliseconds")
      ("range-split-size", po::value(&f.range_split_size)->default_value(1024)->value_name("N"),
       "elements per DYNAMIC split of a range source (each split costs the worker one round trip "
       "to the dispatcher)")
      ("in-process", po::bool_switch(&f.in_process),
       "run the dispatcher and workers as servers inside this process instead of child processes")
      ("allow-path", po::value(&f.allow_paths)->composing()->value_name("DIR"),
       "directory the dataset may read and write files under (repeatable; default: the current "
       "directory)")
      ("plugin", po::value(&f.plugins)->composing()->value_name("LIB.so"),
       "load dataset functions from a plugin, here and in every worker (repeatable)")
      ("log-dir", po::value(&f.log_dir)->value_name("DIR"),
       "where the child nodes write their logs (default: a new /tmp/conveyor-run-* directory)")
      ("max-outstanding", po::value<int64_t>()->value_name("M"),
       "at most M elements requested ahead (default: automatic)")
      ("step-us", po::value(&f.step_us)->default_value(0)->value_name("US"),
       "the reader's time per element before it takes the next, as a trainer's step (0 = read as "
       "fast as possible)")
      ("autoscale", po::bool_switch(&f.autoscale),
       "let the dispatcher's autoscaler decide the worker count: run starts worker processes and "
       "drains them (SIGTERM) to follow it; starts with --workers when given, else --min-workers")
      ("min-workers", po::value(&min_workers)->default_value(1)->value_name("A"),
       "with --autoscale: never fewer workers")
      ("max-workers", po::value(&max_workers)->default_value(4)->value_name("B"),
       "with --autoscale: never more workers (at most 64)")
      ("autoscale-interval-ms", po::value(&interval_ms)->default_value(1000)->value_name("MS"),
       "with --autoscale: how often the dispatcher observes the job and decides")
      ("scale-cooldown-ms", po::value(&cooldown_ms)->default_value(3000)->value_name("MS"),
       "with --autoscale: how long the dispatcher waits after a change before deciding again");
  // clang-format on
  add_log_level_option(options, "warning");
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  if (auto st = apply_log_level(vm); !st.ok())
    return report_status(kInfo.name, st);

  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = check_autoscale_flags(vm, f, min_workers, max_workers, interval_ms, cooldown_ms);
      !st.ok())
    return bad(st);
  if (auto st = check_at_least("--workers", f.workers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--step-us", f.step_us, 0); !st.ok())
    return bad(st);
  if (f.workers > 64)
    return bad(invalid_argument("`--workers` must be at most 64 on one machine, got " +
                                std::to_string(f.workers)));
  // Loaded first: the dataset is checked against the plugins' functions before any node starts.
  if (auto st = load_plugin_flags(vm); !st.ok())
    return bad(st);
  auto dataset = parse_dataset(f.dataset_text);
  if (!dataset.ok())
    return bad(Status(dataset.status().code(), "`--dataset`: " + dataset.status().message()));
  if (auto st = dataset->validate(); !st.ok())
    return bad(Status(st.code(), "`--dataset`: " + st.message()));
  DistributeOptions opts;
  auto policy = parse_processing_mode(f.mode);
  if (!policy.ok())
    return bad(Status(policy.status().code(), "`--mode`: " + policy.status().message()));
  opts.policy = *policy;
  if (vm.count("max-outstanding")) {
    const int64_t m = vm["max-outstanding"].as<int64_t>();
    if (auto st = check_at_least("--max-outstanding", m, 1); !st.ok())
      return bad(st);
    opts.max_outstanding_requests = m;
  }
  if (auto st = validate(opts); !st.ok())
    return bad(Status(st.code(), "`--mode`: " + st.message()));
  if (f.take < -1)
    return bad(
      invalid_argument("`--take` must be -1 (all) or at least 0, got " + std::to_string(f.take)));
  if (auto st = check_at_least("--samples", f.samples, 0); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--range-split-size", f.range_split_size, 1); !st.ok())
    return bad(st);
  auto progress_every = check_millis("--progress-ms", f.progress_ms);
  if (!progress_every.ok())
    return bad(progress_every.status());
  auto timeout = check_millis("--timeout-ms", f.timeout_ms);
  if (!timeout.ok())
    return bad(timeout.status());

  install_stop_signals();
  LocalCluster cluster;
  cluster.allow_paths = f.allow_paths;
  for (const auto& lib : f.plugins)
    cluster.plugins.push_back(std::filesystem::absolute(lib).string());
  if (cluster.allow_paths
        .empty()) { // the dataset on this command line may use the current directory
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd))
      cluster.allow_paths.push_back(cwd);
  }
  Status started;
  if (f.in_process) {
    started = cluster.start_in_process(static_cast<int>(f.workers), f.range_split_size);
  } else {
    if (f.log_dir.empty()) {
      char tmpl[] = "/tmp/conveyor-run-XXXXXX";
      if (!::mkdtemp(tmpl))
        return report_error(kInfo.name, "cannot create a log directory in /tmp", kExitFailure);
      f.log_dir = tmpl;
    } else if (::access(f.log_dir.c_str(), W_OK) != 0) {
      return bad(invalid_argument("`--log-dir` \"" + f.log_dir + "\" is not a writable directory"));
    }
    if (f.autoscale) // a target left in a reused --log-dir by an earlier run is not this one's
      ::unlink((f.log_dir + "/scale-target").c_str());
    started = cluster.start_processes(
      static_cast<int>(f.workers), f.range_split_size, f.log_dir,
      f.autoscale ? autoscale_dispatcher_flags(f.scale, f.log_dir + "/scale-target")
                  : std::vector<std::string>{});
  }
  if (!started.ok()) {
    cluster.stop();
    if (stop_requested())
      return 130;
    return report_error(kInfo.name, "cannot start the local cluster: " + started.to_string(),
                        kExitFailure);
  }

  std::printf("conveyor run: local cluster on 127.0.0.1%s\n",
              f.in_process ? " (in-process servers)" : "");
  for (const auto& n : cluster.nodes()) {
    if (n.pid > 0)
      std::printf("  %-11s %-22s pid %d\n", n.role.c_str(), n.address.c_str(),
                  static_cast<int>(n.pid));
    else
      std::printf("  %-11s %s\n", n.role.c_str(), n.address.c_str());
  }
  if (!f.in_process)
    std::printf("  logs        %s\n", f.log_dir.c_str());
  const int64_t cardinality = dataset->cardinality();
  std::printf("dataset: %s\nmode:    %s", dataset->to_text().c_str(), to_string(opts.policy));
  if (cardinality >= 0) {
    const int64_t expect =
      opts.policy == ShardingPolicy::off ? cardinality * f.workers : cardinality;
    std::printf(" (expecting %lld elements: %s)", static_cast<long long>(expect),
                opts.policy == ShardingPolicy::off ? "every worker produces the whole dataset"
                                                   : "each element once across the workers");
  }
  std::printf("\n");
  std::fflush(stdout);

  auto client = Client::connect(cluster.dispatcher_address());
  if (!client.ok())
    return report_error(kInfo.name, "cannot connect: " + client.status().to_string(), kExitFailure);
  auto stream = client->distribute(*dataset, opts);
  if (!stream.ok())
    return report_status(kInfo.name, stream.status());

  const auto start = Clock::now();
  std::optional<LocalAutoscaler> scaler;
  std::size_t events_shown = 0;
  if (f.autoscale) {
    scaler.emplace(cluster.children(), self_executable(), cluster.dispatcher_address(),
                   cluster.worker_flags(), f.log_dir, f.log_dir + "/scale-target");
    scaler->start();
    std::printf("autoscale: %lld worker(s), bounds %lld..%lld; the dispatcher decides every %lld "
                "ms (cooldown %lld ms)\n",
                static_cast<long long>(f.workers), static_cast<long long>(f.scale.min_workers),
                static_cast<long long>(f.scale.max_workers),
                static_cast<long long>(f.scale.interval.count()),
                static_cast<long long>(f.scale.cooldown.count()));
  }
  auto last_poll = start;
  auto last_progress = start;
  auto last_element = start;
  int64_t count = 0, payload_bytes = 0;
  Status failure;
  std::printf("first elements:\n");
  while ((f.take < 0 || count < f.take) && !stop_requested()) {
    Element e;
    bool end = false;
    Status st = stream->next(e, end, milliseconds{50});
    const auto now = Clock::now();
    if (st.code() == ErrorCode::deadline_exceeded) {
      if (now - last_element >= *timeout) {
        failure = Status(ErrorCode::deadline_exceeded,
                         "no element within " + std::to_string(f.timeout_ms) + " ms");
        break;
      }
    } else if (!st.ok()) {
      failure = st;
      break;
    } else if (end) {
      break;
    } else {
      last_element = now;
      ++count;
      payload_bytes += static_cast<int64_t>(e.byte_size());
      if (count <= f.samples) {
        std::string text = e.to_string();
        if (text.size() > 100)
          text = text.substr(0, 97) + "...";
        std::printf("  %s\n", text.c_str());
      }
      if (f.step_us > 0)
        std::this_thread::sleep_for(std::chrono::microseconds{f.step_us});
    }
    if (scaler && now - last_poll >= milliseconds{100}) {
      last_poll = now;
      scaler->poll();
      for (; events_shown < scaler->events().size(); ++events_shown) {
        const auto& ev = scaler->events()[events_shown];
        std::printf("autoscale: %lld -> %lld workers at %.1f s (%s)\n",
                    static_cast<long long>(ev.from), static_cast<long long>(ev.to), ev.at_s,
                    ev.detail.c_str());
      }
      std::fflush(stdout);
    }
    if (now - last_progress >= *progress_every) {
      const double secs = std::chrono::duration<double>(now - start).count();
      std::printf("progress: %lld elements, %s elements/s, %.1f MB/s\n",
                  static_cast<long long>(count), human_rate(count / secs).c_str(),
                  payload_bytes / secs / 1e6);
      std::fflush(stdout);
      last_progress = now;
    }
  }
  const double secs = std::max(1e-9, std::chrono::duration<double>(Clock::now() - start).count());
  const StreamStats stats = stream->stats();
  std::printf(
    "summary: %lld elements (%.1f MB of tensor data) in %.2f s: %s elements/s, %.1f MB/s\n",
    static_cast<long long>(count), payload_bytes / 1e6, secs, human_rate(count / secs).c_str(),
    payload_bytes / secs / 1e6);
  std::printf("  wire: %.1f MB in %lld messages (%.1f elements per message)\n", stats.bytes / 1e6,
              static_cast<long long>(stats.messages),
              stats.messages > 0 ? static_cast<double>(stats.elements) / stats.messages : 0.0);
  for (const auto& [worker, n] : stats.per_worker) {
    std::string role = worker;
    for (const auto& node : cluster.nodes())
      if (node.address == worker)
        role = node.role + " (" + worker + ")";
    if (scaler)
      for (const auto& node : scaler->drained())
        if (node.address == worker)
          role = node.role + " (" + worker + ", drained)";
    std::printf("  %s: %lld elements\n", role.c_str(), static_cast<long long>(n));
  }
  std::fflush(stdout);

  // Leave the job before the cluster goes away.
  { ElementStream done = std::move(stream).value(); }
  auto died = cluster.died();
  if (scaler) {
    std::printf("  autoscale: %zu change(s), %lld worker(s) at the end\n", scaler->events().size(),
                static_cast<long long>(scaler->live_workers()));
    scaler->stop(milliseconds{35000}); // past the workers' 30 s --drain-timeout
    for (auto& d : scaler->failures())
      died.push_back(d);
  }
  cluster.stop();
  std::printf("cluster stopped\n");
  if (stop_requested()) { // a terminal's Ctrl-C also reached the nodes: their exits are expected
    std::printf("interrupted\n");
    return 130;
  }
  for (const auto& d : died)
    std::fprintf(stderr, "run: %s stopped during the run\n", d.c_str());
  if (!failure.ok())
    return report_error(kInfo.name,
                        "reading failed after " + std::to_string(count) +
                          " elements: " + failure.to_string(),
                        kExitFailure);
  return died.empty() ? kExitOk : kExitFailure;
}

const Subcommand reg{"run", "start a local cluster and read a sample pipeline through it (demo)",
                     run_run};

} // namespace
} // namespace conveyor::apps
