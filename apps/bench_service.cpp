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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/alloc_counter.hpp"
#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/copy_counter.hpp"
#include "apps/thread_cpu.hpp"
#include "apps/cli_common.hpp"
#include "conveyor/client.hpp"
#include "conveyor/server.hpp"
#include "pipeline/tensor/buffer_pool.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Seconds = std::chrono::duration<double>;

constexpr CommandInfo kInfo{
    "bench service", "[--workers W] [--consumers C] [--element-size S] [--seconds T] [--mode off|dynamic] "
    "[--coordinated N]",
    "Measures elements/s and MB/s from W in-process workers to C consumers over loopback TCP, and\n"
    "in the same run a raw TCP stream of the same bytes as the baseline; then the copies per element\n"
    "and the process's memory during that run, and the small-dataset latency (range(100) end to end\n"
    "and the time to the first element, OFF and DYNAMIC).\n"
    "--coordinated N instead measures coordinated (round-robin) reads: N consumers with num_consumers N\n"
    "(rounds/s), against N consumers sharing a job without coordination, alternating in the same run."};

// --- raw TCP baseline

struct Throughput {
  int64_t elements = 0;
  int64_t bytes = 0; // payload bytes (headers not counted)
  double seconds = 0;
  double elements_per_s() const { return seconds > 0 ? elements / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Streams `elements` frames of `size` payload bytes from a sender thread to a receiver thread.
Expected<Throughput> raw_tcp(int64_t elements, int64_t size, milliseconds limit) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return io_error("raw TCP: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return io_error("raw TCP: cannot listen on 127.0.0.1");
  }
  const auto deadline = Clock::now() + limit;
  std::atomic<bool> sender_ok{true};
  std::thread sender([&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      sender_ok = false;
      if (fd >= 0)
        ::close(fd);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const std::string payload(static_cast<std::size_t>(size), 'x');
    // Small frames are packed into one buffer per send, as any buffered writer would.
    std::string buf;
    buf.reserve(1 << 18);
    const uint64_t header = static_cast<uint64_t>(size);
    for (int64_t i = 0; i < elements && sender_ok; ++i) {
      buf.append(reinterpret_cast<const char*>(&header), sizeof header);
      if (size >= (1 << 16)) {
        if (!write_all(fd, buf.data(), buf.size()) || !write_all(fd, payload.data(), payload.size()))
          sender_ok = false;
        buf.clear();
      } else {
        buf.append(payload);
        if (buf.size() >= (1 << 18)) {
          sender_ok = write_all(fd, buf.data(), buf.size());
          buf.clear();
        }
      }
      if ((i & 1023) == 0 && Clock::now() > deadline)
        break;
    }
    if (!buf.empty())
      write_all(fd, buf.data(), buf.size());
    ::close(fd);
  });

  const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  if (conn < 0) {
    sender_ok = false;
    sender.join();
    return io_error("raw TCP: accept() failed");
  }
  Throughput out;
  const auto start = Clock::now();
  std::vector<char> in(1 << 20);
  std::size_t have = 0;
  std::string element; // the receiver's copy of each payload
  while (out.elements < elements) {
    const ssize_t r = ::recv(conn, in.data() + have, in.size() - have, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      break;
    }
    have += static_cast<std::size_t>(r);
    std::size_t at = 0;
    for (;;) {
      if (have - at < 8)
        break;
      uint64_t frame = 0;
      std::memcpy(&frame, in.data() + at, 8);
      if (have - at - 8 < frame) {
        if (frame + 8 > in.size())
          in.resize(frame + 8);
        break;
      }
      element.assign(in.data() + at + 8, frame);
      at += 8 + frame;
      ++out.elements;
      out.bytes += static_cast<int64_t>(frame);
    }
    std::memmove(in.data(), in.data() + at, have - at);
    have -= at;
  }
  out.seconds = Seconds(Clock::now() - start).count();
  ::close(conn);
  sender.join();
  if (!sender_ok && out.elements == 0)
    return io_error("raw TCP: the sender failed");
  return out;
}

// CPU seconds this process used so far (every thread): a load-independent cost per element, as
// the elements/s of a shared machine move with what else runs on it.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// --- process memory (kB) from /proc/self/status: VmRSS now, VmHWM the peak
int64_t proc_status_kb(const char* key) { return proc_status_number("self", key); }

// --- small-dataset latency: range(100) read end to end, and the time to its first element
struct Latency {
  double first_ms = 0;
  double total_ms = 0;
};

// OFF: every worker produces the whole dataset (100 x workers elements); DYNAMIC: 100 in all.
Expected<Latency> read_small(const std::string& dispatcher, ShardingPolicy policy, int run, int64_t expected,
                             const NetworkConfig& network) {
  auto dataset = parse_dataset("range(100)");
  if (!dataset.ok())
    return dataset.status();
  DistributeOptions opts;
  opts.policy = policy;
  opts.job_name = "bench-latency-" + std::to_string(::getpid()) + "-" + to_string(policy) + "-" +
                  std::to_string(run);
  const auto t0 = Clock::now();
  ClientConfig config;
  config.network = network;
  auto client = Client::connect(dispatcher, config);
  if (!client.ok())
    return client.status();
  auto stream = client->distribute(*dataset, opts);
  if (!stream.ok())
    return stream.status();
  Latency out;
  int64_t n = 0;
  Element e;
  for (;;) {
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(stream->next(e, end, milliseconds{10000}));
    if (end)
      break;
    if (n++ == 0)
      out.first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  out.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (n != expected)
    return data_loss("range(100) gave " + std::to_string(n) + " elements, expected " + std::to_string(expected));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// --- the service

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
  int64_t reps = 3;
  std::string auth_token; // every node's admission token (empty = none)
  NetworkConfig network;  // every node's and consumer's scheduler threads (--scheduler-threads)
};

// The data each worker serves. Producing it should cost little, so that the benchmark measures
// the service and not the pipeline: the reference's own advice for measuring the ideal input
// speed is `take(1).cache().repeat()` (002_32961d854c9a04d3.txt).
std::string dataset_for(int64_t element_size, ShardingPolicy policy) {
  constexpr const char* kEndless = "range(4611686018427387904)"; // 2^62: endless for a benchmark
  if (element_size == 8)
    return kEndless; // int64 scalars, 8 bytes of tensor data each
  const std::string make = ".map(bytes(size=" + std::to_string(element_size) + "))";
  // DYNAMIC needs a splittable source with many splits, so each element is generated.
  if (policy == ShardingPolicy::dynamic)
    return kEndless + make;
  return "range(1)" + make + ".cache().repeat()";
}

// A CA and one node certificate signed by it, made with the `openssl` command in a new temporary
// directory, for `--tls`.
Expected<NetworkConfig> throwaway_tls() {
  char dir[] = "/tmp/conveyor-bench-tls-XXXXXX";
  if (!::mkdtemp(dir))
    return io_error("cannot create a directory for the throwaway TLS certificates");
  const std::string d = dir;
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  const std::string script = "cd " + d + " && openssl req -x509" + key +
                             "-keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca >/dev/null 2>&1 && "
                             "openssl req" + key + "-keyout node.key -out node.csr -subj /CN=bench >/dev/null 2>&1 && "
                             "openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                             "-out node.pem -days 1 >/dev/null 2>&1";
  if (std::system(script.c_str()) != 0)
    return failed_precondition("`--tls`: the `openssl` command could not make certificates in " + d);
  NetworkConfig n;
  n.tls_cert = d + "/node.pem";
  n.tls_key = d + "/node.key";
  n.tls_ca = d + "/ca.pem";
  return n;
}

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
      opts.target_workers = "ANY"; // the network path, as a remote worker (AUTO would go in-process)
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
  const std::string dataset_text = f.element_size == 8 ? std::string{"range(1048576).repeat()"}
                                                       : dataset_for(f.element_size, ShardingPolicy::off);
  auto dataset = parse_dataset(dataset_text);
  if (!dataset.ok())
    return report_status(kInfo.name, dataset.status());
  std::printf("bench service --coordinated %lld: %lld worker(s), %lld-byte elements, %.1f s per run, %lld rep(s)\n"
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
    auto plain = measure_reads(dispatcher.target(), *dataset, f.coordinated, false, base + "-plain", f);
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
    std::printf("  ratio coordinated/uncoordinated (elements/s, same run): median %.2f over %zu rep(s)\n",
                median(ratios), ratios.size());
  return rc;
}

int run_bench_service(const std::vector<std::string>& args) {
  BenchFlags f;
  po::options_description options("service benchmark options");
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
      ("reps", po::value(&f.reps)->default_value(3)->value_name("R"),
       "--coordinated: alternating repetitions of the two runs");
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "error", &f.network))
    return *stop;
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
    return bad(invalid_argument("`--element-size` must be at most 64 MiB, got " + std::to_string(f.element_size)));
  if (!(f.seconds > 0 && f.seconds <= 600))
    return bad(invalid_argument("`--seconds` must be in (0, 600], got " + std::to_string(f.seconds)));
  if (f.workers > 32 || f.consumers > 32)
    return bad(invalid_argument("`--workers` and `--consumers` must be at most 32"));
  if (f.coordinated < 0 || f.coordinated > 32)
    return bad(invalid_argument("`--coordinated` must be in [0, 32], got " + std::to_string(f.coordinated)));
  if (auto st = check_at_least("--reps", f.reps, 1); !st.ok())
    return bad(st);
  if (f.coordinated > 0) {
    if (vm["mode"].as<std::string>() != "off" || f.tls || f.local ||
        vm["metrics-port"].as<int64_t>() != -1 || !vm["consumers"].defaulted())
      return bad(invalid_argument("`--coordinated` runs N consumers of an OFF job over plain TCP: it "
                                  "does not combine with --mode, --consumers, --tls, --local or "
                                  "--metrics-port"));
    if (vm.count("max-outstanding"))
      f.max_outstanding = vm["max-outstanding"].as<int64_t>();
    return run_coordinated_bench(f);
  }
  if (!vm["reps"].defaulted())
    return bad(invalid_argument("`--reps` only applies with `--coordinated`"));
  DistributeOptions opts;
  auto policy = parse_processing_mode(f.mode);
  if (!policy.ok())
    return bad(Status(policy.status().code(), "`--mode`: " + policy.status().message()));
  opts.policy = *policy;
  opts.job_name = "bench-service-" + std::to_string(::getpid());
  opts.compression = f.compression;
  if (vm.count("max-outstanding"))
    opts.max_outstanding_requests = vm["max-outstanding"].as<int64_t>();
  // The network path, as to a remote worker: AUTO would read these in-process workers without
  // the wire (that is the --local line).
  opts.target_workers = "ANY";
  if (auto st = validate(opts); !st.ok())
    return bad(st);
  const std::string dataset_text = dataset_for(f.element_size, opts.policy);
  auto dataset = parse_dataset(dataset_text);
  if (!dataset.ok())
    return report_status(kInfo.name, dataset.status());

  std::printf("bench service: %lld worker(s), %lld consumer(s), %lld-byte elements, %s, compression %s, %.1f s\n"
              "  in-process servers (one actor system each) talking over loopback TCP\n"
              "  dataset: %s\n",
              static_cast<long long>(f.workers), static_cast<long long>(f.consumers),
              static_cast<long long>(f.element_size), to_string(opts.policy), f.compression.c_str(), f.seconds,
              dataset_text.c_str());
  std::fflush(stdout);

  // What the plain run measures besides throughput (the TLS run only adds its MB/s).
  CopyCounts copies_before, copies_after;
  uint64_t allocs_before = 0, allocs_after = 0;
  BufferPool::Stats pool_before, pool_after;
  double service_cpu = 0; // process CPU seconds in the measured window
  double tls_cpu = 0;     // the same in the TLS run (--tls)
  std::string service_threads, tls_threads; // the busiest threads of each run (thread_cpu.hpp)
  int64_t rss_kb = 0, hwm_kb = 0;
  std::vector<double> first[2], total[2];
  Status latency_error;
  // The LOCAL run (--local): its copies and CPU time.
  bool extra_run = false;
  CopyCounts local_copies_before, local_copies_after;
  double local_cpu = 0;

  // One measured service run over `network` (plain, or TLS with --tls).
  auto measure = [&](const NetworkConfig& network, const char* label) -> std::optional<Throughput> {
  DispatcherConfig dconfig;
  dconfig.network = network;
  if (!network.tls()) // metrics (scraped under load) in the plain run
    dconfig.metrics_port = static_cast<int>(vm["metrics-port"].as<int64_t>());
  DispatchServer dispatcher{dconfig};
  if (auto st = dispatcher.start(); !st.ok()) {
    report_error(kInfo.name, "dispatcher: " + st.to_string(), kExitFailure);
    return std::nullopt;
  }
  std::vector<std::unique_ptr<WorkerServer>> workers;
  for (int64_t i = 0; i < f.workers; ++i) {
    WorkerConfig config;
    config.dispatcher_address = dispatcher.target();
    // Workers in one process share one task table; the first serves it (to scrape under load).
    if (i == 0 && dconfig.metrics_port >= 0)
      config.metrics_port = 0;
    config.network = network;
    workers.push_back(std::make_unique<WorkerServer>(config));
    if (auto st = workers.back()->start(); !st.ok()) {
      report_error(kInfo.name, "worker: " + st.to_string(), kExitFailure);
      return std::nullopt;
    }
  }
  ClientConfig client_config;
  client_config.network = network;

  std::atomic<bool> stop{false};
  std::vector<ConsumerCounters> counters(static_cast<std::size_t>(f.consumers));
  std::mutex mu;
  std::vector<Status> errors;
  std::map<std::string, int64_t> per_worker;
  struct {
    int64_t worker_ns = 0, network_ns = 0, split_ns = 0, credit_ns = 0, elapsed_ns = 0;
  } waits; // summed over the consumers (whole stream, warm-up included)
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < f.consumers; ++c) {
    threads.emplace_back([&, c] {
      auto fail = [&](Status st) {
        std::lock_guard lock(mu);
        errors.push_back(std::move(st));
      };
      auto client = Client::connect(dispatcher.target(), client_config);
      if (!client.ok())
        return fail(client.status());
      auto stream = client->distribute(*dataset, opts);
      if (!stream.ok())
        return fail(stream.status());
      ConsumerCounters& mine = counters[static_cast<std::size_t>(c)];
      Element e;
      auto next_check = Clock::now();
      while (!stop.load(std::memory_order_relaxed)) {
        if (!mine.read_every_worker.load(std::memory_order_relaxed) && Clock::now() >= next_check) {
          next_check = Clock::now() + milliseconds{20};
          int64_t seen = 0;
          for (const auto& [w, n] : stream->stats().per_worker)
            seen += n > 0 ? 1 : 0;
          if (seen >= f.workers)
            mine.read_every_worker = true;
        }
        bool end = false;
        Status st = stream->next(e, end, milliseconds{200});
        if (st.code() == ErrorCode::deadline_exceeded)
          continue;
        if (!st.ok())
          return fail(st);
        if (end)
          return fail(failed_precondition("the endless dataset ended"));
        mine.elements.fetch_add(1, std::memory_order_relaxed);
        mine.bytes.fetch_add(static_cast<int64_t>(e.byte_size()), std::memory_order_relaxed);
      }
      std::lock_guard lock(mu);
      const auto stats = stream->stats();
      for (const auto& [w, n] : stats.per_worker)
        per_worker[w] += n;
      waits.worker_ns += stats.wait_worker_ns;
      waits.network_ns += stats.wait_network_ns;
      waits.split_ns += stats.wait_split_ns;
      waits.credit_ns += stats.wait_credit_ns;
      waits.elapsed_ns += stats.elapsed_ns;
    });
  }
  const auto totals = [&] {
    Throughput t;
    for (auto& c : counters) {
      t.elements += c.elements.load();
      t.bytes += c.bytes.load();
    }
    return t;
  };
  // Warm-up: connections, job creation, buffers filling. Then until every consumer has read from
  // every worker (at most 10 s more): a consumer learns a worker's task from the dispatcher, up
  // to a heartbeat later than the first one's, and opens the worker's bulk channel at its first
  // reply; until then large elements go inline, several times slower. Measuring that start-up
  // made 16 MiB runs look like intermittent stalls.
  const milliseconds warmup{std::min<int64_t>(1000, static_cast<int64_t>(f.seconds * 1000 / 2) + 100)};
  std::this_thread::sleep_for(warmup);
  const auto warm_limit = Clock::now() + std::chrono::seconds{10};
  const auto all_read_every_worker = [&] {
    for (auto& c : counters)
      if (!c.read_every_worker.load())
        return false;
    return true;
  };
  bool warmed = all_read_every_worker();
  while (!warmed && Clock::now() < warm_limit) {
    {
      std::lock_guard lock(mu);
      if (!errors.empty())
        break;
    }
    std::this_thread::sleep_for(milliseconds{20});
    warmed = all_read_every_worker();
  }
  if (warmed) // the channels opened on those first replies: let the inline tails drain
    std::this_thread::sleep_for(milliseconds{200});
  const bool plain_run = !network.tls() && !extra_run;
  const Throughput before = totals();
  if (plain_run) {
    copies_before = copy_counts();
    pool_before = BufferPool::global().stats();
    copy_counter_enable(true);
    allocs_before = alloc_count();
    alloc_counter_enable(true);
  }
  if (extra_run) {
    local_copies_before = copy_counts();
    copy_counter_enable(true);
  }
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  const auto threads0 = thread_cpu_snapshot();
  std::this_thread::sleep_for(Seconds(f.seconds));
  Throughput service = totals();
  const auto threads1 = thread_cpu_snapshot();
  if (plain_run)
    service_cpu = process_cpu_seconds() - cpu0;
  if (network.tls())
    tls_cpu = process_cpu_seconds() - cpu0;
  if (extra_run) {
    local_cpu = process_cpu_seconds() - cpu0;
    copy_counter_enable(false);
    local_copies_after = copy_counts();
  }
  if (plain_run) {
    copy_counter_enable(false);
    copies_after = copy_counts();
    alloc_counter_enable(false);
    allocs_after = alloc_count();
    pool_after = BufferPool::global().stats();
    rss_kb = proc_status_kb("VmRSS");
    hwm_kb = proc_status_kb("VmHWM");
  }
  service.seconds = Seconds(Clock::now() - t0).count();
  if (plain_run)
    service_threads = busiest_threads(threads0, threads1, service.seconds);
  if (network.tls())
    tls_threads = busiest_threads(threads0, threads1, service.seconds);
  service.elements -= before.elements;
  service.bytes -= before.bytes;
  stop = true;
  for (auto& t : threads)
    t.join();
  // Small datasets on the same cluster: latency of a whole range(100), OFF and DYNAMIC.
  for (int run = 0; plain_run && run < 5 && latency_error.ok(); ++run)
    for (int m = 0; m < 2 && latency_error.ok(); ++m) {
      auto l = read_small(dispatcher.target(), m == 0 ? ShardingPolicy::off : ShardingPolicy::dynamic, run,
                          m == 0 ? 100 * f.workers : 100, network);
      if (!l.ok()) {
        latency_error = l.status();
        break;
      }
      first[m].push_back(l->first_ms);
      total[m].push_back(l->total_ms);
    }
  for (auto& w : workers)
    w->stop();
  dispatcher.stop();
  if (!errors.empty()) {
    for (const auto& e : errors)
      std::fprintf(stderr, "bench service: consumer failed: %s\n", e.to_string().c_str());
    return std::nullopt;
  }
  if (service.elements == 0) {
    report_error(kInfo.name, "no element arrived in the measured window", kExitFailure);
    return std::nullopt;
  }

  std::printf("  %-8s: %12.0f elements/s %10.1f MB/s   (%lld elements in %.2f s)\n", label,
              service.elements_per_s(), service.mb_per_s(), static_cast<long long>(service.elements),
              service.seconds);
  for (const auto& [w, n] : per_worker)
    std::printf("            worker %s: %lld elements\n", w.c_str(), static_cast<long long>(n));
  if (waits.elapsed_ns > 0) {
    const double e = static_cast<double>(waits.elapsed_ns) / 100.0;
    std::printf("            consumer waited (%% of its stream's time): on workers %.0f%%, network %.0f%%,"
                " splits %.0f%%, credit %.0f%%\n",
                waits.worker_ns / e, waits.network_ns / e, waits.split_ns / e, waits.credit_ns / e);
  }
  std::fflush(stdout);
  return service;
  };

  NetworkConfig plain_network = f.network;
  plain_network.auth_token = f.auth_token;
  auto plain = measure(plain_network, "service");
  if (!plain)
    return kExitFailure;
  const Throughput service = *plain;
  if (f.tls) {
    auto tls_network = throwaway_tls();
    if (!tls_network.ok())
      return report_status(kInfo.name, tls_network.status());
    tls_network->auth_token = f.auth_token;
    tls_network->scheduler_threads = f.network.scheduler_threads;
    auto tls = measure(*tls_network, "TLS");
    if (!tls)
      return kExitFailure;
    std::printf("  TLS/plain: %.2f (MB/s, mutual TLS between every pair of nodes)\n",
                service.mb_per_s() > 0 ? tls->mb_per_s() / service.mb_per_s() : 0.0);
    if (tls->elements > 0 && service.elements > 0)
      std::printf("  TLS cpu  : %.2f us per element (%.2f cores busy; plain %.2f us; process CPU time)\n",
                  tls_cpu * 1e6 / static_cast<double>(tls->elements),
                  tls->seconds > 0 ? tls_cpu / tls->seconds : 0.0,
                  service_cpu * 1e6 / static_cast<double>(service.elements));
    std::printf("  TLS threads: %s (share of one core)\n", tls_threads.c_str());
  }
  if (f.local) {
    opts.target_workers = "LOCAL";
    extra_run = true;
    auto local = measure(plain_network, "LOCAL");
    extra_run = false;
    if (!local)
      return kExitFailure;
    std::printf("  LOCAL/ANY: %.2f (MB/s; same workers and consumers, in-process path vs loopback TCP)\n",
                service.mb_per_s() > 0 ? local->mb_per_s() / service.mb_per_s() : 0.0);
    if (local->elements > 0 && service.elements > 0) {
      const double l_us = local_cpu * 1e6 / static_cast<double>(local->elements);
      const double a_us = service_cpu * 1e6 / static_cast<double>(service.elements);
      std::printf("  LOCAL cpu: %.2f us per element (ANY %.2f us; process CPU time)\n", l_us, a_us);
    }
    if (copy_counter_available() && local->elements > 0) {
      const double n = static_cast<double>(local->elements);
      std::printf("  LOCAL copies: %.2f memcpy/memmove calls >= 64 KiB per element, %.2f x the element's "
                  "bytes copied\n",
                  static_cast<double>(local_copies_after.copy_calls - local_copies_before.copy_calls) / n,
                  static_cast<double>(local_copies_after.copy_bytes - local_copies_before.copy_bytes) /
                    (n * static_cast<double>(f.element_size)));
    }
  }

  // Same elements, same sizes, over a plain socket; bounded in time like the service run.
  const double raw_cpu0 = process_cpu_seconds();
  auto raw = raw_tcp(service.elements, f.element_size,
                     milliseconds{static_cast<int64_t>(f.seconds * 2000) + 5000});
  const double raw_cpu = process_cpu_seconds() - raw_cpu0;
  if (!raw.ok())
    return report_status(kInfo.name, raw.status());
  std::printf("  raw TCP : %12.0f elements/s %10.1f MB/s   (%lld elements in %.2f s, 8-byte frame headers)\n",
              raw->elements_per_s(), raw->mb_per_s(), static_cast<long long>(raw->elements), raw->seconds);
  std::printf("  ratio   : %.2f of raw TCP (MB/s)\n", raw->mb_per_s() > 0 ? service.mb_per_s() / raw->mb_per_s() : 0.0);
  if (service.elements > 0 && raw->elements > 0) {
    const double s_us = service_cpu * 1e6 / static_cast<double>(service.elements);
    const double r_us = raw_cpu * 1e6 / static_cast<double>(raw->elements);
    std::printf("  cpu     : %.2f us per element service (%.2f cores busy), %.2f us raw TCP; raw/service %.2f"
                " (process CPU time: steadier than elements/s on a shared machine)\n",
                s_us, service.seconds > 0 ? service_cpu / service.seconds : 0.0, r_us, s_us > 0 ? r_us / s_us : 0.0);
  }
  // A many-core machine with cores to spare and low throughput: one thread at a full core is
  // the serialization point.
  std::printf("  threads : %s (service run, share of one core)\n", service_threads.c_str());
  if (copy_counter_available()) {
    const double n = static_cast<double>(service.elements);
    const double calls = static_cast<double>(copies_after.copy_calls - copies_before.copy_calls);
    const double bytes = static_cast<double>(copies_after.copy_bytes - copies_before.copy_bytes);
    const double fills = static_cast<double>(copies_after.fill_bytes - copies_before.fill_bytes);
    std::printf("  copies  : %.2f memcpy/memmove calls >= 64 KiB per element, %.2f x the element's bytes copied,"
                " %.2f x zero-filled (whole process: pipeline output to consumer tensor)\n",
                calls / n, bytes / (n * static_cast<double>(f.element_size)),
                fills / (n * static_cast<double>(f.element_size)));
  } else {
    std::printf("  copies  : not counted (sanitizer build)\n");
  }
  if (alloc_counter_available())
    std::printf("  allocs  : %.2f heap allocations per element (malloc/calloc/realloc calls, whole process:"
                " workers, dispatcher and consumer)\n",
                static_cast<double>(allocs_after - allocs_before) / static_cast<double>(service.elements));
  else
    std::printf("  allocs  : not counted (sanitizer build)\n");
  {
    const double n = static_cast<double>(service.elements);
    const auto hits = pool_after.hits - pool_before.hits, misses = pool_after.misses - pool_before.misses;
    std::printf("  buffers : %.2f fresh large buffers per element (%lld recycled, %lld new: receive buffers and compressed frames from the"
                " bulk path's pool, pipeline/tensor/buffer_pool.hpp)\n",
                n > 0 ? static_cast<double>(misses) / n : 0.0, static_cast<long long>(hits),
                static_cast<long long>(misses));
  }
  const int64_t credits = opts.max_outstanding_requests.value_or(65536);
  const double bound_mib =
    std::min<double>(static_cast<double>(credits) * static_cast<double>(f.element_size), opts.max_buffered_bytes) /
    (1 << 20);
  std::printf("  memory  : process RSS %.1f MiB (peak %.1f MiB; dispatcher, workers' buffers and consumers);"
              " consumer bound min(credits x element size, max_buffered_bytes) = %.1f MiB per consumer\n",
              rss_kb / 1024.0, hwm_kb / 1024.0, bound_mib);
  if (!latency_error.ok()) {
    std::fprintf(stderr, "bench service: latency run failed: %s\n", latency_error.to_string().c_str());
    return kExitFailure;
  }
  const double off_total = median(total[0]), dyn_total = median(total[1]);
  std::printf("  latency : range(100) end to end (median of %zu, new client + job each): OFF %.1f ms, DYNAMIC %.1f ms"
              " (DYNAMIC/OFF %.2f); first element OFF %.1f ms, DYNAMIC %.1f ms\n",
              total[0].size(), off_total, dyn_total, off_total > 0 ? dyn_total / off_total : 0.0,
              median(first[0]), median(first[1]));
  std::printf("  load    : %s\n", load_average().c_str());
  return kExitOk;
}

const Benchmark reg{"service", "dispatcher + workers + consumers on loopback vs raw TCP", run_bench_service};

} // namespace
} // namespace conveyor::apps
