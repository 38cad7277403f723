// `conveyor bench chunk-read`: where a snapshot chunk's open goes (issue 37). Over N chunk files
// of C bytes in the page cache (written first, in a temp dir), each way of getting their bytes
// checked is timed per KiB, the ways taking turns pass after pass (so a busy neighbour slows all
// of them alike):
//   read()          read() into one reused 4 MiB buffer (`bench snapshot`'s raw read); + CRC32C
//                   of each piece; and 256 KiB windows into a reused 2 MiB huge-page buffer,
//                   each checksummed while in cache
//   mmap            MAP_POPULATE (the load's open, pipeline/io/snapshot_files.cpp), page faults,
//                   MADV_SEQUENTIAL + MADV_WILLNEED, MADV_HUGEPAGE; each then checksummed (the
//                   map, the checksum and the munmap timed apart), and the checksum loop without
//                   and with its prefetching (pipeline/io/crc32c.cpp)
//   loads           a plain pass of 8-byte loads over the mapping: the memory's own read rate
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <vector>

#include "apps/bench.hpp"
#include "apps/cli_common.hpp"
#include "pipeline/io/crc32c.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench chunk-read", "[--chunks N] [--chunk-bytes C] [--passes P]",
  "Measures the ways of reading and checksumming snapshot chunk files in the page cache, per\n"
  "KiB: read() into a reused buffer (the snapshot benchmark's raw read), read() windows\n"
  "checksummed while in cache, and mappings (populated, faulted, advised sequential or huge)\n"
  "checksummed with and without prefetching; map, checksum and munmap timed apart."};

// Seconds spent in each part of one pass over every file.
struct Pass {
  double total = 0, map = 0, check = 0, unmap = 0;
};

using Crc = uint32_t (*)(const void*, std::size_t, uint32_t);

Crc implementation(const char* name) {
  for (const auto& impl : crc32c_implementations())
    if (std::strcmp(impl.name, name) == 0)
      return impl.fn;
  return nullptr;
}

volatile uint64_t g_sink; // keeps the checksums and loads from being optimized away

// XOR of every 8-byte word: a pass of plain loads, the memory's read rate.
uint64_t xor_words(const char* p, std::size_t n) {
  uint64_t a[8] = {};
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 8; ++k) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * k, 8);
      a[k] ^= v;
    }
  uint64_t out = 0;
  for (uint64_t v : a)
    out ^= v;
  return out;
}

struct Way {
  std::string name;
  std::function<Status(const std::string& file, Pass& pass)> run;
};

// A mapping of `size` bytes of each file (mmap with `flags`, then each madvise `advice`), checked
// by `check`; the map (with the advice), the check and the munmap timed apart.
Way mapped(std::string name, std::size_t size, int flags, std::vector<int> advice,
           std::function<uint64_t(const char*, std::size_t)> check) {
  return {std::move(name), [=](const std::string& file, Pass& pass) -> Status {
            const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0)
              return io_error("cannot open " + file);
            auto t = Clock::now();
            void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | flags, fd, 0);
            ::close(fd);
            if (p == MAP_FAILED)
              return io_error("cannot map " + file);
            for (int a : advice)
              ::madvise(p, size, a);
            pass.map += seconds_since(t);
            t = Clock::now();
            g_sink = check(static_cast<const char*>(p), size);
            pass.check += seconds_since(t);
            t = Clock::now();
            ::munmap(p, size);
            pass.unmap += seconds_since(t);
            return Status::OK();
          }};
}

// read() of `file` in pieces of `piece` bytes into `buffer`, each checked by `check` (or not).
Way read_into(std::string name, char* buffer, std::size_t piece,
              std::function<uint64_t(const char*, std::size_t)> check) {
  return {std::move(name), [=](const std::string& file, Pass& pass) -> Status {
            const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0)
              return io_error("cannot open " + file);
            for (;;) {
              auto t = Clock::now();
              const ssize_t got = ::read(fd, buffer, piece);
              pass.map += seconds_since(t);
              if (got <= 0) {
                ::close(fd);
                return got == 0 ? Status::OK() : io_error("cannot read " + file);
              }
              if (check) {
                t = Clock::now();
                g_sink = check(buffer, static_cast<std::size_t>(got));
                pass.check += seconds_since(t);
              }
            }
          }};
}

Status run(int64_t chunks, int64_t chunk_bytes, int64_t passes) {
  const TempDir temp{"conveyor-bench-chunk-read"};
  if (temp.path().empty())
    return io_error("cannot create a temp dir");
  const std::string& dir = temp.path();
  const auto size = static_cast<std::size_t>(chunk_bytes);
  std::vector<std::string> files;
  {
    std::vector<char> bytes(size);
    std::mt19937_64 rng{37};
    for (std::size_t i = 0; i + 8 <= size; i += 8) {
      const uint64_t v = rng();
      std::memcpy(bytes.data() + i, &v, 8);
    }
    for (int64_t f = 0; f < chunks; ++f) {
      files.push_back(dir + "/chunk-" + std::to_string(f));
      const int fd = ::open(files.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0)
        return io_error("cannot create " + files.back());
      bytes[0] = static_cast<char>(f);
      const bool whole = ::write(fd, bytes.data(), size) == static_cast<ssize_t>(size);
      ::close(fd);
      if (!whole)
        return io_error("cannot write " + files.back());
    }
  }
  const Crc plain = implementation("fused-plain"), prefetching = implementation("fused-prefetch");
  const auto crc = [](const char* p, std::size_t n) -> uint64_t { return crc32c(p, n); };
  std::vector<Way> ways;
  std::vector<char> buffer(4 << 20);
  constexpr std::size_t kHuge = 2 << 20, kWindow = 256 << 10;
  void* huge = ::aligned_alloc(kHuge, kHuge);
  if (huge == nullptr)
    return internal_error("cannot allocate a 2 MiB buffer");
  std::unique_ptr<void, decltype(&::free)> huge_owner{huge, &::free};
  ::madvise(huge, kHuge, MADV_HUGEPAGE);
  std::memset(huge, 0, kHuge);
  ways.push_back(read_into("read() 4 MiB pieces (the raw read)", buffer.data(), buffer.size(), {}));
  ways.push_back(read_into("read() 4 MiB pieces + crc32c", buffer.data(), buffer.size(), crc));
  ways.push_back(read_into("read() 256 KiB windows (huge page) + crc32c", static_cast<char*>(huge),
                           kWindow, crc));
  ways.push_back(mapped("mmap POPULATE + crc32c (the load)", size, MAP_POPULATE, {}, crc));
  if (plain != nullptr && prefetching != nullptr) {
    ways.push_back(
      mapped("mmap POPULATE + fused, no prefetch", size, MAP_POPULATE, {},
             [plain](const char* p, std::size_t n) -> uint64_t { return plain(p, n, 0); }));
    ways.push_back(mapped(
      "mmap POPULATE + fused, prefetch", size, MAP_POPULATE, {},
      [prefetching](const char* p, std::size_t n) -> uint64_t { return prefetching(p, n, 0); }));
  }
  ways.push_back(mapped("mmap, page faults + crc32c", size, 0, {}, crc));
  ways.push_back(
    mapped("mmap SEQUENTIAL+WILLNEED + crc32c", size, 0, {MADV_SEQUENTIAL, MADV_WILLNEED}, crc));
  ways.push_back(mapped("mmap HUGEPAGE + crc32c", size, 0, {MADV_HUGEPAGE}, crc));
  ways.push_back(mapped("mmap POPULATE + plain loads", size, MAP_POPULATE, {}, xor_words));
  std::printf("conveyor bench chunk-read: %lld chunks of %lld bytes in the page cache, %lld passes "
              "(the ways take turns)\nload average before: %s\n\n",
              static_cast<long long>(chunks), static_cast<long long>(chunk_bytes),
              static_cast<long long>(passes), load_average().c_str());
  std::vector<std::vector<Pass>> results(ways.size());
  for (int64_t p = 0; p < passes; ++p)
    for (std::size_t w = 0; w < ways.size(); ++w) {
      Pass pass;
      const auto t = Clock::now();
      for (const auto& f : files)
        CONVEYOR_RETURN_IF_ERROR(ways[w].run(f, pass));
      pass.total = seconds_since(t);
      results[w].push_back(pass);
    }
  const double kib = static_cast<double>(chunk_bytes) * static_cast<double>(chunks) / 1024.0;
  const auto per_kib = [&](double s) { return s * 1e9 / kib; };
  std::printf("%-46s %8s %8s   %s\n", "WAY", "BEST", "MEDIAN",
              "(median pass: read or map / "
              "checksum / munmap, ns per KiB)");
  for (std::size_t w = 0; w < ways.size(); ++w) {
    auto& r = results[w];
    std::sort(r.begin(), r.end(), [](const Pass& a, const Pass& b) { return a.total < b.total; });
    const Pass& median = r[r.size() / 2];
    std::printf("%-46s %8.1f %8.1f   (%.1f / %.1f / %.1f)\n", ways[w].name.c_str(),
                per_kib(r.front().total), per_kib(median.total), per_kib(median.map),
                per_kib(median.check), per_kib(median.unmap));
  }
  std::printf("\nload average after: %s\n", load_average().c_str());
  return Status::OK();
}

int run_bench_chunk_read(const std::vector<std::string>& args) {
  int64_t chunks = 64, chunk_bytes = 8 << 20, passes = 5;
  po::options_description options("chunk-read benchmark options");
  // clang-format off
  options.add_options()
      ("chunks", po::value(&chunks)->default_value(chunks)->value_name("N"),
       "chunk files")
      ("chunk-bytes", po::value(&chunk_bytes)->default_value(chunk_bytes)->value_name("C"),
       "bytes per chunk file (the snapshot's default: 8 MiB)")
      ("passes", po::value(&passes)->default_value(passes)->value_name("P"),
       "passes over every file, per way");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = check_at_least("--chunks", chunks, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--chunk-bytes", chunk_bytes, 4096); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--passes", passes, 1); !st.ok())
    return bad(st);
  if (chunks * chunk_bytes > (int64_t{8} << 30))
    return bad(invalid_argument("`--chunks` x `--chunk-bytes` must be at most 8 GiB, got " +
                                std::to_string(chunks * chunk_bytes) + " bytes"));
  if (Status s = run(chunks, chunk_bytes, passes); !s.ok())
    return report_error(kInfo.name, s.to_string(), kExitFailure);
  return kExitOk;
}

const Benchmark reg{"chunk-read", "snapshot chunk files: read() vs mappings, checksummed, per KiB",
                    run_bench_chunk_read};

} // namespace
} // namespace conveyor::apps
