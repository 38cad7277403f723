// `conveyor dispatcher`: runs one DispatchServer until SIGINT/SIGTERM.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/cli_common.hpp"
#include "apps/http_flags.hpp"
#include "apps/subcommand.hpp"
#include "node/log.hpp"
#include "pipeline/runtime/tenant.hpp"
#include "conveyor/server.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "dispatcher", "--port PORT [--host HOST] [--work-dir DIR] [flags]",
  "Runs the dispatcher of a conveyor cluster: it keeps the registered datasets, the jobs and the\n"
  "workers, and tells consumers which workers serve their job. Prints `listening on HOST:PORT`\n"
  "once it accepts connections; stops cleanly on Ctrl-C or SIGTERM."};

int run_dispatcher(const std::vector<std::string>& args) {
  int64_t port = -1;
  int64_t worker_timeout_ms = 0;
  int64_t job_gc_timeout_ms = 0;
  int64_t client_timeout_ms = 0;
  int64_t range_split_size = 0;
  int64_t autoscale_interval_ms = 0;
  int64_t scale_cooldown_ms = 0;
  DispatcherConfig defaults;
  po::options_description options("dispatcher options");
  // clang-format off
  options.add_options()
      ("port,p", po::value(&port)->required()->value_name("PORT"),
       "TCP port to listen on (0 = pick a free one; the chosen port is printed)")
      ("host", po::value<std::string>()->default_value(defaults.bind_host)->value_name("HOST"),
       "address to bind")
      ("work-dir", po::value<std::string>()->default_value("")->value_name("DIR"),
       "directory for the dispatcher's journal: every state change is made durable there "
       "first, and a dispatcher restarted on the same directory carries on (datasets, jobs, "
       "tasks, split positions). Without it the state is in memory only")
      ("journal-recover", po::bool_switch(),
       "when the journal in --work-dir is damaged (anything but an incomplete last record, "
       "which is always cut off), move the damaged segment aside (renamed *.damaged-<time>) and "
       "start from its longest valid prefix, logging what was dropped. Without it such damage "
       "stops the dispatcher and changes no file")
      ("worker-timeout", po::value(&worker_timeout_ms)->default_value(defaults.worker_timeout.count())->value_name("MS"),
       "remove a worker after this long without a heartbeat")
      ("job-gc-timeout", po::value(&job_gc_timeout_ms)->default_value(defaults.job_gc_timeout.count())->value_name("MS"),
       "release a named job after this long once its consumers all left unfinished")
      ("client-timeout", po::value(&client_timeout_ms)->default_value(defaults.client_timeout.count())->value_name("MS"),
       "drop a consumer from its job after this long without a heartbeat (task-list poll)")
      ("range-split-size", po::value(&range_split_size)->default_value(defaults.range_split_size)->value_name("N"),
       "smallest number of elements per split of range/from_tensor_slices sources in DYNAMIC "
       "mode: a job of known cardinality takes about 8 splits per worker and epoch, between N "
       "and max(N, 8192) elements each")
      ("allow-path", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "directory under which the file patterns of DYNAMIC file sources (text_lines, tfrecord, "
       "list_files) and FILE sharding may be listed on this host (repeatable; links and `..` "
       "resolved). Without it such jobs are refused")
      ("snapshot-reuse", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "read a registered dataset from a finished snapshot (conveyor save) of the same\n"
       "fingerprint in DIR or one of its subdirectories instead of running it (repeatable;\n"
       "DIR must lie under --allow-path, and under the workers' too)")
      ("worker-addresses", po::value<std::vector<std::string>>()->multitoken()->value_name("HOST:PORT,..."),
       "the fixed worker list (advertised addresses, comma-separated or repeated) that the static "
       "sharding policies FILE/DATA/FILE_OR_DATA/HINT need; workers not in it are refused. "
       "HOST:%port% matches one worker of HOST on any port (tf.data's template)")
      ("autoscale-interval-ms", po::value(&autoscale_interval_ms)->default_value(defaults.autoscale_interval.count())->value_name("MS"),
       "how often the worker estimate (conveyor_desired_workers, `conveyor status`) is made, and "
       "the autoscaler decides with --scale-command")
      ("scale-command", po::value<std::string>()->value_name("'CMD {n}'"),
       "autoscale: run CMD through /bin/sh with {n} replaced by the worker count whenever the "
       "autoscaler's target changes (e.g. 'kubectl scale deployment/conveyor-worker "
       "--replicas={n}'); failures are logged and counted, never fatal")
      ("min-workers", po::value<int64_t>()->default_value(defaults.min_workers)->value_name("N"),
       "with --scale-command: never scale below N workers")
      ("max-workers", po::value<int64_t>()->default_value(defaults.max_workers)->value_name("N"),
       "with --scale-command: never scale above N workers")
      ("scale-cooldown-ms", po::value(&scale_cooldown_ms)->default_value(defaults.scale_cooldown.count())->value_name("MS"),
       "with --scale-command: wait this long after a change before deciding again")
      ("tenant-max-workers", po::value<std::string>()->value_name("TENANT=N,..."),
       "cap the workers a tenant's jobs may have tasks on together (N >= 1); its other workers "
       "serve other tenants. Tenants not named have no cap")
      ("tenant-max-buffer-bytes", po::value<std::string>()->value_name("TENANT=BYTES,..."),
       "cap the bytes a tenant's tasks may buffer on each worker together (BYTES >= 1); at the "
       "cap they stop producing until consumers take some (backpressure: nothing is dropped)");
  // clang-format on
  po::options_description hidden;
  // clang-format off
  hidden.add_options()("protocol-version", po::value<uint32_t>()->default_value(0),
                       "speak another protocol version (tests of the version check)")
                      ("journal-compact-after", po::value<int64_t>()->default_value(0),
                       "records after which the journal is folded into a snapshot (tests)");
  // clang-format on
  add_allow_url_option(options, "that DYNAMIC and FILE-sharded jobs may name (checked when the "
                                "job is made; the workers check again when they read)");
  add_metrics_options(options);
  add_guard_options(options);
  add_security_options(options);
  add_scheduler_option(options);
  add_log_level_option(options, "info");
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm, &hidden))
    return *stop;
  if (auto st = apply_log_level(vm); !st.ok())
    return report_status(kInfo.name, st);

  DispatcherConfig config;
  const auto port_ok = check_port("--port", port);
  if (!port_ok.ok())
    return report_status(kInfo.name, port_ok.status());
  config.port = *port_ok;
  config.bind_host = vm["host"].as<std::string>();
  config.work_dir = vm["work-dir"].as<std::string>();
  config.protocol_version = vm["protocol-version"].as<uint32_t>();
  config.journal_compact_after = vm["journal-compact-after"].as<int64_t>();
  config.journal_recover = vm["journal-recover"].as<bool>();
  if (config.journal_recover && config.work_dir.empty())
    return report_status(kInfo.name, invalid_argument("--journal-recover needs --work-dir (the "
                                                      "journal it would recover)"));
  if (config.journal_compact_after < 0 ||
      (config.journal_compact_after > 0 && config.work_dir.empty()))
    return report_status(kInfo.name,
                         invalid_argument("--journal-compact-after needs --work-dir and a "
                                          "positive count"));
  if (auto st = check_host("--host", config.bind_host); !st.ok())
    return report_status(kInfo.name, st);
  auto worker_timeout = check_millis("--worker-timeout", worker_timeout_ms);
  if (!worker_timeout.ok())
    return report_status(kInfo.name, worker_timeout.status());
  auto job_gc_timeout = check_millis("--job-gc-timeout", job_gc_timeout_ms);
  if (!job_gc_timeout.ok())
    return report_status(kInfo.name, job_gc_timeout.status());
  auto client_timeout = check_millis("--client-timeout", client_timeout_ms);
  if (!client_timeout.ok())
    return report_status(kInfo.name, client_timeout.status());
  config.client_timeout = *client_timeout;
  if (auto st = check_at_least("--range-split-size", range_split_size, 1); !st.ok())
    return report_status(kInfo.name, st);
  config.worker_timeout = *worker_timeout;
  config.job_gc_timeout = *job_gc_timeout;
  config.range_split_size = range_split_size;
  auto autoscale_interval = check_millis("--autoscale-interval-ms", autoscale_interval_ms);
  if (!autoscale_interval.ok())
    return report_status(kInfo.name, autoscale_interval.status());
  config.autoscale_interval = *autoscale_interval;
  if (vm.count("scale-command")) {
    config.scale_command = vm["scale-command"].as<std::string>();
    config.min_workers = vm["min-workers"].as<int64_t>();
    config.max_workers = vm["max-workers"].as<int64_t>();
    if (auto st = check_at_least("--scale-cooldown-ms", scale_cooldown_ms, 0); !st.ok())
      return report_status(kInfo.name, st);
    config.scale_cooldown = std::chrono::milliseconds{scale_cooldown_ms};
  } else {
    // Bounds without an actuator would be accepted and never used.
    for (const char* flag : {"min-workers", "max-workers", "scale-cooldown-ms"})
      if (!vm[flag].defaulted())
        return report_status(kInfo.name, invalid_argument(std::string{"`--"} + flag +
                                                          "` is used only with `--scale-command`"));
  }
  for (auto [flag, caps] : {std::pair{"tenant-max-workers", &config.tenant_max_workers},
                            std::pair{"tenant-max-buffer-bytes", &config.tenant_max_buffer_bytes}})
    if (vm.count(flag)) {
      auto parsed = parse_tenant_caps(vm[flag].as<std::string>(), std::string{"--"} + flag);
      if (!parsed.ok())
        return report_status(kInfo.name, parsed.status());
      *caps = std::move(parsed).value();
    }
  if (vm.count("allow-path"))
    config.allowed_paths = vm["allow-path"].as<std::vector<std::string>>();
  if (vm.count("snapshot-reuse"))
    config.snapshot_reuse = vm["snapshot-reuse"].as<std::vector<std::string>>();
  if (auto st = apply_allow_url_option(vm, config.allowed_paths); !st.ok())
    return report_status(kInfo.name, st);
  if (vm.count("worker-addresses"))
    for (const auto& arg : vm["worker-addresses"].as<std::vector<std::string>>())
      for (std::size_t b = 0; b <= arg.size();) {
        auto e = std::min(arg.find(',', b), arg.size());
        if (e > b)
          config.worker_addresses.push_back(arg.substr(b, e - b));
        b = e + 1;
      }
  if (auto st = apply_security_options(vm, config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_scheduler_option(vm, config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_guard_options(vm, config.guard, config.network); !st.ok())
    return report_status(kInfo.name, st);

  if (auto st = apply_metrics_options(vm, config.metrics_port, config.metrics_host); !st.ok())
    return report_status(kInfo.name, st);
  install_stop_signals();
  DispatchServer server{config};
  if (auto st = server.start(); !st.ok())
    return report_error(kInfo.name, "cannot start: " + st.to_string(), exit_code_for(st));
  wait_for_stop_signal();
  log::info("dispatcher", "stopping");
  server.stop();
  return kExitOk;
}

const Subcommand reg{"dispatcher", "run a dispatcher (datasets, jobs, workers)", run_dispatcher};

} // namespace
} // namespace conveyor::apps
