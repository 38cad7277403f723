#include "bench_stream.hpp"

#include <time.h>

#include <chrono>

#include "conveyor/client.hpp"
#include "py_status.hpp"

namespace py = pybind11;
using namespace conveyor;
using std::chrono::milliseconds;

namespace conveyor_python {

py::tuple bench_cpp_stream(const std::string& service, const Dataset& dataset,
                           const DistributeOptions& options, double warmup_s, double seconds,
                           bool two_step) {
  using Clock = std::chrono::steady_clock;
  int64_t elements = 0, bytes = 0;
  double elapsed = 0, cpu = 0;
  const auto thread_cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  {
    py::gil_scoped_release release;
    auto client = unwrap(Client::connect(service));
    auto stream = unwrap(client.distribute(dataset, options));
    Element e;
    bool end = false;
    const auto run = [&](double limit, bool count) {
      const auto start = Clock::now();
      const auto until = start + std::chrono::duration<double>(limit);
      while (Clock::now() < until) {
        for (int i = 0; i < 64; ++i) {
          if (!two_step) {
            check(stream.next(e, end));
          } else { // the Python iterator's calls: a non-blocking try, then a bounded wait
            Status st = stream.next(e, end, milliseconds{0});
            while (st.code() == ErrorCode::deadline_exceeded)
              st = stream.next(e, end, milliseconds{100});
            check(st);
          }
          if (end)
            raise(failed_precondition("the benchmark dataset ended"));
          if (count) {
            ++elements;
            bytes += static_cast<int64_t>(e.byte_size());
          }
        }
      }
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    run(warmup_s, false);
    const double cpu0 = thread_cpu();
    elapsed = run(seconds, true);
    cpu = thread_cpu() - cpu0;
  }
  return py::make_tuple(elements, bytes, elapsed, cpu);
}

} // namespace conveyor_python
