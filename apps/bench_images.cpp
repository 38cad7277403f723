// `conveyor bench images`: images/s per worker core of decode -> random_resized_crop(224) ->
// random_flip_left_right -> normalize -> to_chw -> batch(64) on conveyor workers, against the
// same work done by a PyTorch DataLoader with PIL + numpy (torchvision is not packaged for
// Debian 12) and the same number of processes, in the same run (issue 35 item 4).
//
// N synthetic JPEGs (smooth shapes plus noise, quality 90, 4:2:0, default 500x375 like ImageNet's
// median) are written as raw records into TFRecord shards in a temporary directory; both sides
// read those shards. conveyor: P `conveyor worker` child processes read them DYNAMIC (one map per
// worker, num_parallel_calls=1), this process consumes. Baseline: a DataLoader with
// num_workers=P over the same records (read into memory before the workers fork). "Per core"
// divides images by the CPU seconds (utime + stime, /proc/PID/stat) of the worker processes
// only, on both sides; wall-clock images/s are printed too. Each rep is a new job / a new
// DataLoader; reps alternate between the two.
#ifdef CONVEYOR_IMAGE_OPS
#include <turbojpeg.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "pipeline/io/tfrecord.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench images",
  "[--images N] [--width W] [--height H] [--size S] [--processes P] [--shards K] [--reps R] "
  "[--python PATH]",
  "Images/s per worker core of decode -> random_resized_crop -> flip -> normalize -> to_chw ->\n"
  "batch(64) on P conveyor workers, against a PyTorch DataLoader doing the same with PIL and\n"
  "numpy in P worker processes, on the same synthetic JPEGs, in one run."};

#ifdef CONVEYOR_IMAGE_OPS

constexpr int64_t kBatch = 64;
constexpr const char* kMean = "0.485,0.456,0.406";
constexpr const char* kStd = "0.229,0.224,0.225";

// The DataLoader side: torchvision's RandomResizedCrop.get_params and RandomHorizontalFlip
// written with PIL and numpy, the usual recipe where torchvision is missing.
constexpr const char* kBaselineScript = R"PY(
import io, math, os, random, struct, sys, time
import numpy as np
import torch
from PIL import Image

files, workers, size, reps = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
records = []
for f in files:
    with open(f, "rb") as fh:
        data = fh.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        records.append(data[pos + 12:pos + 12 + n])
        pos += 12 + n + 4
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)

def rrc_params(w, h, rng):
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, h - ch), rng.randint(0, w - cw), ch, cw
    return 0, 0, h, w

class Images(torch.utils.data.Dataset):
    def __len__(self):
        return len(records)
    def __getitem__(self, i):
        rng = random.Random(i)
        img = Image.open(io.BytesIO(records[i])).convert("RGB")
        top, left, ch, cw = rrc_params(img.width, img.height, rng)
        img = img.resize((size, size), Image.BILINEAR, box=(left, top, left + cw, top + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        a = (np.asarray(img, np.float32) * (1 / 255) - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

torch.set_num_threads(1)
for rep in range(reps):
    loader = torch.utils.data.DataLoader(Images(), batch_size=64, num_workers=workers,
                                         persistent_workers=True)
    t0 = time.monotonic()
    it = iter(loader)
    n = 0
    for batch in it:
        assert batch.shape[1:] == (3, size, size) and batch.dtype == torch.float32
        n += batch.shape[0]
    wall = time.monotonic() - t0
    cpu = sum(cpu_seconds(w.pid) for w in it._workers)
    print(f"RESULT {n} {wall:.6f} {cpu:.6f}", flush=True)
    del it, loader
)PY";

// A photo-like test image: gradients, a few discs and noise (JPEG sizes near real photos').
std::string synthetic_jpeg(int w, int h, uint32_t seed) {
  std::vector<unsigned char> px(static_cast<std::size_t>(w) * h * 3);
  uint32_t state = seed * 2654435761u + 1;
  const auto noise = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>(state >> 27); // 0..31
  };
  const int cx = static_cast<int>(seed * 37 % static_cast<uint32_t>(w));
  const int cy = static_cast<int>(seed * 91 % static_cast<uint32_t>(h));
  const int r2 = (h / 4) * (h / 4);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r2;
      unsigned char* p = &px[(static_cast<std::size_t>(y) * w + x) * 3];
      p[0] = static_cast<unsigned char>((x * 200 / w + (disc ? 40 : 0) + noise()) & 255);
      p[1] = static_cast<unsigned char>((y * 180 / h + seed * 13 + noise()) & 255);
      p[2] =
        static_cast<unsigned char>(((x + y) * 120 / (w + h) + (disc ? 90 : 0) + noise()) & 255);
    }
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, px.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, 90, 0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

double process_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 0; i < 13 && fields >> f; ++i)
    if (i == 11 || i == 12) // utime, stime (fields 14 and 15 of stat(5))
      ticks += std::stod(f);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Rep {
  int64_t images = 0;
  double wall = 0, cpu = 0;
  double per_core() const { return cpu > 0 ? static_cast<double>(images) / cpu : 0; }
  double per_second() const { return wall > 0 ? static_cast<double>(images) / wall : 0; }
};

Dataset image_pipeline(const std::vector<std::string>& shards, int64_t size) {
  return Dataset::tfrecord(shards)
    .map(FunctionRef{"decode_image", {{"channels", int64_t{3}}}})
    .map(FunctionRef{"random_resized_crop", {{"size", size}, {"seed", int64_t{1}}}})
    .map(FunctionRef{"random_flip_left_right", {{"seed", int64_t{2}}}})
    .map(
      FunctionRef{"normalize",
                  {{"mean", std::string{kMean}}, {"std", std::string{kStd}}, {"scale", 1.0 / 255}}})
    .map(FunctionRef{"to_chw"})
    .batch(kBatch);
}

Expected<Rep> conveyor_rep(Client& client, const Dataset& ds, const std::vector<ChildNode>& nodes,
                           int64_t size) {
  const auto worker_cpu = [&nodes] {
    double s = 0;
    for (std::size_t i = 1; i < nodes.size(); ++i) // nodes[0] is the dispatcher
      s += process_cpu_seconds(nodes[i].pid);
    return s;
  };
  DistributeOptions dynamic;
  dynamic.policy = ShardingPolicy::dynamic;
  const double cpu0 = worker_cpu();
  const auto t0 = Clock::now();
  auto stream = client.distribute(ds, dynamic);
  if (!stream.ok())
    return stream.status();
  Rep r;
  for (const Element& batch : *stream) {
    const Shape want{batch[0].shape()[0], 3, size, size};
    if (batch[0].dtype() != DType::float32 || batch[0].shape() != want)
      return internal_error("bench images: a batch is not float32 [n, 3, " + std::to_string(size) +
                            ", " + std::to_string(size) + "]");
    r.images += batch[0].shape()[0];
  }
  if (!stream->status().ok())
    return stream->status();
  r.wall = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu = worker_cpu() - cpu0;
  return r;
}

Expected<std::vector<Rep>> baseline_reps(const std::string& python, const std::string& script,
                                         const std::vector<std::string>& shards, int64_t workers,
                                         int64_t size, int64_t reps, const std::string& log) {
  std::string files;
  for (const auto& s : shards)
    files += (files.empty() ? "" : ",") + s;
  const std::string cmd = "'" + python + "' '" + script + "' '" + files + "' " +
                          std::to_string(workers) + " " + std::to_string(size) + " " +
                          std::to_string(reps) + " 2>'" + log + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr)
    return io_error("bench images: cannot run " + python);
  std::vector<Rep> out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    Rep r;
    long long n = 0;
    if (std::sscanf(line, "RESULT %lld %lf %lf", &n, &r.wall, &r.cpu) == 3) {
      r.images = n;
      out.push_back(r);
    }
  }
  const int rc = ::pclose(pipe);
  if (rc != 0 || static_cast<int64_t>(out.size()) != reps)
    return failed_precondition("bench images: the DataLoader baseline (" + python +
                               " with torch, PIL and numpy) failed; its stderr is in " + log);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_images(const std::vector<std::string>& args) {
  int64_t images = 512, width = 500, height = 375, size = 224, processes = 1, shards_n = 8;
  int64_t reps = 3;
  std::string python = "/usr/bin/python3";
  po::options_description options("images benchmark options");
  // clang-format off
  options.add_options()
      ("images", po::value(&images)->default_value(images)->value_name("N"), "synthetic JPEGs per epoch")
      ("width", po::value(&width)->default_value(width)->value_name("W"), "their width")
      ("height", po::value(&height)->default_value(height)->value_name("H"), "their height")
      ("size", po::value(&size)->default_value(size)->value_name("S"), "random_resized_crop's output size")
      ("processes", po::value(&processes)->default_value(processes)->value_name("P"),
       "conveyor worker processes, and DataLoader num_workers")
      ("shards", po::value(&shards_n)->default_value(shards_n)->value_name("K"), "TFRecord files the images are spread over")
      ("reps", po::value(&reps)->default_value(reps)->value_name("R"), "epochs timed on each side")
      ("python", po::value(&python)->default_value(python)->value_name("PATH"),
       "the interpreter that runs the DataLoader baseline (needs torch, PIL, numpy)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (images < 1 || images > 100000)
    return bad(
      invalid_argument("`--images` must be in [1, 100000], got " + std::to_string(images)));
  if (width < 8 || height < 8 || width > 8192 || height > 8192)
    return bad(invalid_argument("`--width` and `--height` must be in [8, 8192], got " +
                                std::to_string(width) + "x" + std::to_string(height)));
  if (size < 1 || size > 4096)
    return bad(invalid_argument("`--size` must be in [1, 4096], got " + std::to_string(size)));
  if (processes < 1 || processes > 64)
    return bad(
      invalid_argument("`--processes` must be in [1, 64], got " + std::to_string(processes)));
  if (shards_n < 1 || shards_n > 1000)
    return bad(
      invalid_argument("`--shards` must be in [1, 1000], got " + std::to_string(shards_n)));
  if (reps < 1 || reps > 20)
    return bad(invalid_argument("`--reps` must be in [1, 20], got " + std::to_string(reps)));

  namespace fs = std::filesystem;
  const fs::path dir =
    fs::temp_directory_path() / ("conveyor-bench-images-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return bad(io_error("bench images: cannot create " + dir.string() + ": " + ec.message()));
  struct RemoveDir {
    fs::path p;
    ~RemoveDir() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } remove_dir{dir};

  // The images, spread round-robin over the shards.
  std::vector<std::string> shards;
  std::vector<std::unique_ptr<TFRecordWriter>> writers;
  for (int64_t k = 0; k < shards_n; ++k) {
    shards.push_back((dir / ("images-" + std::to_string(k) + ".tfrecord")).string());
    auto w = TFRecordWriter::open(shards.back());
    if (!w.ok())
      return bad(w.status());
    writers.push_back(std::move(*w));
  }
  int64_t jpeg_bytes = 0;
  for (int64_t i = 0; i < images; ++i) {
    const std::string jpeg =
      synthetic_jpeg(static_cast<int>(width), static_cast<int>(height), static_cast<uint32_t>(i));
    jpeg_bytes += static_cast<int64_t>(jpeg.size());
    if (Status st = writers[static_cast<std::size_t>(i % shards_n)]->write(jpeg); !st.ok())
      return bad(st);
  }
  for (auto& w : writers)
    if (Status st = w->close(); !st.ok())
      return bad(st);
  const std::string script = (dir / "dataloader_baseline.py").string();
  std::ofstream(script) << kBaselineScript;

  std::vector<ChildNode> nodes;
  StopChildrenOnExit stop{nodes};
  if (Status st = start_process_cluster(
        nodes, static_cast<int>(processes), "bench-images-" + std::to_string(::getpid()) + "-",
        {"--allow-path", dir.string()}, {"--allow-path", dir.string()}, dir.string());
      !st.ok())
    return bad(st);
  auto client = Client::connect(nodes.front().address);
  if (!client.ok())
    return bad(client.status());
  const std::string load = load_average();
  const Dataset ds = image_pipeline(shards, size);

  std::vector<Rep> ours, theirs;
  for (int64_t rep = 0; rep < reps; ++rep) {
    auto r = conveyor_rep(*client, ds, nodes, size);
    if (!r.ok())
      return bad(r.status().with_context("conveyor rep " + std::to_string(rep + 1)));
    if (r->images != images)
      return bad(data_loss("conveyor rep " + std::to_string(rep + 1) + " delivered " +
                           std::to_string(r->images) + " of " + std::to_string(images) +
                           " images"));
    ours.push_back(*r);
    auto b =
      baseline_reps(python, script, shards, processes, size, 1, (dir / "baseline.log").string());
    if (!b.ok()) {
      std::ifstream log(dir / "baseline.log");
      std::fprintf(stderr, "%s\n", std::string(std::istreambuf_iterator<char>(log), {}).c_str());
      return bad(b.status());
    }
    if (b->front().images != images)
      return bad(data_loss("the baseline delivered " + std::to_string(b->front().images) + " of " +
                           std::to_string(images) + " images"));
    theirs.push_back(b->front());
  }

  std::printf("images    : %lld synthetic JPEGs %lldx%lld (%.0f KiB each on average) in %lld "
              "TFRecord shards\n",
              static_cast<long long>(images), static_cast<long long>(width),
              static_cast<long long>(height), static_cast<double>(jpeg_bytes) / images / 1024,
              static_cast<long long>(shards_n));
  std::printf("pipeline  : decode(3) -> random_resized_crop(%lld) -> flip -> normalize -> CHW -> "
              "batch(%lld), float32\n",
              static_cast<long long>(size), static_cast<long long>(kBatch));
  std::printf(
    "processes : %lld (conveyor workers, DYNAMIC; DataLoader num_workers), %u cores, load %s\n",
    static_cast<long long>(processes), std::max(1u, std::thread::hardware_concurrency()),
    load.c_str());
  std::vector<double> ratio;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    std::printf("rep %zu     : conveyor %7.1f img/s per core (%6.1f img/s wall, %5.2f s CPU)   "
                "DataLoader %7.1f img/s per core (%6.1f img/s wall, %5.2f s CPU)\n",
                i + 1, ours[i].per_core(), ours[i].per_second(), ours[i].cpu, theirs[i].per_core(),
                theirs[i].per_second(), theirs[i].cpu);
    if (theirs[i].per_core() > 0)
      ratio.push_back(ours[i].per_core() / theirs[i].per_core());
  }
  if (!ratio.empty())
    std::printf("ratio     : conveyor / DataLoader images per core-second, median %.2fx (min "
                "%.2fx, max %.2fx)\n",
                median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
  std::printf("load after: %s\n", load_average().c_str());
  return 0;
}

#else

int bench_images(const std::vector<std::string>&) {
  return report_status(kInfo.name, unimplemented("this conveyor was built without image ops "
                                                 "(-DCONVEYOR_IMAGE_OPS=OFF)"));
}

#endif

const Benchmark reg{"images", "images/s per worker core of decode+augment vs a PIL DataLoader",
                    bench_images};

} // namespace
} // namespace conveyor::apps
