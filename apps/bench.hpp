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

// Opens a job of `dataset` (OFF unless `options` say otherwise) and waits up to `first_within`
// for its first element, so that the job runs when this returns; errors name it `what` ("job
// 3"), also one that ends at once.
Expected<ElementStream> open_running_job(Client& client, const Dataset& dataset,
                                         const std::string& what,
                                         std::chrono::milliseconds first_within,
                                         const DistributeOptions& options = {});

} // namespace conveyor::apps
