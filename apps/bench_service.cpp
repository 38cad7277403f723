// `conveyor bench service`: end-to-end throughput of the service on loopback, next to a raw TCP
// stream of the same bytes measured in the same run.
//
// Service side: one DispatchServer and W WorkerServers run inside this process, each with its own
// actor system and TCP port; C consumers (each its own Client, so its own actor system and
// connections) share one named job and read for T seconds after a short warm-up. Elements travel
// over loopback TCP exactly as between processes.
//
// Baseline: a sender thread writes the same number of elements of the same size, each behind an
// 8-byte length header, over a plain loopback socket; a receiver thread parses the frames and
// copies each payload into its own buffer (the least a consumer must do).
//
// The parts: apps/bench_service_detail.hpp.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/alloc_counter.hpp"
#include "apps/bench.hpp"
#include "apps/bench_service_detail.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps::bench_service {
namespace {

// The flags' definitions; parse_bench_command_line reads them into `f`.
void add_service_options(po::options_description& options, BenchFlags& f) {
  // clang-format off
  options.add_options()
      ("workers,w", po::value(&f.workers)->default_value(2)->value_name("W"), "in-process workers")
      ("consumers,c", po::value(&f.consumers)->default_value(1)->value_name("C"), "consumers (one Client each)")
      ("element-size,s", po::value(&f.element_size)->default_value(1 << 20)->value_name("S"),
       "bytes per element (8 = int64 scalars)")
      ("seconds,t", po::value(&f.seconds)->default_value(5)->value_name("T"), "measured seconds (after a warm-up)")
      ("mode,m", po::value(&f.mode)->default_value("off")->value_name("MODE"), "processing mode: off or dynamic")
      ("compression", po::value(&f.compression)->default_value("NONE")->value_name("AUTO|NONE"),
       "wire compression (the payload is random, so AUTO only costs time)")
      ("max-outstanding", po::value<int64_t>()->value_name("M"), "consumer credit (default: automatic)")
      ("metrics-port", po::value<int64_t>()->default_value(-1)->value_name("PORT"),
       "serve the dispatcher's Prometheus metrics on this port (0 = free; the first worker's on a "
       "free port), to measure scrapes under load; -1 = off")
      ("tls", po::bool_switch(&f.tls),
       "also run the service with mutual TLS between every pair of nodes (throwaway certificates made "
       "with the `openssl` command) and print TLS against plain")
      ("auth-token", po::value(&f.auth_token)->value_name("TOKEN"),
       "give every node (dispatcher, workers, consumers) this admission token, to measure the "
       "workers' per-request check")
      ("local", po::bool_switch(&f.local),
       "also run with target_workers LOCAL (the consumers read the in-process workers with no "
       "socket and no serialization) and print LOCAL against ANY; the plain run reads with ANY")
      ("coordinated", po::value(&f.coordinated)->default_value(0)->value_name("N"),
       "measure coordinated reads with N consumers (num_consumers N) against N uncoordinated ones; "
       "0 = off")
      ("deterministic", po::bool_switch(&f.deterministic),
       "with --mode dynamic and one consumer: measure deterministic=True (reproducible order) "
       "against deterministic=False, private jobs, --reps alternating repetitions of each")
      ("trainer-batch", po::value(&f.trainer_batch)->default_value(0)->value_name("N"),
       "with --deterministic: both runs batch N elements in the trainer after distribute "
       "(LocalPipeline, as a tf.data user writes; a deterministic read refuses a worker-side "
       "batch); elements/s still counts the source's elements; 0 = unbatched")
      ("pixels", po::bool_switch(&f.pixels),
       "elements are uint8 tensors of shape (S,) (pixels(size=S): a size the dataset's spec "
       "says, as an image's) instead of string scalars (bytes(size=S)); not with S = 8")
      ("reps", po::value(&f.reps)->default_value(3)->value_name("R"),
       "--coordinated, --deterministic: alternating repetitions of the two runs");
  // clang-format on
}

// The flags' values in range and in combination; an exit code when they are not.
std::optional<int> check_flags(BenchFlags& f, const po::variables_map& vm) {
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto p = vm["metrics-port"].as<int64_t>(); p < -1 || p > 65535)
    return bad(invalid_argument("`--metrics-port` must be -1 (off) or a port in 0..65535, got " +
                                std::to_string(p)));
  if (auto st = check_at_least("--workers", f.workers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--consumers", f.consumers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--element-size", f.element_size, 8); !st.ok())
    return bad(st);
  if (f.element_size > (64 << 20))
    return bad(invalid_argument("`--element-size` must be at most 64 MiB, got " +
                                std::to_string(f.element_size)));
  if (!(f.seconds > 0 && f.seconds <= 600))
    return bad(
      invalid_argument("`--seconds` must be in (0, 600], got " + std::to_string(f.seconds)));
  if (f.workers > 32 || f.consumers > 32)
    return bad(invalid_argument("`--workers` and `--consumers` must be at most 32"));
  if (f.coordinated < 0 || f.coordinated > 32)
    return bad(
      invalid_argument("`--coordinated` must be in [0, 32], got " + std::to_string(f.coordinated)));
  if (auto st = check_at_least("--reps", f.reps, 1); !st.ok())
    return bad(st);
  if (f.trainer_batch < 0 || f.trainer_batch > (1 << 20))
    return bad(invalid_argument("`--trainer-batch` must be in [0, 1048576] (0 = unbatched), got " +
                                std::to_string(f.trainer_batch)));
  if (f.pixels && (f.element_size == 8 || f.coordinated > 0))
    return bad(invalid_argument("`--pixels` needs an `--element-size` other than 8 (those are "
                                "int64 scalars) and no `--coordinated`"));
  if (f.trainer_batch > 0 && !f.deterministic)
    return bad(invalid_argument("`--trainer-batch` only applies with `--deterministic` (it "
                                "batches both of its runs in the trainer)"));
  if (f.coordinated > 0) {
    if (vm["mode"].as<std::string>() != "off" || f.tls || f.local ||
        vm["metrics-port"].as<int64_t>() != -1 || !vm["consumers"].defaulted())
      return bad(
        invalid_argument("`--coordinated` runs N consumers of an OFF job over plain TCP: it "
                         "does not combine with --mode, --consumers, --tls, --local or "
                         "--metrics-port"));
    if (vm.count("max-outstanding"))
      f.max_outstanding = vm["max-outstanding"].as<int64_t>();
    return std::nullopt;
  }
  if (f.deterministic) {
    if (f.mode != "dynamic" || f.consumers != 1 || f.tls || f.local)
      return bad(invalid_argument("`--deterministic` compares one consumer's reads of a private "
                                  "DYNAMIC job: it needs --mode dynamic and --consumers 1, "
                                  "without --tls or --local"));
    return std::nullopt;
  }
  if (!vm["reps"].defaulted())
    return bad(invalid_argument("`--reps` only applies with `--coordinated` or `--deterministic`"));
  return std::nullopt;
}

// The job every consumer of a service run reads (its name, mode, credit, the network path).
Status job_options(const BenchFlags& f, const po::variables_map& vm, DistributeOptions& opts) {
  auto policy = parse_processing_mode(f.mode);
  if (!policy.ok())
    return Status(policy.status().code(), "`--mode`: " + policy.status().message());
  opts.policy = *policy;
  opts.job_name = "bench-service-" + std::to_string(::getpid());
  opts.compression = f.compression;
  if (vm.count("max-outstanding"))
    opts.max_outstanding_requests = vm["max-outstanding"].as<int64_t>();
  // The network path, as to a remote worker: AUTO would read these in-process workers without
  // the wire (that is the --local line).
  opts.target_workers = "ANY";
  if (auto st = validate(opts); !st.ok())
    return st;
  return Status::OK();
}

// --tls: the same run with mutual TLS between every pair of nodes, against the plain one. An
// exit code when it failed.
std::optional<int> tls_run(const ServiceSetup& setup, const Throughput& service,
                           ServiceMeasures& m) {
  const BenchFlags& f = setup.flags;
  auto tls_network = throwaway_tls();
  if (!tls_network.ok())
    return report_status(kInfo.name, tls_network.status());
  tls_network->auth_token = f.auth_token;
  tls_network->scheduler_threads = f.network.scheduler_threads;
  auto tls = measure_service(setup, *tls_network, "TLS", false, m);
  if (!tls)
    return kExitFailure;
  std::printf("  TLS/plain: %.2f (MB/s, mutual TLS between every pair of nodes)\n",
              service.mb_per_s() > 0 ? tls->mb_per_s() / service.mb_per_s() : 0.0);
  if (tls->elements > 0 && service.elements > 0)
    std::printf(
      "  TLS cpu  : %.2f us per element (%.2f cores busy; plain %.2f us; process CPU time)\n",
      m.tls_cpu * 1e6 / static_cast<double>(tls->elements),
      tls->seconds > 0 ? m.tls_cpu / tls->seconds : 0.0,
      m.service_cpu * 1e6 / static_cast<double>(service.elements));
  std::printf("  TLS threads: %s (share of one core)\n", m.tls_threads.c_str());
  return std::nullopt;
}

// --local: the same workers and consumers with target_workers LOCAL (in-process), against ANY.
// An exit code when it failed.
std::optional<int> local_run(const ServiceSetup& setup, DistributeOptions& opts,
                             const NetworkConfig& plain_network, const Throughput& service,
                             ServiceMeasures& m) {
  const BenchFlags& f = setup.flags;
  opts.target_workers = "LOCAL";
  auto local = measure_service(setup, plain_network, "LOCAL", true, m);
  if (!local)
    return kExitFailure;
  std::printf(
    "  LOCAL/ANY: %.2f (MB/s; same workers and consumers, in-process path vs loopback TCP)\n",
    service.mb_per_s() > 0 ? local->mb_per_s() / service.mb_per_s() : 0.0);
  if (local->elements > 0 && service.elements > 0) {
    const double l_us = m.local_cpu * 1e6 / static_cast<double>(local->elements);
    const double a_us = m.service_cpu * 1e6 / static_cast<double>(service.elements);
    std::printf("  LOCAL cpu: %.2f us per element (ANY %.2f us; process CPU time)\n", l_us, a_us);
  }
  if (copy_counter_available() && local->elements > 0) {
    const double n = static_cast<double>(local->elements);
    std::printf(
      "  LOCAL copies: %.2f memcpy/memmove calls >= 64 KiB per element, %.2f x the element's "
      "bytes copied\n",
      static_cast<double>(m.local_copies_after.copy_calls - m.local_copies_before.copy_calls) / n,
      static_cast<double>(m.local_copies_after.copy_bytes - m.local_copies_before.copy_bytes) /
        (n * static_cast<double>(f.element_size)));
  }
  return std::nullopt;
}

// The raw TCP baseline of the same elements, and the plain run's costs per element: CPU time,
// threads, copies, allocations, buffers and memory. An exit code when the baseline failed.
std::optional<int> raw_and_costs(const BenchFlags& f, const DistributeOptions& opts,
                                 const Throughput& service, const ServiceMeasures& m) {
  // Same elements, same sizes, over a plain socket; bounded in time like the service run.
  const double raw_cpu0 = process_cpu_seconds();
  auto raw = raw_tcp(service.elements, f.element_size,
                     milliseconds{static_cast<int64_t>(f.seconds * 2000) + 5000});
  const double raw_cpu = process_cpu_seconds() - raw_cpu0;
  if (!raw.ok())
    return report_status(kInfo.name, raw.status());
  std::printf(
    "  raw TCP : %12.0f elements/s %10.1f MB/s   (%lld elements in %.2f s, 8-byte frame headers)\n",
    raw->elements_per_s(), raw->mb_per_s(), static_cast<long long>(raw->elements), raw->seconds);
  std::printf("  ratio   : %.2f of raw TCP (MB/s)\n",
              raw->mb_per_s() > 0 ? service.mb_per_s() / raw->mb_per_s() : 0.0);
  if (service.elements > 0 && raw->elements > 0) {
    const double s_us = m.service_cpu * 1e6 / static_cast<double>(service.elements);
    const double r_us = raw_cpu * 1e6 / static_cast<double>(raw->elements);
    std::printf(
      "  cpu     : %.2f us per element service (%.2f cores busy), %.2f us raw TCP; raw/service %.2f"
      " (process CPU time: steadier than elements/s on a shared machine)\n",
      s_us, service.seconds > 0 ? m.service_cpu / service.seconds : 0.0, r_us,
      s_us > 0 ? r_us / s_us : 0.0);
  }
  // A many-core machine with cores to spare and low throughput: one thread at a full core is
  // the serialization point.
  std::printf("  threads : %s (service run, share of one core)\n", m.service_threads.c_str());
  if (copy_counter_available()) {
    const double n = static_cast<double>(service.elements);
    const double calls =
      static_cast<double>(m.copies_after.copy_calls - m.copies_before.copy_calls);
    const double bytes =
      static_cast<double>(m.copies_after.copy_bytes - m.copies_before.copy_bytes);
    const double fills =
      static_cast<double>(m.copies_after.fill_bytes - m.copies_before.fill_bytes);
    std::printf("  copies  : %.2f memcpy/memmove calls >= 64 KiB per element, %.2f x the element's "
                "bytes copied,"
                " %.2f x zero-filled (whole process: pipeline output to consumer tensor)\n",
                calls / n, bytes / (n * static_cast<double>(f.element_size)),
                fills / (n * static_cast<double>(f.element_size)));
  } else {
    std::printf("  copies  : not counted (sanitizer build)\n");
  }
  if (alloc_counter_available())
    std::printf(
      "  allocs  : %.2f heap allocations per element (malloc/calloc/realloc calls, whole process:"
      " workers, dispatcher and consumer)\n",
      static_cast<double>(m.allocs_after - m.allocs_before) /
        static_cast<double>(service.elements));
  else
    std::printf("  allocs  : not counted (sanitizer build)\n");
  {
    const double n = static_cast<double>(service.elements);
    const auto hits = m.pool_after.hits - m.pool_before.hits,
               misses = m.pool_after.misses - m.pool_before.misses;
    std::printf("  buffers : %.2f fresh large buffers per element (%lld recycled, %lld new: "
                "receive buffers and compressed frames from the"
                " bulk path's pool, pipeline/tensor/buffer_pool.hpp)\n",
                n > 0 ? static_cast<double>(misses) / n : 0.0, static_cast<long long>(hits),
                static_cast<long long>(misses));
  }
  const int64_t credits = opts.max_outstanding_requests.value_or(65536);
  const double bound_mib =
    std::min<double>(static_cast<double>(credits) * static_cast<double>(f.element_size),
                     opts.max_buffered_bytes) /
    (1 << 20);
  std::printf(
    "  memory  : process RSS %.1f MiB (peak %.1f MiB; dispatcher, workers' buffers and consumers);"
    " consumer bound min(credits x element size, max_buffered_bytes) = %.1f MiB per consumer\n",
    m.rss_kb / 1024.0, m.hwm_kb / 1024.0, bound_mib);
  return std::nullopt;
}

// The small-dataset latency of the plain run.
int print_latency(const ServiceMeasures& m) {
  if (!m.latency_error.ok()) {
    std::fprintf(stderr, "bench service: latency run failed: %s\n",
                 m.latency_error.to_string().c_str());
    return kExitFailure;
  }
  const double off_total = median(m.total[0]), dyn_total = median(m.total[1]);
  std::printf("  latency : range(100) end to end (median of %zu, new client + job each): OFF %.1f "
              "ms, DYNAMIC %.1f ms"
              " (DYNAMIC/OFF %.2f); first element OFF %.1f ms, DYNAMIC %.1f ms\n",
              m.total[0].size(), off_total, dyn_total, off_total > 0 ? dyn_total / off_total : 0.0,
              median(m.first[0]), median(m.first[1]));
  std::printf("  load    : %s\n", load_average().c_str());
  return kExitOk;
}

} // namespace

// --deterministic: a private DYNAMIC job read in order (deterministic=True) against one read as
// elements arrive, alternating, --reps times each; prints every run and the median ratio.
int deterministic_runs(const BenchFlags& f, const DistributeOptions& named, const Dataset& dataset,
                       const NetworkConfig& network) {
  std::vector<double> rate[2];
  for (int64_t r = 0; r < f.reps; ++r)
    for (int det = 0; det < 2; ++det) {
      DistributeOptions opts = named;
      opts.job_name.reset(); // deterministic reads are private jobs: both runs are
      opts.deterministic = det == 1;
      ServiceMeasures m;
      const ServiceSetup setup{f, -1, opts, dataset};
      auto t = measure_service(setup, network, det ? "deterministic" : "arrival order", true, m);
      if (!t)
        return kExitFailure;
      rate[det].push_back(t->elements_per_s());
      const double n = static_cast<double>(t->elements);
      // Where the time goes: CPU and heap allocations per element (whole process), and the
      // busiest threads (a reader thread at a full core is the limit).
      std::printf("  run %lld %-13s: %12.0f elements/s %10.1f MB/s, %.2f us CPU and %.2f "
                  "allocations per element; threads %s\n",
                  static_cast<long long>(r + 1), det ? "deterministic" : "arrival",
                  t->elements_per_s(), t->mb_per_s(), m.local_cpu * 1e6 / n,
                  alloc_counter_available() ? static_cast<double>(m.extra_allocs) / n : -1.0,
                  m.extra_threads.c_str());
      std::fflush(stdout);
    }
  const double off = median(rate[0]), on = median(rate[1]);
  std::printf("  deterministic/arrival: %.3f (median of %lld runs each; cost %.1f%%)\n",
              off > 0 ? on / off : 0.0, static_cast<long long>(f.reps),
              off > 0 ? 100.0 * (1.0 - on / off) : 0.0);
  std::printf("  load    : %s\n", load_average().c_str());
  return kExitOk;
}

int run_bench_service(const std::vector<std::string>& args) {
  BenchFlags f;
  po::options_description options("service benchmark options");
  add_service_options(options, f);
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "error", &f.network))
    return *stop;
  if (auto stop = check_flags(f, vm))
    return *stop;
  if (f.coordinated > 0)
    return run_coordinated_bench(f);
  DistributeOptions opts;
  if (auto st = job_options(f, vm, opts); !st.ok())
    return report_status(kInfo.name, st);
  const std::string dataset_text = dataset_for(f.element_size, opts.policy, f.pixels);
  auto dataset = parse_dataset(dataset_text);
  if (!dataset.ok())
    return report_status(kInfo.name, dataset.status());

  std::printf("bench service: %lld worker(s), %lld consumer(s), %lld-byte elements, %s, "
              "compression %s, %.1f s\n"
              "  in-process servers (one actor system each) talking over loopback TCP\n"
              "  dataset: %s\n",
              static_cast<long long>(f.workers), static_cast<long long>(f.consumers),
              static_cast<long long>(f.element_size), to_string(opts.policy), f.compression.c_str(),
              f.seconds, dataset_text.c_str());
  if (f.trainer_batch > 0)
    std::printf("  in the trainer: .batch(%lld) after distribute (elements/s counts the "
                "source's elements)\n",
                static_cast<long long>(f.trainer_batch));
  std::fflush(stdout);

  ServiceMeasures m;
  const ServiceSetup setup{f, static_cast<int>(vm["metrics-port"].as<int64_t>()), opts, *dataset};
  NetworkConfig plain_network = f.network;
  plain_network.auth_token = f.auth_token;
  if (f.deterministic)
    return deterministic_runs(f, opts, *dataset, plain_network);
  auto plain = measure_service(setup, plain_network, "service", false, m);
  if (!plain)
    return kExitFailure;
  const Throughput service = *plain;
  if (f.tls)
    if (auto stop = tls_run(setup, service, m))
      return *stop;
  if (f.local)
    if (auto stop = local_run(setup, opts, plain_network, service, m))
      return *stop;
  if (auto stop = raw_and_costs(f, opts, service, m))
    return *stop;
  return print_latency(m);
}

namespace {
const Benchmark reg{"service", "dispatcher + workers + consumers on loopback vs raw TCP",
                    run_bench_service};
} // namespace

} // namespace conveyor::apps::bench_service
