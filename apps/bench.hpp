// `conveyor bench <name>`: each benchmark lives in apps/bench_<name>.cpp and registers itself
// with a static Benchmark object.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "conveyor/client.hpp"

namespace conveyor::apps {

using BenchFn = int (*)(const std::vector<std::string>& args);

struct Benchmark {
  Benchmark(const char* name, const char* summary, BenchFn fn);
};

// /proc/loadavg's line: printed beside every figure, since these machines are shared.
std::string load_average();

// Wall seconds since `t`; CPU seconds of this thread and of the whole process so far (every
// thread's: a cost per element that a shared machine's other load moves less than a rate).
double seconds_since(std::chrono::steady_clock::time_point t);
double thread_cpu_seconds();
double process_cpu_seconds();

// A fresh directory under the system's temp dir, named NAME-XXXXXX, removed with all it holds
// when this goes; path() is empty when it could not be made.
class TempDir {
public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

// Opens a job of `dataset` (OFF unless `options` say otherwise) and waits up to `first_within`
// for its first element, so that the job runs when this returns; errors name it `what` ("job
// 3"), also one that ends at once.
Expected<ElementStream> open_running_job(Client& client, const Dataset& dataset,
                                         const std::string& what,
                                         std::chrono::milliseconds first_within,
                                         const DistributeOptions& options = {});

} // namespace conveyor::apps
