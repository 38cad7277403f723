// `conveyor bench service`: one measured service run. A dispatcher and W workers in this process
// (each its own actor system and port), C consumer threads reading one named job, a warm-up, the
// measured window, and (the plain run) the small-dataset latency on the same cluster.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "apps/alloc_counter.hpp"
#include "apps/bench_service_detail.hpp"
#include "apps/thread_cpu.hpp"
#include "conveyor/local_pipeline.hpp"
#include "conveyor/server.hpp"

namespace conveyor::apps::bench_service {

namespace {

// The dispatcher and the workers of one run. (Members go in reverse: the workers first.)
struct Cluster {
  std::unique_ptr<DispatchServer> dispatcher;
  std::vector<std::unique_ptr<WorkerServer>> workers;
};

// The consumer threads of one run and what they report.
struct Consumers {
  explicit Consumers(int64_t n) : counters(static_cast<std::size_t>(n)) {}
  std::atomic<bool> stop{false};
  std::vector<ConsumerCounters> counters;
  std::mutex mu;
  std::vector<Status> errors;
  std::map<std::string, int64_t> per_worker;
  struct {
    int64_t worker_ns = 0, network_ns = 0, split_ns = 0, credit_ns = 0, elapsed_ns = 0;
  } waits; // summed over the consumers (whole stream, warm-up included)
  int64_t held_peak = 0, held_peak_bytes = 0; // deterministic reads: the most a reorder held
  std::vector<std::thread> threads;

  Throughput totals() {
    Throughput t;
    for (auto& c : counters) {
      t.elements += c.elements.load();
      t.bytes += c.bytes.load();
    }
    return t;
  }
  bool all_read_every_worker() {
    for (auto& c : counters)
      if (!c.read_every_worker.load())
        return false;
    return true;
  }
};

// Starts the dispatcher and the workers; false when one failed (said on stderr).
bool start_cluster(const ServiceSetup& setup, const NetworkConfig& network, Cluster& cluster) {
  DispatcherConfig dconfig;
  dconfig.network = network;
  if (!network.tls()) // metrics (scraped under load) in the plain run
    dconfig.metrics_port = setup.metrics_port;
  cluster.dispatcher = std::make_unique<DispatchServer>(dconfig);
  if (auto st = cluster.dispatcher->start(); !st.ok()) {
    report_error(kInfo.name, "dispatcher: " + st.to_string(), kExitFailure);
    return false;
  }
  for (int64_t i = 0; i < setup.flags.workers; ++i) {
    WorkerConfig config;
    config.dispatcher_address = cluster.dispatcher->target();
    // Workers in one process share one task table; the first serves it (to scrape under load).
    if (i == 0 && dconfig.metrics_port >= 0)
      config.metrics_port = 0;
    config.network = network;
    cluster.workers.push_back(std::make_unique<WorkerServer>(config));
    if (auto st = cluster.workers.back()->start(); !st.ok()) {
      report_error(kInfo.name, "worker: " + st.to_string(), kExitFailure);
      return false;
    }
  }
  return true;
}

// One consumer: reads until told to stop, counting; then adds its stream's stats.
void read_until_stopped(const ServiceSetup& setup, const std::string& target,
                        const ClientConfig& client_config, Consumers& consumers, int64_t c) {
  auto fail = [&](Status st) {
    std::lock_guard lock(consumers.mu);
    consumers.errors.push_back(std::move(st));
  };
  auto client = Client::connect(target, client_config);
  if (!client.ok())
    return fail(client.status());
  auto stream = client->distribute(setup.dataset, setup.opts);
  if (!stream.ok())
    return fail(stream.status());
  ConsumerCounters& mine = consumers.counters[static_cast<std::size_t>(c)];
  // --trainer-batch: the trainer's own batch after distribute (the default timeout per element:
  // a deadline would end the pipeline, and the stop flag is read between batches).
  const int64_t batch = setup.flags.trainer_batch;
  std::optional<LocalPipeline> trainer;
  if (batch > 0)
    trainer.emplace(LocalPipeline::over(*stream).batch(batch));
  Element e;
  auto next_check = Clock::now();
  while (!consumers.stop.load(std::memory_order_relaxed)) {
    if (!mine.read_every_worker.load(std::memory_order_relaxed) && Clock::now() >= next_check) {
      next_check = Clock::now() + milliseconds{20};
      int64_t seen = 0;
      for (const auto& [w, n] : stream->stats().per_worker)
        seen += n > 0 ? 1 : 0;
      if (seen >= setup.flags.workers)
        mine.read_every_worker = true;
    }
    bool end = false;
    Status st = trainer ? trainer->next(e, end) : stream->next(e, end, milliseconds{200});
    if (st.code() == ErrorCode::deadline_exceeded && !trainer)
      continue;
    if (!st.ok())
      return fail(st);
    if (end)
      return fail(failed_precondition("the endless dataset ended"));
    // a batch counts its rows: the source's elements
    const int64_t rows = trainer && e.size() > 0 && !e[0].shape().empty() ? e[0].shape()[0] : 1;
    mine.elements.fetch_add(rows, std::memory_order_relaxed);
    mine.bytes.fetch_add(static_cast<int64_t>(e.byte_size()), std::memory_order_relaxed);
  }
  std::lock_guard lock(consumers.mu);
  const auto stats = stream->stats();
  for (const auto& [w, n] : stats.per_worker)
    consumers.per_worker[w] += n;
  consumers.waits.worker_ns += stats.wait_worker_ns;
  consumers.waits.network_ns += stats.wait_network_ns;
  consumers.waits.split_ns += stats.wait_split_ns;
  consumers.waits.credit_ns += stats.wait_credit_ns;
  consumers.waits.elapsed_ns += stats.elapsed_ns;
  consumers.held_peak = std::max(consumers.held_peak, stats.order_held_peak);
  consumers.held_peak_bytes = std::max(consumers.held_peak_bytes, stats.order_held_peak_bytes);
}

// Warm-up: connections, job creation, buffers filling. Then until every consumer has read from
// every worker (at most 10 s more): a consumer learns a worker's task from the dispatcher, up
// to a heartbeat later than the first one's, and opens the worker's bulk channel at its first
// reply; until then large elements go inline, several times slower. Measuring that start-up
// made 16 MiB runs look like intermittent stalls.
void warm_up(const BenchFlags& f, Consumers& consumers) {
  const milliseconds warmup{
    std::min<int64_t>(1000, static_cast<int64_t>(f.seconds * 1000 / 2) + 100)};
  std::this_thread::sleep_for(warmup);
  const auto warm_limit = Clock::now() + std::chrono::seconds{10};
  bool warmed = consumers.all_read_every_worker();
  while (!warmed && Clock::now() < warm_limit) {
    {
      std::lock_guard lock(consumers.mu);
      if (!consumers.errors.empty())
        break;
    }
    std::this_thread::sleep_for(milliseconds{20});
    warmed = consumers.all_read_every_worker();
  }
  if (warmed) // the channels opened on those first replies: let the inline tails drain
    std::this_thread::sleep_for(milliseconds{200});
}

// The measured window: what the consumers read in it, and (by run) its copies, allocations,
// buffers, CPU time, busiest threads and memory.
Throughput measure_window(const BenchFlags& f, bool tls, bool extra_run, Consumers& consumers,
                          ServiceMeasures& m) {
  const bool plain_run = !tls && !extra_run;
  const Throughput before = consumers.totals();
  if (plain_run) {
    m.copies_before = copy_counts();
    m.pool_before = BufferPool::global().stats();
    copy_counter_enable(true);
    m.allocs_before = alloc_count();
    alloc_counter_enable(true);
  }
  uint64_t extra_allocs0 = 0;
  if (extra_run) {
    m.local_copies_before = copy_counts();
    copy_counter_enable(true);
    extra_allocs0 = alloc_count();
    alloc_counter_enable(true);
  }
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  const auto threads0 = thread_cpu_snapshot();
  std::this_thread::sleep_for(Seconds(f.seconds));
  Throughput service = consumers.totals();
  const auto threads1 = thread_cpu_snapshot();
  if (plain_run)
    m.service_cpu = process_cpu_seconds() - cpu0;
  if (tls)
    m.tls_cpu = process_cpu_seconds() - cpu0;
  if (extra_run) {
    m.local_cpu = process_cpu_seconds() - cpu0;
    copy_counter_enable(false);
    m.local_copies_after = copy_counts();
    alloc_counter_enable(false);
    m.extra_allocs = alloc_count() - extra_allocs0;
  }
  if (plain_run) {
    copy_counter_enable(false);
    m.copies_after = copy_counts();
    alloc_counter_enable(false);
    m.allocs_after = alloc_count();
    m.pool_after = BufferPool::global().stats();
    m.rss_kb = proc_status_kb("VmRSS");
    m.hwm_kb = proc_status_kb("VmHWM");
  }
  service.seconds = Seconds(Clock::now() - t0).count();
  if (plain_run)
    m.service_threads = busiest_threads(threads0, threads1, service.seconds);
  if (tls)
    m.tls_threads = busiest_threads(threads0, threads1, service.seconds);
  if (extra_run)
    m.extra_threads = busiest_threads(threads0, threads1, service.seconds);
  service.elements -= before.elements;
  service.bytes -= before.bytes;
  return service;
}

// Small datasets on the same cluster: latency of a whole range(100), OFF and DYNAMIC.
void measure_latency(const BenchFlags& f, const std::string& target, const NetworkConfig& network,
                     ServiceMeasures& m) {
  for (int run = 0; run < 5 && m.latency_error.ok(); ++run)
    for (int mode = 0; mode < 2 && m.latency_error.ok(); ++mode) {
      auto l = read_small(target, mode == 0 ? ShardingPolicy::off : ShardingPolicy::dynamic, run,
                          mode == 0 ? 100 * f.workers : 100, network);
      if (!l.ok()) {
        m.latency_error = l.status();
        break;
      }
      m.first[mode].push_back(l->first_ms);
      m.total[mode].push_back(l->total_ms);
    }
}

void print_run(const char* label, const Throughput& service, const Consumers& consumers) {
  std::printf("  %-8s: %12.0f elements/s %10.1f MB/s   (%lld elements in %.2f s)\n", label,
              service.elements_per_s(), service.mb_per_s(),
              static_cast<long long>(service.elements), service.seconds);
  for (const auto& [w, n] : consumers.per_worker)
    std::printf("            worker %s: %lld elements\n", w.c_str(), static_cast<long long>(n));
  const auto& waits = consumers.waits;
  if (waits.elapsed_ns > 0) {
    const double e = static_cast<double>(waits.elapsed_ns) / 100.0;
    std::printf(
      "            consumer waited (%% of its stream's time): on workers %.0f%%, network %.0f%%,"
      " splits %.0f%%, credit %.0f%%\n",
      waits.worker_ns / e, waits.network_ns / e, waits.split_ns / e, waits.credit_ns / e);
  }
  if (consumers.held_peak > 0)
    std::printf("            reorder held at most %lld elements (%.1f MB), waiting for an earlier "
                "one\n",
                static_cast<long long>(consumers.held_peak),
                static_cast<double>(consumers.held_peak_bytes) / 1e6);
  std::fflush(stdout);
}

} // namespace

std::optional<Throughput> measure_service(const ServiceSetup& setup, const NetworkConfig& network,
                                          const char* label, bool extra_run, ServiceMeasures& m) {
  Cluster cluster;
  if (!start_cluster(setup, network, cluster))
    return std::nullopt;
  ClientConfig client_config;
  client_config.network = network;
  const std::string target = cluster.dispatcher->target();
  Consumers consumers{setup.flags.consumers};
  for (int64_t c = 0; c < setup.flags.consumers; ++c)
    consumers.threads.emplace_back(
      [&, c] { read_until_stopped(setup, target, client_config, consumers, c); });
  warm_up(setup.flags, consumers);
  const bool plain_run = !network.tls() && !extra_run;
  const Throughput service = measure_window(setup.flags, network.tls(), extra_run, consumers, m);
  consumers.stop = true;
  for (auto& t : consumers.threads)
    t.join();
  if (plain_run)
    measure_latency(setup.flags, target, network, m);
  for (auto& w : cluster.workers)
    w->stop();
  cluster.dispatcher->stop();
  if (!consumers.errors.empty()) {
    for (const auto& e : consumers.errors)
      std::fprintf(stderr, "bench service: consumer failed: %s\n", e.to_string().c_str());
    return std::nullopt;
  }
  if (service.elements == 0) {
    report_error(kInfo.name, "no element arrived in the measured window", kExitFailure);
    return std::nullopt;
  }
  print_run(label, service, consumers);
  return service;
}

} // namespace conveyor::apps::bench_service
