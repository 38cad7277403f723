// `conveyor bench stream-copy`: the copy of an element into a Python pool process's input region
// (process_pool.cpp) with memcpy against streaming stores (pipeline/runtime/streaming_copy.hpp),
// in turns. A writer thread copies N bytes into a shared buffer, then hands it to a reader thread
// pinned to another core that reads every byte (as the pool's function reads its argument) and
// hands it back, as the worker and a pool process do; without the reader, the same copies into
// lines the writer holds. Per copy: the copy's time, the reader's time and the round's.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench.hpp"
#include "apps/cli_common.hpp"
#include "pipeline/runtime/streaming_copy.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "bench stream-copy", "[--bytes N] [--rounds R] [--reps K]",
  "Copies N bytes into a buffer that a thread on another core then reads, R times, with memcpy\n"
  "and with streaming stores (the Python pool's input copy), in turns; also without the reader.\n"
  "Prints the fastest of K runs per way: the copy, the read and the round, in us per copy."};

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set); // best effort (a cpuset may refuse)
}

struct Figures {
  double copy = 0, read = 0, round = 0; // us per copy
};

// `rounds` copies of `src` into `dst` by `streaming` or memcpy; `reader`: another thread reads
// `dst` after each one (the writer waits for it).
Figures run(bool streaming, bool reader, std::vector<unsigned char>& dst,
            const std::vector<unsigned char>& src, int64_t rounds) {
  std::mutex mu;
  std::condition_variable cv;
  bool readers_turn = false, done = false;
  Clock::duration read_time{};
  volatile uint64_t sink = 0; // keeps the reader's sum
  std::thread other;
  if (reader)
    other = std::thread([&] {
      pin_to(1);
      std::unique_lock<std::mutex> lock{mu};
      for (;;) {
        cv.wait(lock, [&] { return readers_turn || done; });
        if (done)
          return;
        const auto t0 = Clock::now();
        uint64_t sum = 0;
        for (std::size_t i = 0; i + 8 <= dst.size(); i += 8) {
          uint64_t word;
          std::memcpy(&word, dst.data() + i, 8);
          sum += word;
        }
        sink = sink + sum;
        read_time += Clock::now() - t0;
        readers_turn = false;
        cv.notify_all();
      }
    });
  pin_to(0);
  Clock::duration copy_time{};
  const auto start = Clock::now();
  for (int64_t r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    if (!streaming || !streaming_copy(dst.data(), src.data(), src.size()))
      std::memcpy(dst.data(), src.data(), src.size());
    copy_time += Clock::now() - t0;
    if (reader) {
      std::unique_lock<std::mutex> lock{mu};
      readers_turn = true;
      cv.notify_all();
      cv.wait(lock, [&] { return !readers_turn; });
    }
  }
  const auto total = Clock::now() - start;
  if (reader) {
    {
      std::lock_guard<std::mutex> lock{mu};
      done = true;
    }
    cv.notify_all();
    other.join();
  }
  const double n = static_cast<double>(rounds);
  return {micros(copy_time) / n, micros(read_time) / n, micros(total) / n};
}

int bench_stream_copy(const std::vector<std::string>& args) {
  int64_t bytes = 1 << 20;
  int64_t rounds = 2000;
  int64_t reps = 5;
  po::options_description options("stream-copy benchmark options");
  // clang-format off
  options.add_options()
      ("bytes", po::value(&bytes)->default_value(bytes)->value_name("N"), "bytes per copy")
      ("rounds", po::value(&rounds)->default_value(rounds)->value_name("R"), "copies per run")
      ("reps", po::value(&reps)->default_value(reps)->value_name("K"),
       "runs per way (the fastest is printed)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (bytes < 1 || bytes > (int64_t{1} << 30))
    return bad(invalid_argument("`--bytes` must be in [1, 2^30], got " + std::to_string(bytes)));
  if (rounds < 1 || rounds > 10000000)
    return bad(
      invalid_argument("`--rounds` must be in [1, 10000000], got " + std::to_string(rounds)));
  if (reps < 1 || reps > 100)
    return bad(invalid_argument("`--reps` must be in [1, 100], got " + std::to_string(reps)));
  std::vector<unsigned char> src(static_cast<std::size_t>(bytes));
  for (std::size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<unsigned char> dst(src.size(), 0);
  const bool has_streaming = streaming_copy(dst.data(), src.data(), 0);
  std::printf("load average before: %s\n", load_average().c_str());
  std::printf("%lld B per copy, %lld copies per run, fastest of %lld; streaming stores: %s\n",
              static_cast<long long>(bytes), static_cast<long long>(rounds),
              static_cast<long long>(reps), has_streaming ? "AVX2" : "none (memcpy both ways)");
  std::printf("%-34s %10s %10s %10s\n", "way (us per copy)", "copy", "read", "round");
  for (const bool reader : {true, false}) {
    Figures best[2];
    for (auto& b : best)
      b = {1e300, 1e300, 1e300};
    for (int64_t k = 0; k < reps; ++k)
      for (const bool streaming : {false, true}) { // in turns: the load moves under both alike
        const Figures f = run(streaming, reader, dst, src, rounds);
        Figures& b = best[streaming ? 1 : 0];
        b = {std::min(b.copy, f.copy), std::min(b.read, f.read), std::min(b.round, f.round)};
      }
    for (const bool streaming : {false, true}) {
      const Figures& b = best[streaming ? 1 : 0];
      const std::string way = std::string(streaming ? "streaming" : "memcpy") +
                              (reader ? ", read on another core" : ", no reader");
      if (reader)
        std::printf("%-34s %10.2f %10.2f %10.2f\n", way.c_str(), b.copy, b.read, b.round);
      else
        std::printf("%-34s %10.2f %10s %10.2f\n", way.c_str(), b.copy, "-", b.round);
    }
  }
  std::printf("load average after: %s\n", load_average().c_str());
  return 0;
}

const Benchmark reg{"stream-copy",
                    "the pool's input copy: memcpy against streaming stores, read on another core",
                    bench_stream_copy};

} // namespace
} // namespace conveyor::apps
