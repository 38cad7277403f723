// `conveyor bench pipeline`: single-threaded throughput of the pipeline layer, no networking.
//
// (a) Iteration: range(N), range(N).batch(B) and range(N).map(square).batch(B), each iterated to
//     the end, pass after pass, until the time budget is spent; elements/s counts range values.
// (b) Element codec: encode_batch / decode_batch MB/s with NONE, LZ4 and AUTO on four workloads:
//     many 8-byte elements (int64 scalars) and one 1 MiB tensor, each once with compressible and
//     once with incompressible (random) values. MB/s counts tensor payload bytes (10^6 bytes/MB).
//
// (c) parse_example: serialized tf.train.Examples (label int64, pixels float32[64], name string,
//     tags var(string) with 0-3 entries) held in memory, parsed by
//     from_tensor_slices(records).parse_example(spec); records/s, and MB/s of serialized bytes.
//
// Rates divide by wall-clock time, or with --clock cpu by this thread's CPU time: everything
// measured here runs on the calling thread, so CPU time gives the same figure on an idle machine
// and a steadier one on a busy, shared machine.
//
// Every timed loop stops at its (wall-clock) time budget or its iteration cap, whichever comes first. Before
// timing, each codec workload is decoded once and compared with its input, so a broken codec
// fails the benchmark instead of timing garbage.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "apps/bench.hpp"
#include "apps/cli_common.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

constexpr CommandInfo kInfo{
  "bench pipeline", "[--seconds T] [--elements N] [--batch B] [--small-batch K] [--clock wall|cpu]",
  "Measures elements/s of range(N)[.map(square)].batch(B) iterated to the end, the element\n"
  "codec's encode/decode MB/s with and without lz4 on 8-byte and 1 MiB elements, and\n"
  "parse_example records/s on serialized tf.train.Examples."};

constexpr int64_t kMaxPasses = 10000;            // cap on dataset passes per measurement
constexpr int64_t kMaxCodecIterations = 1000000; // cap on encode or decode calls per measurement

struct Flags {
  double seconds = 0.5;
  int64_t elements = 1000000;
  int64_t batch = 64;
  int64_t small_batch = 4096;
  std::string clock = "wall";
};

// Wall-clock time since construction, and the time that rates divide by (wall or thread CPU).
class Stopwatch {
public:
  explicit Stopwatch(bool cpu) : cpu_(cpu), wall_start_(Clock::now()), cpu_start_(thread_cpu()) {}
  Seconds wall() const { return Clock::now() - wall_start_; }
  double seconds() const { return cpu_ ? thread_cpu() - cpu_start_ : wall().count(); }

private:
  static double thread_cpu() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  bool cpu_;
  Clock::time_point wall_start_;
  double cpu_start_;
};

// --- (a) iteration

struct IterationResult {
  int64_t values = 0;  // range values that went through the pipeline
  int64_t outputs = 0; // elements the pipeline yielded (batches, when batched)
  int64_t passes = 0;
  double seconds = 0;
};

// Iterates `dataset` to the end, pass after pass, until `budget` is spent (a pass still running
// then stops early and counts what it yielded). `batched`: outputs hold shape[0] range values each.
// A pass that reaches the end must have yielded exactly `expected_values`.
Expected<IterationResult> iterate(const Dataset& dataset, bool batched, Seconds budget,
                                  int64_t expected_values, bool cpu_clock) {
  IterationResult r;
  const Stopwatch watch{cpu_clock};
  bool out_of_time = false;
  while (!out_of_time && r.passes < kMaxPasses) {
    auto it = dataset.make_iterator();
    if (!it.ok())
      return it.status();
    int64_t pass_values = 0;
    Element e;
    for (;;) {
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR((*it)->get_next(e, end));
      if (end)
        break;
      ++r.outputs;
      pass_values += batched ? e[0].shape().at(0) : 1;
      if ((r.outputs & 255) == 0 && watch.wall() >= budget) {
        out_of_time = true;
        break;
      }
    }
    r.values += pass_values;
    ++r.passes;
    if (!out_of_time && pass_values != expected_values)
      return internal_error("a pass over " + dataset.to_text() + " yielded " +
                            std::to_string(pass_values) + " values, expected " +
                            std::to_string(expected_values));
    out_of_time = out_of_time || watch.wall() >= budget;
  }
  r.seconds = watch.seconds();
  return r;
}

// --- (b) codec

struct Workload {
  std::string name;
  std::string data; // which values, and whether lz4 can shrink them
  std::vector<Element> elements;
  std::size_t payload_bytes = 0;
};

Workload make_workload(std::string name, std::string data, std::vector<Element> elements) {
  Workload w{std::move(name), std::move(data), std::move(elements), 0};
  for (const Element& e : w.elements)
    w.payload_bytes += e.byte_size();
  return w;
}

std::vector<Workload> make_workloads(int64_t small_batch) {
  std::mt19937_64 rng{12345};
  std::vector<Workload> out;

  std::vector<Element> counting, random_scalars;
  for (int64_t i = 0; i < small_batch; ++i) {
    counting.emplace_back(Tensor::scalar(i));
    random_scalars.emplace_back(Tensor::scalar(static_cast<int64_t>(rng())));
  }
  const std::string count = std::to_string(small_batch);
  out.push_back(
    make_workload(count + " x int64 scalar", "0,1,2,... (compressible)", std::move(counting)));
  out.push_back(make_workload(count + " x int64 scalar", "random 64-bit (incompressible)",
                              std::move(random_scalars)));

  constexpr int64_t kMiBInt32 = (1 << 20) / 4;
  std::vector<int32_t> small_ints(kMiBInt32);
  for (auto& v : small_ints)
    v = static_cast<int32_t>(rng() % 16);
  out.push_back(make_workload("1 x 1 MiB int32[262144]", "random in [0,16) (compressible)",
                              {Element{Tensor::vector(small_ints)}}));
  std::uniform_real_distribution<double> uniform{0.0, 1.0};
  std::vector<double> doubles((1 << 20) / 8);
  for (auto& v : doubles)
    v = uniform(rng);
  out.push_back(make_workload("1 x 1 MiB float64[131072]", "uniform random (incompressible)",
                              {Element{Tensor::vector(doubles)}}));
  return out;
}

struct CodecResult {
  double encode_mb_s = 0;
  double decode_mb_s = 0;
  double ratio = 0; // encoded buffer bytes / payload bytes
  bool compressed = false;
};

// Calls `body` until `budget` is spent or kMaxCodecIterations calls; returns calls per second.
template <class Body>
double calls_per_second(Body&& body, Seconds budget, bool cpu_clock) {
  const Stopwatch watch{cpu_clock};
  int64_t calls = 0;
  while (calls < kMaxCodecIterations) {
    body();
    ++calls;
    if (watch.wall() >= budget)
      break;
  }
  return static_cast<double>(calls) / watch.seconds();
}

Expected<CodecResult> measure_codec(const Workload& w, Compression c, Seconds budget,
                                    bool cpu_clock) {
  const std::string buffer = encode_batch(w.elements, c);
  std::vector<Element> decoded;
  CONVEYOR_RETURN_IF_ERROR(decode_batch(buffer, decoded));
  if (decoded != w.elements)
    return internal_error(std::string{"codec round trip changed the "} + w.name +
                          " workload with " + to_string(c));

  CodecResult r;
  r.ratio = static_cast<double>(buffer.size()) / static_cast<double>(w.payload_bytes);
  r.compressed =
    (static_cast<unsigned char>(buffer.at(5)) & 1) != 0; // header flags byte, bit 0 = lz4
  std::size_t sink = 0;                                  // keeps the encoder's output observable
  const double encodes =
    calls_per_second([&] { sink += encode_batch(w.elements, c).size(); }, budget, cpu_clock);
  Status decode_status;
  const double decodes = calls_per_second(
    [&] {
      decoded.clear();
      if (decode_status.ok())
        decode_status = decode_batch(buffer, decoded);
    },
    budget, cpu_clock);
  CONVEYOR_RETURN_IF_ERROR(decode_status);
  if (sink == 0)
    return internal_error("encoder produced nothing");
  r.encode_mb_s = encodes * static_cast<double>(w.payload_bytes) / 1e6;
  r.decode_mb_s = decodes * static_cast<double>(w.payload_bytes) / 1e6;
  return r;
}

int run_bench_pipeline(const std::vector<std::string>& args) {
  Flags f;
  po::options_description options("pipeline benchmark options");
  // clang-format off
  options.add_options()
      ("seconds,t", po::value(&f.seconds)->default_value(f.seconds)->value_name("T"),
       "time budget of each measurement, in seconds")
      ("elements,n", po::value(&f.elements)->default_value(f.elements)->value_name("N"), "range(N) size")
      ("batch,b", po::value(&f.batch)->default_value(f.batch)->value_name("B"), "batch size of the pipeline")
      ("small-batch", po::value(&f.small_batch)->default_value(f.small_batch)->value_name("K"),
       "8-byte elements per encoded batch in the codec measurements")
      ("clock", po::value(&f.clock)->default_value(f.clock)->value_name("wall|cpu"),
       "divide by wall-clock time, or by this thread's CPU time (steadier on a busy machine)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (!(f.seconds > 0 && f.seconds <= 60))
    return bad(
      invalid_argument("`--seconds` must be in (0, 60], got " + std::to_string(f.seconds)));
  if (auto st = check_at_least("--elements", f.elements, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--batch", f.batch, 1); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--small-batch", f.small_batch, 1); !st.ok())
    return bad(st);
  if (f.small_batch > 10000000)
    return bad(invalid_argument("`--small-batch` must be at most 10000000, got " +
                                std::to_string(f.small_batch)));
  if (f.clock != "wall" && f.clock != "cpu")
    return bad(invalid_argument("`--clock` must be `wall` or `cpu`, got `" + f.clock + "`"));
  const bool cpu_clock = f.clock == "cpu";
  const Seconds budget{f.seconds};

  std::printf(
    "conveyor bench pipeline: %.2f s per measurement, one thread, rates per %s second\n\n",
    f.seconds, cpu_clock ? "thread-CPU" : "wall-clock");
  std::printf("(a) iteration to the end, pass after pass            %14s %14s %7s\n", "elements/s",
              "outputs/s", "passes");
  const std::vector<std::pair<Dataset, bool>> pipelines{
    {Dataset::range(f.elements), false},
    {Dataset::range(f.elements).batch(f.batch), true},
    {Dataset::range(f.elements).map("square").batch(f.batch), true},
  };
  for (const auto& [dataset, batched] : pipelines) {
    auto r = iterate(dataset, batched, budget, f.elements, cpu_clock);
    if (!r.ok())
      return report_status(kInfo.name, r.status());
    std::printf("  %-50s %14.0f %14.0f %7lld\n", dataset.to_text().c_str(), r->values / r->seconds,
                r->outputs / r->seconds, static_cast<long long>(r->passes));
  }

  std::printf(
    "\n(b) element codec, one encode_batch / decode_batch per call; MB/s of tensor payload,\n"
    "    ratio = buffer bytes / payload bytes (lz4? = the buffer is lz4-compressed)\n");
  std::printf("  %-26s %-32s %-5s %11s %11s %7s %5s\n", "batch", "values", "comp.", "encode MB/s",
              "decode MB/s", "ratio", "lz4?");
  for (const Workload& w : make_workloads(f.small_batch)) {
    for (Compression c : {Compression::none, Compression::lz4, Compression::automatic}) {
      auto r = measure_codec(w, c, budget, cpu_clock);
      if (!r.ok())
        return report_status(kInfo.name, r.status());
      std::printf("  %-26s %-32s %-5s %11.0f %11.0f %7.3f %5s\n", w.name.c_str(), w.data.c_str(),
                  to_string(c), r->encode_mb_s, r->decode_mb_s, r->ratio,
                  r->compressed ? "yes" : "no");
    }
  }

  std::printf("\n(c) parse_example over in-memory serialized tf.train.Examples (--elements of "
              "them, at most 100000)\n");
  const int64_t num_records = std::min<int64_t>(f.elements, 100000);
  std::vector<std::string> records;
  std::size_t record_bytes = 0;
  std::mt19937_64 rng{7};
  for (int64_t i = 0; i < num_records; ++i) {
    std::vector<float> pixels(64);
    for (auto& p : pixels)
      p = static_cast<float>(rng() % 1000) / 7.0f;
    std::vector<std::string> tags;
    for (int64_t t = 0; t < i % 4; ++t)
      tags.push_back("tag-" + std::to_string(t));
    auto bytes = serialize_example({{"label", Tensor::scalar(i)},
                                    {"pixels", Tensor::vector(pixels)},
                                    {"name", Tensor::scalar("record-" + std::to_string(i))},
                                    {"tags", Tensor::vector(tags)}});
    if (!bytes.ok())
      return report_status(kInfo.name, bytes.status());
    record_bytes += bytes->size();
    records.push_back(std::move(*bytes));
  }
  const std::string spec = "label: int64; pixels: float32[64]; name: string; tags: var(string)";
  std::printf("  %-50s %14s %14s %7s\n", "pipeline", "records/s", "MB/s", "passes");
  const Dataset slices = Dataset::from_tensor_slices(Element{Tensor::vector(records)});
  for (const Dataset& dataset : {slices, slices.parse_example(spec)}) {
    auto r = iterate(dataset, false, budget, num_records, cpu_clock);
    if (!r.ok())
      return report_status(kInfo.name, r.status());
    const double per_second = r->values / r->seconds;
    std::printf("  %-50s %14.0f %14.1f %7lld\n",
                dataset.node()->op == "parse_example"
                  ? "from_tensor_slices(records).parse_example(spec)"
                  : "from_tensor_slices(records) (baseline)",
                per_second, per_second * static_cast<double>(record_bytes) / num_records / 1e6,
                static_cast<long long>(r->passes));
  }
  return kExitOk;
}

const Benchmark reg{"pipeline", "range/map/batch iteration and element codec throughput",
                    run_bench_pipeline};

} // namespace
} // namespace conveyor::apps
