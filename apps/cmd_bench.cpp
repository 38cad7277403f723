// `conveyor bench <name> [flags]` — runs one registered benchmark (apps/bench_*.cpp).
#include <stdlib.h>
#include <time.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "apps/bench.hpp"
#include "apps/subcommand.hpp"

namespace conveyor::apps {

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string l;
  std::getline(f, l);
  return l;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

namespace {
double cpu_seconds(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}
} // namespace

double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }
double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }

TempDir::TempDir(const std::string& name) {
  std::string pattern = (std::filesystem::temp_directory_path() / (name + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) != nullptr)
    path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty())
    std::filesystem::remove_all(path_, ec);
}

Expected<ElementStream> open_running_job(Client& client, const Dataset& dataset,
                                         const std::string& what,
                                         std::chrono::milliseconds first_within,
                                         const DistributeOptions& options) {
  auto stream = client.distribute(dataset, options);
  if (!stream.ok())
    return stream.status().with_context(what);
  Element e;
  bool end = false;
  if (Status st = stream->next(e, end, first_within); !st.ok())
    return st.with_context(what);
  if (end)
    return data_loss(what + " ended at once");
  return stream;
}

namespace {

struct BenchEntry {
  const char* summary;
  BenchFn fn;
};

std::map<std::string, BenchEntry>& benches() {
  static std::map<std::string, BenchEntry> t;
  return t;
}

int run_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf(
      "usage: conveyor bench <name> [flags]   (conveyor bench <name> --help)\n\nbenchmarks:\n");
    for (const auto& [name, e] : benches())
      std::printf("  %-10s %s\n", name.c_str(), e.summary);
    return args.empty() ? 2 : 0;
  }
  auto it = benches().find(args[0]);
  if (it == benches().end()) {
    std::fprintf(stderr, "conveyor bench: unknown benchmark `%s` (see conveyor bench --help)\n",
                 args[0].c_str());
    return 2;
  }
  return it->second.fn(std::vector<std::string>(args.begin() + 1, args.end()));
}

const Subcommand reg{"bench", "run a benchmark (pipeline, service)", run_bench};

} // namespace

Benchmark::Benchmark(const char* name, const char* summary, BenchFn fn) {
  benches()[name] = BenchEntry{summary, fn};
}

} // namespace conveyor::apps
