// `conveyor worker`: runs one WorkerServer until SIGINT/SIGTERM.
#include <cstdio>

#include "apps/cli_common.hpp"
#include "apps/http_flags.hpp"
#include "apps/subcommand.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "conveyor/server.hpp"
#ifdef CONVEYOR_PYTHON_FUNCTIONS
#include "pipeline/functions/python/embedded_python.hpp"
#endif

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "worker",
  "--dispatcher HOST:PORT --port PORT [--advertise HOST:PORT] [--plugin LIB.so ...] [flags]",
  "Runs a conveyor worker: it registers with the dispatcher, runs a task for every job, and "
  "serves\n"
  "the elements straight to the consumers. Prints `listening on HOST:PORT` once it serves;\n"
  "stops cleanly on Ctrl-C or SIGTERM."};

int run_worker(const std::vector<std::string>& args) {
  int64_t port = -1;
  int64_t heartbeat_ms = 0;
  int64_t drain_timeout_ms = 30000;
  int64_t buffer_elements = 0;
  int64_t buffer_bytes = 0;
  int64_t connect_timeout_ms = 0;
  int64_t job_memory_limit = 0;
  int64_t memory_limit = 0;
  int64_t dispatcher_timeout_ms = 0;
  int64_t cache_bytes = 0;
  int64_t max_snapshots = 0;
  WorkerConfig defaults;
  po::options_description options("worker options");
  // clang-format off
  options.add_options()
      ("dispatcher,d", po::value<std::string>()->required()->value_name("HOST:PORT"),
       "address of the dispatcher")
      ("port,p", po::value(&port)->required()->value_name("PORT"),
       "TCP port to serve consumers on (0 = pick a free one; the chosen port is printed)")
      ("bulk-port", po::value<int64_t>()->default_value(0)->value_name("PORT"),
       "TCP port of the bulk data path (large elements, consumer <- worker) on --host; 0 = a "
       "free one. Pin it when a firewall or container spec must name the worker's ports; a "
       "pinned port that cannot be opened fails start-up")
      ("host", po::value<std::string>()->default_value(defaults.bind_host)->value_name("HOST"),
       "address to bind")
      ("advertise", po::value<std::string>()->default_value("")->value_name("HOST:PORT"),
       "address consumers should use to reach this worker, if it differs from the bound one "
       "(\"%port%\" stands for the bound port)")
      ("heartbeat-interval", po::value(&heartbeat_ms)->default_value(defaults.heartbeat_interval.count())->value_name("MS"),
       "how often to send the dispatcher a heartbeat")
      ("plugin", po::value<std::vector<std::string>>()->composing()->value_name("LIB.so"),
       "shared library with more dataset functions (repeatable)")
      ("python-path", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "put DIR in front of sys.path for the modules of Python functions (repeatable)")
      ("allow-path", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "directory datasets may read and write files under (text_lines, tfrecord, list_files, "
       "cache; repeatable; links and `..` resolved). Without it datasets may not touch files")
      ("buffer-elements", po::value(&buffer_elements)->default_value(defaults.task_buffer_elements)->value_name("N"),
       "elements each task buffers ahead of its consumers")
      ("buffer-bytes", po::value(&buffer_bytes)->default_value(defaults.task_buffer_bytes)->value_name("BYTES"),
       "bytes each task buffers ahead of its consumers")
      ("drain-timeout", po::value(&drain_timeout_ms)->default_value(30000)->value_name("MS"),
       "on SIGTERM/Ctrl-C, wait at most this long for started work to be delivered (0 = do not "
       "wait)")
      ("job-memory-limit", po::value(&job_memory_limit)->default_value(0)->value_name("BYTES"),
       "memory budget of each job's pipeline on this worker (task buffer, shuffle buffers, "
       "batches, memory caches); a job passing it fails with resource_exhausted at its consumers "
       "(0 = none)")
      ("memory-limit", po::value(&memory_limit)->default_value(0)->value_name("BYTES"),
       "memory budget of all jobs' pipelines on this worker together, counted like "
       "--job-memory-limit: a backstop for many jobs at once; the job whose charge passes it fails "
       "with resource_exhausted (0 = none)")
      ("worker-max-concurrent-snapshots", po::value(&max_snapshots)->default_value(0)->value_name("N"),
       "distributed snapshots (`conveyor save --dispatcher`): write at most N snapshot streams at "
       "once, one per snapshot (0 = no limit)")
      ("connect-timeout", po::value(&connect_timeout_ms)->default_value(defaults.connect_timeout.count())->value_name("MS"),
       "limit of one attempt to connect to the dispatcher (retried with backoff within it)")
      ("worker-tags", po::value<std::vector<std::string>>()->composing()->value_name("TAG,..."),
       "tags announced to the dispatcher (shown by `conveyor status`; repeatable or comma-"
       "separated). COLOCATED marks a worker beside a trainer: consumers reading with "
       "--target-workers AUTO in other processes leave it to its own trainer")
      ("cross-trainer-cache-size-bytes", po::value(&cache_bytes)->default_value(defaults.cross_trainer_cache_size_bytes)->value_name("BYTES"),
       "bytes each task of a job read with the cross-trainer cache keeps for its trainers; a "
       "trainer that falls further behind skips ahead")
      ("dispatcher-timeout", po::value(&dispatcher_timeout_ms)->default_value(defaults.dispatcher_timeout.count())->value_name("MS"),
       "how long to wait for a dispatcher that is not up yet before giving up (a worker may "
       "start before its dispatcher)");
  // clang-format on
  po::options_description hidden;
  // clang-format off
  hidden.add_options()("protocol-version", po::value<uint32_t>()->default_value(0),
                       "speak another protocol version (tests of the version check)");
  // clang-format on
  add_allow_url_option(options, "datasets may read objects under (text_lines, tfrecord, csv)");
  add_http_client_options(options);
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

  WorkerConfig config;
  auto dispatcher = parse_address_flag("--dispatcher", vm["dispatcher"].as<std::string>());
  if (!dispatcher.ok())
    return report_status(kInfo.name, dispatcher.status());
  config.dispatcher_address = dispatcher->to_string();
  auto port_ok = check_port("--port", port);
  if (!port_ok.ok())
    return report_status(kInfo.name, port_ok.status());
  config.port = *port_ok;
  auto bulk_port = check_port("--bulk-port", vm["bulk-port"].as<int64_t>());
  if (!bulk_port.ok())
    return report_status(kInfo.name, bulk_port.status());
  config.bulk_port = *bulk_port;
  if (config.bulk_port != 0 && config.bulk_port == config.port)
    return report_status(kInfo.name, invalid_argument("`--bulk-port` must differ from `--port` (" +
                                                      std::to_string(config.port) + ")"));
  config.bind_host = vm["host"].as<std::string>();
  if (auto st = check_host("--host", config.bind_host); !st.ok())
    return report_status(kInfo.name, st);
  config.advertised_address = vm["advertise"].as<std::string>();
  if ((config.bind_host == "0.0.0.0" || config.bind_host == "::" || config.bind_host == "[::]") &&
      config.advertised_address.empty())
    return report_status(
      kInfo.name, invalid_argument("`--host " + config.bind_host +
                                   "` binds every interface, so the worker cannot tell "
                                   "consumers where to reach it: give `--advertise HOST:PORT` "
                                   "(\"%port%\" stands for the bound port), or bind a "
                                   "concrete `--host`"));
  if (!config.advertised_address.empty()) {
    // "%port%" is only known after binding; check the rest with a placeholder port.
    std::string probe = config.advertised_address;
    if (auto at = probe.find("%port%"); at != std::string::npos)
      probe.replace(at, 6, "1");
    if (auto st = parse_address_flag("--advertise", probe); !st.ok())
      return report_status(kInfo.name, st.status());
  }
  auto heartbeat = check_millis("--heartbeat-interval", heartbeat_ms);
  if (!heartbeat.ok())
    return report_status(kInfo.name, heartbeat.status());
  config.heartbeat_interval = *heartbeat;
  auto connect_timeout = check_millis("--connect-timeout", connect_timeout_ms);
  if (!connect_timeout.ok())
    return report_status(kInfo.name, connect_timeout.status());
  config.connect_timeout = *connect_timeout;
  auto dispatcher_timeout = check_millis("--dispatcher-timeout", dispatcher_timeout_ms);
  if (!dispatcher_timeout.ok())
    return report_status(kInfo.name, dispatcher_timeout.status());
  config.dispatcher_timeout = *dispatcher_timeout;
  // Read only at shutdown: checked here, or a bad value would surface as "waited -1 ms" then.
  auto drain_timeout = check_millis("--drain-timeout", drain_timeout_ms, /*allow_zero=*/true);
  if (!drain_timeout.ok())
    return report_status(kInfo.name, drain_timeout.status());
  if (auto st = check_at_least("--buffer-elements", buffer_elements, 1); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = check_at_least("--buffer-bytes", buffer_bytes, 1); !st.ok())
    return report_status(kInfo.name, st);
  config.task_buffer_elements = buffer_elements;
  config.task_buffer_bytes = buffer_bytes;
  if (auto st = check_at_least("--job-memory-limit", job_memory_limit, 0); !st.ok())
    return report_status(kInfo.name, st);
  config.job_memory_limit = job_memory_limit;
  if (auto st = check_at_least("--memory-limit", memory_limit, 0); !st.ok())
    return report_status(kInfo.name, st);
  config.memory_limit = memory_limit;
  if (auto st = check_at_least("--worker-max-concurrent-snapshots", max_snapshots, 0); !st.ok())
    return report_status(kInfo.name, st);
  config.max_concurrent_snapshots = max_snapshots;
  if (auto st = check_at_least("--cross-trainer-cache-size-bytes", cache_bytes, 1); !st.ok())
    return report_status(kInfo.name, st);
  config.cross_trainer_cache_size_bytes = cache_bytes;
  if (vm.count("worker-tags"))
    for (const auto& arg : vm["worker-tags"].as<std::vector<std::string>>()) {
      auto tags = actors::parse_worker_tags(arg);
      if (!tags.ok())
        return report_status(kInfo.name, tags.status().with_context("--worker-tags"));
      config.worker_tags.insert(config.worker_tags.end(), tags->begin(), tags->end());
    }
  if (auto st = actors::validate_worker_tags(config.worker_tags); !st.ok())
    return report_status(kInfo.name, st.with_context("--worker-tags"));
  if (vm.count("plugin"))
    config.plugins = vm["plugin"].as<std::vector<std::string>>();
  if (vm.count("python-path")) {
#ifdef CONVEYOR_PYTHON_FUNCTIONS
    for (const auto& dir : vm["python-path"].as<std::vector<std::string>>())
      if (auto st = python::add_python_path(dir); !st.ok())
        return report_status(kInfo.name, st);
#else
    return report_status(kInfo.name,
                         unimplemented("--python-path: this worker was built without Python "
                                       "functions (configure it with python3-dev and "
                                       "pybind11-dev installed)"));
#endif
  }
  config.protocol_version = vm["protocol-version"].as<uint32_t>();
  if (auto st = apply_security_options(vm, config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_scheduler_option(vm, config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_guard_options(vm, config.guard, config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (vm.count("allow-path"))
    config.allowed_paths = vm["allow-path"].as<std::vector<std::string>>();
  if (auto st = apply_allow_url_option(vm, config.allowed_paths); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_http_client_options(vm); !st.ok())
    return report_status(kInfo.name, st);

  if (auto st = apply_metrics_options(vm, config.metrics_port, config.metrics_host); !st.ok())
    return report_status(kInfo.name, st);
  install_stop_signals();
  WorkerServer server{config};
  if (auto st = server.start(); !st.ok())
    return report_error(kInfo.name, "cannot start: " + st.to_string(), exit_code_for(st));
    // start() returns once the dispatcher accepted the registration: from here on, new jobs and
    // running ones get a task here. Scripts and tests wait for this line.
#ifdef CONVEYOR_PYTHON_FUNCTIONS
  python::set_python_worker_name("worker " + server.worker_address());
#endif
  log::info("worker", "ready: registered with dispatcher " + config.dispatcher_address +
                        ", serving consumers at " + server.worker_address());
  wait_for_stop_signal();
  // SIGTERM / Ctrl-C: drain first (no new splits, unstarted ones back to the job, deliver what
  // was started), then leave. A second signal is not waited for: the drain is bounded.
  log::info("worker",
            "draining (bounded by --drain-timeout " + std::to_string(drain_timeout_ms) + " ms)");
  if (auto st = server.drain(*drain_timeout); !st.ok())
    log::warning("worker", "drain did not complete: " + st.to_string());
  else
    log::info("worker", "drained");
  log::info("worker", "stopping");
  server.stop();
  return kExitOk;
}

const Subcommand reg{"worker", "run a worker (serves elements of every job)", run_worker};

} // namespace
} // namespace conveyor::apps
