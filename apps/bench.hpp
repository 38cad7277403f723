// `conveyor bench <name>`: each benchmark lives in apps/bench_<name>.cpp and registers itself
// with a static Benchmark object.
#pragma once

#include <string>
#include <vector>

namespace conveyor::apps {

using BenchFn = int (*)(const std::vector<std::string>& args);

struct Benchmark {
  Benchmark(const char* name, const char* summary, BenchFn fn);
};

// /proc/loadavg's line: printed beside every figure, since these machines are shared.
std::string load_average();

} // namespace conveyor::apps
