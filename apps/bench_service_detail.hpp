// `conveyor bench service` (apps/bench_service*.cpp), the parts its files share; see
// apps/bench_service.cpp for what it measures.
//   bench_service.cpp              flags, the runs in order, and the summary lines
//   bench_service_run.cpp          one measured service run: cluster, consumers, window, latency
//   bench_service_baselines.cpp    raw TCP, small-dataset latency, datasets, throwaway TLS
//   bench_service_coordinated.cpp  --coordinated: round-robin reads against uncoordinated ones
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/bench.hpp"
#include "apps/cli_common.hpp"
#include "apps/copy_counter.hpp"
#include "conveyor/client.hpp"
#include "pipeline/tensor/buffer_pool.hpp"

namespace conveyor::apps::bench_service {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Seconds = std::chrono::duration<double>;

inline constexpr CommandInfo kInfo{
  "bench service",
  "[--workers W] [--consumers C] [--element-size S] [--seconds T] [--mode off|dynamic] "
  "[--coordinated N]",
  "Measures elements/s and MB/s from W in-process workers to C consumers over loopback TCP, and\n"
  "in the same run a raw TCP stream of the same bytes as the baseline; then the copies per "
  "element\n"
  "and the process's memory during that run, and the small-dataset latency (range(100) end to end\n"
  "and the time to the first element, OFF and DYNAMIC).\n"
  "--coordinated N instead measures coordinated (round-robin) reads: N consumers with "
  "num_consumers N\n"
  "(rounds/s), against N consumers sharing a job without coordination, alternating in the same "
  "run."};

struct Throughput {
  int64_t elements = 0;
  int64_t bytes = 0; // payload bytes (headers not counted)
  double seconds = 0;
  double elements_per_s() const { return seconds > 0 ? elements / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

struct ConsumerCounters {
  std::atomic<int64_t> elements{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<bool> read_every_worker{false}; // got an element from each worker (warm-up)
};

struct BenchFlags {
  int64_t workers = 2;
  int64_t consumers = 1;
  int64_t element_size = 1 << 20;
  double seconds = 5;
  std::string mode = "off";
  std::string compression = "NONE";
  std::optional<int64_t> max_outstanding;
  bool tls = false;
  bool local = false;
  int64_t coordinated = 0;
  bool deterministic = false; // --deterministic: deterministic=True against False
  // --trainer-batch N (with --deterministic): the consumer batches N elements in the trainer
  // after distribute (LocalPipeline), as a tf.data user does; 0 = unbatched.
  int64_t trainer_batch = 0;
  bool pixels = false; // --pixels: uint8 tensors of shape (S,) instead of string scalars
  int64_t reps = 3;
  std::string auth_token; // every node's admission token (empty = none)
  NetworkConfig network;  // every node's and consumer's scheduler threads (--scheduler-threads)
};

// The service run's measures besides throughput: the plain run's copies, allocations, buffers,
// CPU time, busiest threads, memory and small-dataset latency; the TLS run's CPU time and
// threads (--tls); the LOCAL run's copies and CPU time (--local).
struct ServiceMeasures {
  CopyCounts copies_before, copies_after;
  uint64_t allocs_before = 0, allocs_after = 0;
  BufferPool::Stats pool_before, pool_after;
  double service_cpu = 0;                   // process CPU seconds in the measured window
  double tls_cpu = 0;                       // the same in the TLS run (--tls)
  std::string service_threads, tls_threads; // the busiest threads of each run (thread_cpu.hpp)
  int64_t rss_kb = 0, hwm_kb = 0;
  std::vector<double> first[2], total[2]; // latency (ms), OFF and DYNAMIC
  Status latency_error;
  CopyCounts local_copies_before, local_copies_after;
  double local_cpu = 0;
  // The extra run's (LOCAL, --deterministic) heap allocations and busiest threads.
  uint64_t extra_allocs = 0;
  std::string extra_threads;
};

// What every service run reads: the flags, the job's options and its dataset.
struct ServiceSetup {
  const BenchFlags& flags;
  int metrics_port = -1; // the dispatcher's, in the plain run (-1 = off)
  const DistributeOptions& opts;
  const Dataset& dataset;
};

// One measured service run; nullopt when it failed (said on stderr). The plain run (`network`
// without TLS, not extra_run) measures everything in ServiceMeasures; the TLS run and the LOCAL
// one (extra_run) their throughput, CPU time and (LOCAL) copies.
std::optional<Throughput> measure_service(const ServiceSetup& setup, const NetworkConfig& network,
                                          const char* label, bool extra_run, ServiceMeasures& m);

// bench_service_baselines.cpp (process_cpu_seconds: apps/bench.hpp)
int64_t proc_status_kb(const char* key);
double median(std::vector<double> v);
Expected<Throughput> raw_tcp(int64_t elements, int64_t size, milliseconds limit);
struct Latency {
  double first_ms = 0;
  double total_ms = 0;
};
Expected<Latency> read_small(const std::string& dispatcher, ShardingPolicy policy, int run,
                             int64_t expected, const NetworkConfig& network);
// pixels: uint8 tensors of shape (S,) (pixels(size=S), a size the spec says) instead of string
// scalars (bytes(size=S)).
std::string dataset_for(int64_t element_size, ShardingPolicy policy, bool pixels = false);
Expected<NetworkConfig> throwaway_tls();

// bench_service_coordinated.cpp
int run_coordinated_bench(const BenchFlags& f);

} // namespace conveyor::apps::bench_service
