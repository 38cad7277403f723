// `conveyor bench snapshot-decode`: the snapshot load's reader thread, per element (issue 37).
// Over N chunk files of scalar string elements of B bytes (written first, in a temp dir, then in
// the page cache), each repetition times on this thread, as CPU time per element:
//   warm   each chunk opened (kernels/chunk_read_ahead.hpp open_chunk_reader: mapped, both
//          checksums), then its elements decoded into a fresh Element each (the decode alone)
//   cold   K chunks opened first (K x C bytes: more than the L3 cache by default), then decoded in
//          order: each element's header is out of cache, as after another core's checksum
//   walk   the same cold chunks stepped over (BatchReader::skip): the chain of headers alone
//   load   load(DIR) drained into a fresh Element each (`bench snapshot`'s drain): the reader's
//          thread's CPU and the wall time, against a raw read() of the same files (the ratio)
// What the reader's own decode costs, apart from the chunk opens that `bench snapshot` mixes in
// (docs/BENCHMARKS.md, "The reader's thread").
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "apps/bench.hpp"
#include "apps/cli_common.hpp"
#include "apps/snapshot_reads.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/kernels/chunk_read_ahead.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench snapshot-decode",
  "[--chunks N] [--element-bytes B] [--chunk-bytes C] [--cold-chunks K] [--repetitions R]",
  "Measures the snapshot load's reader thread per element, apart from the chunk opens: the\n"
  "decode of string elements of B bytes from a chunk just opened (warm) and from K chunks opened\n"
  "first (cold), the headers alone (walk), and load(DIR) drained (the reader's thread CPU and\n"
  "the wall) against a raw read of the same files; the load average beside each repetition."};

// A done snapshot of `chunks` chunks of scalar strings of `element_bytes` bytes, about
// `chunk_bytes` each; the elements written.
Expected<int64_t> write_snapshot(const std::string& dir, int64_t chunks, int64_t element_bytes,
                                 int64_t chunk_bytes) {
  snapshot::Metadata metadata;
  metadata.compression = Compression::none;
  metadata.element_spec = "string:[]";
  CONVEYOR_RETURN_IF_ERROR(snapshot::create(dir, metadata));
  const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes / (element_bytes + 8));
  std::vector<Element> elements;
  for (int64_t i = 0; i < per_chunk; ++i)
    elements.emplace_back(Tensor::scalar(
      std::string(static_cast<std::size_t>(element_bytes), static_cast<char>('a' + i % 26))));
  for (int64_t c = 0; c < chunks; ++c) {
    auto ref = snapshot::write_chunk(dir, 0, c, elements, Compression::none, false);
    if (!ref.ok())
      return ref.status();
  }
  CONVEYOR_RETURN_IF_ERROR(snapshot::mark_done(dir, chunks, chunks * per_chunk));
  return chunks * per_chunk;
}

// Decodes (or, `walk`, steps over) every element of `readers`; the elements read.
Expected<int64_t> drain_readers(std::vector<BatchReader>& readers, bool walk) {
  int64_t n = 0;
  for (BatchReader& reader : readers)
    while (!reader.done()) {
      Element e; // fresh, as the user's loop makes it
      CONVEYOR_RETURN_IF_ERROR(walk ? reader.skip() : reader.next(e));
      ++n;
    }
  return n;
}

// CPU seconds on this thread per element: warm (each chunk decoded right after its open), cold
// and walk (groups of `cold_chunks` opened first).
struct Decode {
  double warm = 0, cold = 0, walk = 0;
};
Expected<Decode> time_decodes(const std::vector<snapshot::ChunkRef>& chunks, int64_t cold_chunks) {
  Decode out;
  int64_t n = 0;
  for (const auto& chunk : chunks) {
    std::vector<BatchReader> one;
    auto reader = kernels::open_chunk_reader(chunk);
    if (!reader.ok())
      return reader.status();
    one.push_back(std::move(*reader));
    const double t0 = thread_cpu_seconds();
    auto got = drain_readers(one, false);
    if (!got.ok())
      return got.status();
    out.warm += thread_cpu_seconds() - t0;
    n += *got;
  }
  out.warm /= static_cast<double>(n);
  for (bool walk : {false, true}) {
    double seconds = 0;
    int64_t read = 0;
    for (std::size_t first = 0; first < chunks.size(); first += cold_chunks) {
      std::vector<BatchReader> group;
      for (std::size_t i = first; i < chunks.size() && i < first + cold_chunks; ++i) {
        auto reader = kernels::open_chunk_reader(chunks[i]);
        if (!reader.ok())
          return reader.status();
        group.push_back(std::move(*reader));
      }
      const double t0 = thread_cpu_seconds();
      auto got = drain_readers(group, walk);
      if (!got.ok())
        return got.status();
      seconds += thread_cpu_seconds() - t0;
      read += *got;
    }
    (walk ? out.walk : out.cold) = seconds / static_cast<double>(read);
  }
  return out;
}

Status run(int64_t chunks, int64_t element_bytes, int64_t chunk_bytes, int64_t cold_chunks,
           int64_t repetitions) {
  const TempDir temp{"conveyor-bench-snapshot-decode"};
  if (temp.path().empty())
    return io_error("cannot create a temp dir");
  const std::string dir = temp.path() + "/snap";
  auto elements = write_snapshot(dir, chunks, element_bytes, chunk_bytes);
  if (!elements.ok())
    return elements.status();
  auto listed = snapshot::committed_chunks(dir);
  if (!listed.ok())
    return listed.status();
  std::printf("conveyor bench snapshot-decode: %lld chunks of %lld string elements of %lld bytes, "
              "cold groups of %lld chunks; ns per element\n\n",
              static_cast<long long>(chunks), static_cast<long long>(*elements / chunks),
              static_cast<long long>(element_bytes), static_cast<long long>(cold_chunks));
  std::printf("%-4s %-7s %-7s %-7s %-12s %-10s %-9s %-6s %s\n", "REP", "WARM", "COLD", "WALK",
              "LOAD READER", "LOAD WALL", "RAW READ", "RATIO", "LOADAVG");
  for (int64_t rep = 1; rep <= repetitions; ++rep) {
    auto decode = time_decodes(*listed, cold_chunks);
    if (!decode.ok())
      return decode.status();
    auto it = Dataset::load(dir).make_iterator();
    if (!it.ok())
      return it.status();
    const double cpu0 = thread_cpu_seconds();
    auto t0 = Clock::now();
    auto n = drain(**it);
    if (!n.ok())
      return n.status();
    const double load_s = seconds_since(t0), reader_s = thread_cpu_seconds() - cpu0;
    t0 = Clock::now();
    auto raw = read_chunk_files(*listed);
    if (!raw.ok())
      return raw.status();
    const double raw_s = seconds_since(t0);
    const double per = 1e9 / static_cast<double>(std::max<int64_t>(*n, 1));
    std::printf("%-4lld %-7.1f %-7.1f %-7.1f %-12.1f %-10.1f %-9.1f %-6.2f %s\n",
                static_cast<long long>(rep), decode->warm * 1e9, decode->cold * 1e9,
                decode->walk * 1e9, reader_s * per, load_s * per, raw_s * per, raw_s / load_s,
                load_average().c_str());
  }
  return Status::OK();
}

int run_bench_snapshot_decode(const std::vector<std::string>& args) {
  int64_t chunks = 48, element_bytes = 1024, chunk_bytes = 8 << 20, cold_chunks = 6;
  int64_t repetitions = 3;
  po::options_description options("snapshot decode benchmark options");
  // clang-format off
  options.add_options()
      ("chunks", po::value(&chunks)->default_value(chunks)->value_name("N"),
       "chunk files written")
      ("element-bytes", po::value(&element_bytes)->default_value(element_bytes)->value_name("B"),
       "bytes per string element")
      ("chunk-bytes", po::value(&chunk_bytes)->default_value(chunk_bytes)->value_name("C"),
       "encoded bytes per chunk file (about)")
      ("cold-chunks", po::value(&cold_chunks)->default_value(cold_chunks)->value_name("K"),
       "chunks opened before the cold decode reads the first of them")
      ("repetitions", po::value(&repetitions)->default_value(repetitions)->value_name("R"),
       "repetitions of every measurement");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"--chunks", chunks},
                                    {"--element-bytes", element_bytes},
                                    {"--chunk-bytes", chunk_bytes},
                                    {"--cold-chunks", cold_chunks},
                                    {"--repetitions", repetitions}})
    if (auto st = check_at_least(flag, value, 1); !st.ok())
      return bad(st);
  if (Status s = run(chunks, element_bytes, chunk_bytes, cold_chunks, repetitions); !s.ok())
    return report_error(kInfo.name, s.to_string(), kExitFailure);
  return kExitOk;
}

const Benchmark reg{"snapshot-decode",
                    "the snapshot load's reader thread: the decode per element, warm and cold, "
                    "and load(DIR) against a raw read",
                    run_bench_snapshot_decode};

} // namespace
} // namespace conveyor::apps
