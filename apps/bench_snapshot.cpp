// `conveyor bench snapshot`: distributed snapshots (conveyor/snapshot.hpp) against their plain
// baselines, in one run, several repetitions, the load average beside each:
//   (a) save: distributed_save of range(N).map(bytes(size=B)) written by W worker processes
//       (default 2) vs (b) the same elements written by one local cache() file in this process
//   (c) load: load(DIR) read to the end in this process vs (d) a raw read() of the same chunk
//       files' bytes
// The ratios (a)/(b) and (c)/(d) are the figures (the issue's target: >= 0.8); (a) is also shown
// against (b) plus an fsync of its files (a snapshot syncs each chunk, cache() nothing), and each
// save's timeline (first and last chunk commits, DONE) says where its time went, and an untimed
// extra load counts its heap allocations per element. The load opens the next chunk on another
// thread while it decodes one (pipeline/kernels/chunk_read_ahead.hpp), so it may use up to two
// cores where the raw read uses one: each repetition also gives both sides' CPU time per element
// (the process's, all its threads), the cores each used (CPU time / wall time), and the load's
// reader thread's own CPU time per element (the read-ahead's share excluded).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <vector>

#include "apps/alloc_counter.hpp"
#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "apps/snapshot_reads.hpp"
#include "conveyor/snapshot.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench snapshot",
  "[--elements N] [--element-bytes B] [--workers W] [--repetitions R] [--chunk-bytes C]",
  "Measures distributed snapshots: save throughput on W worker processes vs the same elements\n"
  "written by one local cache() file, and load throughput vs a raw read of the same bytes, in\n"
  "one run (R repetitions, the load average beside each); RATIO+S: the save against cache()\n"
  "plus an fsync of its files. The load opens the next chunk on a second thread while it\n"
  "decodes one: its CPU time per element and the cores it used are shown beside the raw read's."};

// read() of every committed chunk file (listed first, within the time); the bytes read.
Expected<int64_t> raw_read(const std::string& dir) {
  auto chunks = snapshot::committed_chunks(dir);
  if (!chunks.ok())
    return chunks.status();
  return read_chunk_files(*chunks);
}

// fsync of the files in `dir` whose names start with `prefix`, and of `dir`: what the cache()
// baseline would add to be as durable as a snapshot's chunks (each synced before its commit).
Status sync_prefix(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0 || !e.is_regular_file(ec))
      continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return io_error("cannot open " + e.path().string());
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0)
      return io_error("cannot sync " + e.path().string());
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return io_error("cannot open " + dir);
  ::fsync(fd);
  ::close(fd);
  return Status::OK();
}

// Seconds from `t0` (a system_clock time) to the first and last chunk commits and to DONE, by
// the files' modification times: where a save's time goes (start-up, writing, finishing).
struct Timeline {
  double first = 0, last = 0, done = 0;
};
Timeline save_timeline(const std::string& snap, std::chrono::system_clock::time_point t0) {
  namespace fs = std::filesystem;
  const auto since = [&](const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0)
      return -1.0;
    const auto t = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    return std::chrono::duration<double>(t - t0).count();
  };
  Timeline out;
  out.first = 1e9;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(snap + "/chunks", ec)) {
    const double t = since(e.path());
    out.first = std::min(out.first, t);
    out.last = std::max(out.last, t);
  }
  out.done = since(snap + "/DONE");
  return out;
}

// Bytes of the files in `dir` whose names start with `prefix` (what cache(dir/prefix) wrote).
int64_t prefix_bytes(const std::string& dir, const std::string& prefix) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.is_regular_file(ec))
      total += static_cast<int64_t>(e.file_size(ec));
  return total;
}

Status run(int64_t elements, int64_t element_bytes, int64_t workers, int64_t repetitions,
           int64_t chunk_bytes) {
  const TempDir temp{"conveyor-bench-snapshot"};
  if (temp.path().empty())
    return io_error("cannot create a temp dir");
  const std::string root = temp.path();
  std::vector<ChildNode> nodes;
  StopChildrenOnExit stop{nodes};
  const std::vector<std::string> allow{"--allow-path", root};
  CONVEYOR_RETURN_IF_ERROR(start_process_cluster(
    nodes, static_cast<int>(workers), "bench-snapshot-" + std::to_string(::getpid()) + "-", allow,
    allow, root));
  auto client = Client::connect(nodes.front().address);
  if (!client.ok())
    return client.status();
  const Dataset dataset =
    Dataset::range(elements).map(FunctionRef{"bytes", {{"size", element_bytes}}});
  std::printf("conveyor bench snapshot: %lld elements of %lld bytes, %lld workers, chunks of "
              "%lld bytes, no compression\n\n",
              static_cast<long long>(elements), static_cast<long long>(element_bytes),
              static_cast<long long>(workers), static_cast<long long>(chunk_bytes));
  // RATIO+S: the save against cache() followed by an fsync of its files (the save fsyncs every
  // chunk before it commits it; cache() alone syncs nothing).
  std::printf("%-4s %-20s %-20s %-6s %-7s %-20s %-20s %-6s %s\n", "REP", "SAVE (workers) MB/s",
              "CACHE() FILE MB/s", "RATIO", "RATIO+S", "LOAD MB/s", "RAW READ MB/s", "RATIO",
              "LOADAVG");
  for (int64_t rep = 1; rep <= repetitions; ++rep) {
    const std::string snap = root + "/snap-" + std::to_string(rep);
    const std::string cache = root + "/cache-" + std::to_string(rep);
    SaveOptions options;
    options.compression = "none";
    options.chunk_bytes = chunk_bytes;
    const auto wall0 = std::chrono::system_clock::now();
    auto t0 = Clock::now();
    auto saved = distributed_save(*client, dataset, snap, options);
    const double save_s = seconds_since(t0);
    if (!saved.ok())
      return saved.status().with_context("the distributed save");
    if (saved->elements != elements)
      return internal_error("the save wrote " + std::to_string(saved->elements) +
                            " elements, not " + std::to_string(elements));
    t0 = Clock::now();
    auto cached = drain(dataset.cache(cache));
    const double cache_s = seconds_since(t0);
    if (!cached.ok())
      return cached.status().with_context("the cache() baseline");
    CONVEYOR_RETURN_IF_ERROR(sync_prefix(root, "cache-" + std::to_string(rep)));
    const double cache_sync_s = seconds_since(t0);
    const double mb = static_cast<double>(saved->bytes) / 1e6;
    const double cache_mb =
      static_cast<double>(prefix_bytes(root, "cache-" + std::to_string(rep))) / 1e6;
    t0 = Clock::now();
    double cpu0 = process_cpu_seconds();
    const double reader_cpu0 = thread_cpu_seconds();
    auto loaded = drain(Dataset::load(snap));
    const double load_s = seconds_since(t0), load_cpu_s = process_cpu_seconds() - cpu0;
    const double reader_cpu_s = thread_cpu_seconds() - reader_cpu0;
    if (!loaded.ok())
      return loaded.status().with_context("the load");
    t0 = Clock::now();
    cpu0 = process_cpu_seconds();
    auto raw = raw_read(snap);
    const double raw_s = seconds_since(t0), raw_cpu_s = process_cpu_seconds() - cpu0;
    if (!raw.ok())
      return raw.status();
    const double save_rate = mb / save_s, cache_rate = cache_mb / cache_s;
    const double load_rate = mb / load_s, raw_rate = static_cast<double>(*raw) / 1e6 / raw_s;
    char a[32], b[32], c[32], d[32];
    std::snprintf(a, sizeof a, "%.1f (%.2f s)", save_rate, save_s);
    std::snprintf(b, sizeof b, "%.1f (%.2f s)", cache_rate, cache_s);
    std::snprintf(c, sizeof c, "%.1f (%.3f s)", load_rate, load_s);
    std::snprintf(d, sizeof d, "%.1f (%.3f s)", raw_rate, raw_s);
    const Timeline timeline = save_timeline(snap, wall0);
    const double cache_sync_rate = cache_mb / cache_sync_s;
    std::printf("%-4lld %-20s %-20s %-6.2f %-7.2f %-20s %-20s %-6.2f %s\n",
                static_cast<long long>(rep), a, b, save_rate / cache_rate,
                save_rate / cache_sync_rate, c, d, load_rate / raw_rate, load_average().c_str());
    std::printf("     save: first chunk committed at %.2f s, last at %.2f s, DONE at %.2f s\n",
                timeline.first, timeline.last, timeline.done);
    const double per_element = 1e9 / static_cast<double>(std::max<int64_t>(*loaded, 1));
    std::printf("     load: %.0f ns wall, %.0f ns CPU per element (%.2f cores; the reader's "
                "thread %.0f ns); raw read: %.0f ns wall, %.0f ns CPU (%.2f cores)\n",
                load_s * per_element, load_cpu_s * per_element, load_cpu_s / load_s,
                reader_cpu_s * per_element, raw_s * per_element, raw_cpu_s * per_element,
                raw_cpu_s / raw_s);
    // Heap allocations per element of a load, counted in one more read after the timed ones (the
    // counting itself is kept out of the measured rates).
    if (alloc_counter_available()) {
      alloc_counter_enable(true);
      const uint64_t before = alloc_count();
      auto counted = drain(Dataset::load(snap));
      alloc_counter_enable(false);
      if (!counted.ok())
        return counted.status().with_context("the counted load");
      std::printf("     load: %.2f heap allocations per element\n",
                  static_cast<double>(alloc_count() - before) /
                    static_cast<double>(std::max<int64_t>(*counted, 1)));
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) // this repetition's
      if (e.path().filename().string().rfind("cache-", 0) == 0)
        std::filesystem::remove(e.path(), ec);
    std::filesystem::remove_all(snap, ec);
  }
  return Status::OK();
}

int run_bench_snapshot(const std::vector<std::string>& args) {
  int64_t elements = 200000, element_bytes = 1024, workers = 2, repetitions = 3;
  int64_t chunk_bytes = 8 << 20;
  po::options_description options("snapshot benchmark options");
  // clang-format off
  options.add_options()
      ("elements,n", po::value(&elements)->default_value(elements)->value_name("N"),
       "elements saved per repetition")
      ("element-bytes", po::value(&element_bytes)->default_value(element_bytes)->value_name("B"),
       "bytes per element (map(bytes(size=B)))")
      ("workers", po::value(&workers)->default_value(workers)->value_name("W"),
       "worker processes that write the snapshot")
      ("repetitions", po::value(&repetitions)->default_value(repetitions)->value_name("R"),
       "repetitions of every measurement")
      ("chunk-bytes", po::value(&chunk_bytes)->default_value(chunk_bytes)->value_name("C"),
       "encoded bytes per chunk file");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = check_at_least("--elements", elements, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--element-bytes", element_bytes, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--workers", workers, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--repetitions", repetitions, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--chunk-bytes", chunk_bytes, 1); !st.ok())
    return bad(st);
  if (workers > 64)
    return bad(invalid_argument("`--workers` must be at most 64, got " + std::to_string(workers)));
  if (Status s = run(elements, element_bytes, workers, repetitions, chunk_bytes); !s.ok())
    return report_error(kInfo.name, s.to_string(), kExitFailure);
  return kExitOk;
}

const Benchmark reg{"snapshot",
                    "distributed snapshots: save on workers vs one cache() file, load vs a raw "
                    "read",
                    run_bench_snapshot};

} // namespace
} // namespace conveyor::apps
