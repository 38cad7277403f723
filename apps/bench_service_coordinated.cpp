// `conveyor bench service --coordinated N`: coordinated (round-robin) reads against uncoordinated
// ones on the same cluster.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "apps/bench.hpp"
#include "apps/bench_service_detail.hpp"
#include "conveyor/server.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps::bench_service {

// --- coordinated reads: N consumers of one job with num_consumers = N, against N consumers of
// one job without it, alternating on the same cluster (same run). Each consumer thread counts the
// elements it read in the measured window; in coordinated mode every consumer gets one element
// per round, so rounds/s is the slowest consumer's elements/s.
struct ReadRun {
  int64_t min_elements = 0; // the slowest consumer's count
  int64_t elements = 0;     // all consumers
  double seconds = 0;
  std::string error;
};

ReadRun measure_reads(const std::string& dispatcher, const Dataset& dataset, int64_t consumers,
                      bool coordinated, const std::string& job, const BenchFlags& f) {
  std::atomic<bool> stop{false};
  std::vector<ConsumerCounters> counters(static_cast<std::size_t>(consumers));
  std::mutex mu;
  std::string error;
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < consumers; ++c)
    threads.emplace_back([&, c] {
      auto fail = [&](const Status& st) {
        std::lock_guard lock(mu);
        if (error.empty())
          error = st.to_string();
      };
      ClientConfig config;
      config.network = f.network;
      auto client = Client::connect(dispatcher, config);
      if (!client.ok())
        return fail(client.status());
      DistributeOptions opts;
      opts.job_name = job;
      opts.compression = f.compression;
      opts.target_workers =
        "ANY"; // the network path, as a remote worker (AUTO would go in-process)
      if (f.max_outstanding)
        opts.max_outstanding_requests = *f.max_outstanding;
      if (coordinated) {
        opts.num_consumers = consumers;
        opts.consumer_index = c;
      }
      auto stream = client->distribute(dataset, opts);
      if (!stream.ok())
        return fail(stream.status());
      auto& mine = counters[static_cast<std::size_t>(c)];
      Element e;
      while (!stop.load(std::memory_order_relaxed)) {
        bool end = false;
        Status st = stream->next(e, end, milliseconds{200});
        if (st.code() == ErrorCode::deadline_exceeded)
          continue;
        if (!st.ok() || end)
          return fail(end ? failed_precondition("the endless dataset ended") : st);
        mine.elements.fetch_add(1, std::memory_order_relaxed);
      }
    });
  auto snapshot = [&] {
    std::vector<int64_t> v;
    for (auto& c : counters)
      v.push_back(c.elements.load());
    return v;
  };
  std::this_thread::sleep_for(milliseconds{1000}); // warm-up: joining, connections, buffers
  const auto before = snapshot();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(Seconds(f.seconds));
  const auto after = snapshot();
  ReadRun run;
  run.seconds = Seconds(Clock::now() - t0).count();
  stop = true;
  for (auto& t : threads)
    t.join();
  run.error = error;
  run.min_elements = std::numeric_limits<int64_t>::max();
  for (std::size_t i = 0; i < after.size(); ++i) {
    run.elements += after[i] - before[i];
    run.min_elements = std::min(run.min_elements, after[i] - before[i]);
  }
  return run;
}

int run_coordinated_bench(const BenchFlags& f) {
  // Coordinated reads need an infinite dataset (cardinality infinite, not just long); both runs
  // read the same one.
  const std::string dataset_text = f.element_size == 8
                                     ? std::string{"range(1048576).repeat()"}
                                     : dataset_for(f.element_size, ShardingPolicy::off);
  auto dataset = parse_dataset(dataset_text);
  if (!dataset.ok())
    return report_status(kInfo.name, dataset.status());
  std::printf("bench service --coordinated %lld: %lld worker(s), %lld-byte elements, %.1f s per "
              "run, %lld rep(s)\n"
              "  dataset: %s (OFF)\n",
              static_cast<long long>(f.coordinated), static_cast<long long>(f.workers),
              static_cast<long long>(f.element_size), f.seconds, static_cast<long long>(f.reps),
              dataset_text.c_str());
  DispatcherConfig dconfig;
  dconfig.network = f.network;
  DispatchServer dispatcher{dconfig};
  if (auto st = dispatcher.start(); !st.ok())
    return report_error(kInfo.name, "dispatcher: " + st.to_string(), kExitFailure);
  std::vector<std::unique_ptr<WorkerServer>> workers;
  for (int64_t i = 0; i < f.workers; ++i) {
    WorkerConfig config;
    config.network = f.network;
    config.dispatcher_address = dispatcher.target();
    workers.push_back(std::make_unique<WorkerServer>(config));
    if (auto st = workers.back()->start(); !st.ok())
      return report_error(kInfo.name, "worker: " + st.to_string(), kExitFailure);
  }
  int rc = kExitOk;
  std::vector<double> ratios;
  for (int64_t rep = 0; rep < f.reps && rc == kExitOk; ++rep) {
    const std::string base = "bench-rr-" + std::to_string(::getpid()) + "-" + std::to_string(rep);
    auto plain =
      measure_reads(dispatcher.target(), *dataset, f.coordinated, false, base + "-plain", f);
    auto rr = measure_reads(dispatcher.target(), *dataset, f.coordinated, true, base + "-rr", f);
    for (const auto* r : {&plain, &rr})
      if (!r->error.empty()) {
        std::fprintf(stderr, "bench service: consumer failed: %s\n", r->error.c_str());
        rc = kExitFailure;
      }
    if (rc != kExitOk)
      break;
    const double plain_eps = plain.elements / plain.seconds;
    const double rounds = rr.min_elements / rr.seconds;
    const double rr_eps = rr.elements / rr.seconds;
    const double ratio = plain_eps > 0 ? rr_eps / plain_eps : 0;
    ratios.push_back(ratio);
    std::printf("  rep %lld: coordinated %10.0f rounds/s (%10.0f elements/s over %lld consumers) | "
                "uncoordinated %10.0f elements/s | ratio %.2f | load %s\n",
                static_cast<long long>(rep), rounds, rr_eps, static_cast<long long>(f.coordinated),
                plain_eps, ratio, load_average().c_str());
    std::fflush(stdout);
  }
  for (auto& w : workers)
    w->stop();
  dispatcher.stop();
  if (rc == kExitOk)
    std::printf(
      "  ratio coordinated/uncoordinated (elements/s, same run): median %.2f over %zu rep(s)\n",
      median(ratios), ratios.size());
  return rc;
}
} // namespace conveyor::apps::bench_service
