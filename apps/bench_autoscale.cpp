// `conveyor bench autoscale`: does the autoscaler get a trainer off its wait on real processes?
// A `conveyor dispatcher` with the autoscaler and one `conveyor worker` start as child processes;
// this process reads `range(...).map(burn(rounds=R))` in DYNAMIC mode as a trainer that takes
// `--rate` elements/s (a step every 1/rate s; a trainer that waited does not catch up), while it
// follows the dispatcher's decisions as `conveyor run --autoscale` does (apps/local_autoscale.hpp:
// starting workers, draining the newest). Every second it records the worker count and the
// trainer's share of time waiting for its next element; the report is that table, the wait share
// and worker count at the end, and with --plot a PNG of both over time (drawn with python3-pil).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench.hpp"
#include "apps/child_nodes.hpp"
#include "apps/cli_common.hpp"
#include "apps/local_autoscale.hpp"
#include "conveyor/client.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration;
using std::chrono::milliseconds;

constexpr CommandInfo kInfo{
  "bench autoscale",
  "[--seconds S] [--rate R] [--rounds N] [--max-workers B] [--csv PATH] [--plot PNG]",
  "Starts a dispatcher with the autoscaler and one worker (child processes), reads a CPU-bound\n"
  "map as a trainer taking R elements/s while following the autoscaler with worker processes,\n"
  "and reports the worker count and the trainer's wait share over time (a table; a PNG plot\n"
  "with --plot, drawn with python3-pil)."};

struct Row {
  double t = 0;
  int64_t workers = 0;
  double elements_per_s = 0;
  double wait_share = 0;
};

// An interpreter with PIL (python3-pil, a dependency of the Python client and its image tests):
// the one on PATH, else Debian's (PATH may lead to another Python first). "" when neither has it.
std::string python_with_pil() {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(python) + " -c 'import PIL' >/dev/null 2>&1").c_str()) == 0)
      return python;
  return "";
}

Status write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << "seconds,workers,elements_per_s,wait_share\n";
  for (const auto& r : rows)
    out << r.t << "," << r.workers << "," << r.elements_per_s << "," << r.wait_share << "\n";
  out.close();
  if (!out)
    return io_error("cannot write " + path);
  return Status::OK();
}

// Two panels over time, drawn with PIL: the ready workers (a step line) and the trainer's wait
// share (with the 10 % the issue aims under, dashed).
Status plot(const std::string& python, const std::string& csv, const std::string& png,
            double rate) {
  const std::string script = R"PY(
import csv, sys
from PIL import Image, ImageDraw
rows = list(csv.DictReader(open(sys.argv[1])))
t = [float(r["seconds"]) for r in rows] or [0.0]
workers = [int(r["workers"]) for r in rows] or [0]
wait = [100 * float(r["wait_share"]) for r in rows] or [0.0]
W, H, L, R = 860, 560, 70, 30
img = Image.new("RGB", (W, H), "white")
d = ImageDraw.Draw(img)
tmax = max(t) or 1.0
def x(v):
    return L + (W - L - R) * v / tmax
d.text((L, 10), "conveyor bench autoscale: trainer at %s elements/s" % sys.argv[3], fill="black")
top_workers = max(workers) + 1
panels = [(50, 270, "workers", top_workers), (320, 510, "trainer wait %", 100)]
ticks = [list(range(0, top_workers + 1, max(1, top_workers // 8))), [0, 25, 50, 75, 100]]
for (top, bottom, label, ymax), marks in zip(panels, ticks):
    d.rectangle([L, top, W - R, bottom], outline="black")
    d.text((L, top - 14), label, fill="black")
    for v in marks:
        y = bottom - (bottom - top) * v / ymax
        d.line([L - 4, y, L, y], fill="black")
        d.text((L - 34, y - 6), "%d" % v, fill="black")
def y_of(panel, v):
    top, bottom, _, ymax = panels[panel]
    return bottom - (bottom - top) * min(v, ymax) / ymax
pts = []
for i, (ti, wi) in enumerate(zip(t, workers)):
    if i:
        pts.append((x(ti), y_of(0, workers[i - 1])))
    pts.append((x(ti), y_of(0, wi)))
if len(pts) > 1:
    d.line(pts, fill=(31, 119, 180), width=2)
if len(t) > 1:
    d.line([(x(a), y_of(1, b)) for a, b in zip(t, wait)], fill=(214, 39, 40), width=2)
ten = y_of(1, 10)
for sx in range(L, W - R, 12):
    d.line([sx, ten, min(sx + 6, W - R), ten], fill="gray")
for k in range(7):
    v = tmax * k / 6
    d.line([x(v), 510, x(v), 514], fill="black")
    d.text((x(v) - 10, 518), "%d" % v, fill="black")
d.text(((W - L) // 2, 538), "seconds", fill="black")
img.save(sys.argv[2], "PNG")
)PY";
  char tmpl[] = "/tmp/conveyor-bench-autoscale-plot-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0)
    return io_error("cannot create a temporary file for the plot script");
  ::close(fd);
  std::ofstream(tmpl) << script;
  char r[32];
  std::snprintf(r, sizeof r, "%g", rate);
  const std::string cmd = python + " " + tmpl + " '" + csv + "' '" + png + "' " + r;
  const int rc = std::system(cmd.c_str());
  ::unlink(tmpl);
  if (rc != 0)
    return io_error("the plot script failed (" + cmd + ")");
  return Status::OK();
}

int bench_autoscale(const std::vector<std::string>& args) {
  int64_t seconds = 60, rate = 100, rounds = 3000000, interval_ms = 1000, cooldown_ms = 3000;
  int64_t max_workers = std::max(1u, std::thread::hardware_concurrency());
  std::string csv_path, png_path;
  po::options_description options("autoscale benchmark options");
  // clang-format off
  options.add_options()
      ("seconds", po::value(&seconds)->default_value(seconds)->value_name("S"), "how long the trainer reads")
      ("rate", po::value(&rate)->default_value(rate)->value_name("R"), "elements/s the trainer takes")
      ("rounds", po::value(&rounds)->default_value(rounds)->value_name("N"),
       "burn rounds per element (the map's CPU work)")
      ("max-workers", po::value(&max_workers)->default_value(max_workers)->value_name("B"),
       "the autoscaler's upper bound (default: the hardware threads)")
      ("autoscale-interval-ms", po::value(&interval_ms)->default_value(interval_ms)->value_name("MS"),
       "the dispatcher's decision interval")
      ("scale-cooldown-ms", po::value(&cooldown_ms)->default_value(cooldown_ms)->value_name("MS"),
       "the dispatcher's wait after a change")
      ("csv", po::value(&csv_path)->value_name("PATH"), "also write the table as CSV")
      ("plot", po::value(&png_path)->value_name("PNG"),
       "also plot workers and wait share over time (a PNG drawn with python3-pil)");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_bench_command_line(kInfo, options, args, vm, "warning"))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (seconds < 5 || seconds > 3600)
    return bad(
      invalid_argument("`--seconds` must be in [5, 3600], got " + std::to_string(seconds)));
  if (rate < 1 || rate > 1000000)
    return bad(invalid_argument("`--rate` must be in [1, 1000000], got " + std::to_string(rate)));
  if (rounds < 0 || rounds > 1000000000)
    return bad(
      invalid_argument("`--rounds` must be in [0, 1000000000], got " + std::to_string(rounds)));
  if (max_workers < 1 || max_workers > 64)
    return bad(
      invalid_argument("`--max-workers` must be in [1, 64], got " + std::to_string(max_workers)));
  auto interval = check_millis("--autoscale-interval-ms", interval_ms);
  if (!interval.ok())
    return bad(interval.status());
  auto cooldown = check_millis("--scale-cooldown-ms", cooldown_ms, /*allow_zero=*/true);
  if (!cooldown.ok())
    return bad(cooldown.status());
  const std::string plotter = png_path.empty() ? "" : python_with_pil();
  if (!png_path.empty() && plotter.empty())
    return bad(failed_precondition("`--plot` needs Python with PIL (apt-get install python3-pil), "
                                   "which neither python3 on PATH nor /usr/bin/python3 has"));

  install_stop_signals();
  char tmpl[] = "/tmp/conveyor-bench-autoscale-XXXXXX";
  if (!::mkdtemp(tmpl))
    return bad(io_error("cannot create a log directory in /tmp"));
  const std::string log_dir = tmpl, target_file = log_dir + "/scale-target";
  LocalAutoscaleConfig scale{1, max_workers, *interval, *cooldown};
  auto dispatcher_flags = autoscale_dispatcher_flags(scale, target_file);
  // Small splits, so that a worker that joins finds work at once.
  dispatcher_flags.insert(dispatcher_flags.end(), {"--range-split-size", "20"});
  std::vector<ChildNode> children;
  StopChildrenOnExit stop{children};
  if (Status st = start_process_cluster(children, 1, "", dispatcher_flags, {}, log_dir); !st.ok())
    return bad(st);
  const std::string dispatcher = children.front().address;
  auto client = Client::connect(dispatcher);
  if (!client.ok())
    return bad(client.status());
  const std::string load = load_average();
  DistributeOptions opts;
  opts.policy = ShardingPolicy::dynamic;
  // Half a second of the trainer's elements ahead: a buffer of minutes would hide the workers.
  opts.max_outstanding_requests = std::max<int64_t>(8, rate / 2);
  auto stream = client->distribute(
    Dataset::range(1000000000).map(FunctionRef{"burn", {{"rounds", rounds}}}), opts);
  if (!stream.ok())
    return bad(stream.status());

  LocalAutoscaler scaler(children, self_executable(), dispatcher, {}, log_dir, target_file);
  scaler.start();
  std::printf("autoscale bench: trainer at %lld elements/s, burn(rounds=%lld), workers 1..%lld, "
              "decisions every %lld ms (cooldown %lld ms), logs %s\n",
              static_cast<long long>(rate), static_cast<long long>(rounds),
              static_cast<long long>(max_workers), static_cast<long long>(interval_ms),
              static_cast<long long>(cooldown_ms), log_dir.c_str());
  std::printf("%8s %8s %12s %10s\n", "seconds", "workers", "elements/s", "wait");
  const auto start = Clock::now();
  const auto step = duration<double>(1.0 / static_cast<double>(rate));
  auto due = start;
  auto row_start = start;
  auto last_poll = start;
  double waited = 0;
  int64_t got = 0;
  std::vector<Row> rows;
  Status failure;
  while (!stop_requested()) {
    auto now = Clock::now();
    if (now >= start + std::chrono::seconds(seconds))
      break;
    if (now < due) // the trainer's step: it is busy, not waiting
      std::this_thread::sleep_until(std::min(due, row_start + std::chrono::seconds(1)));
    now = Clock::now();
    if (now >= due) {
      Element e;
      bool end = false;
      const Status st = stream->next(e, end, milliseconds{100});
      const auto after = Clock::now();
      waited += duration<double>(after - std::max(now, due)).count();
      if (st.ok() && !end) {
        ++got;
        // A trainer that waited starts its next step now: it does not catch up.
        due = std::max(due, after - std::chrono::duration_cast<Clock::duration>(step)) +
              std::chrono::duration_cast<Clock::duration>(step);
      } else if (st.code() != ErrorCode::deadline_exceeded) {
        failure = end ? data_loss("the endless job ended") : st;
        break;
      }
    }
    now = Clock::now();
    if (now - last_poll >= milliseconds{100}) {
      last_poll = now;
      scaler.poll();
    }
    if (now - row_start >= std::chrono::seconds(1)) {
      const double span = duration<double>(now - row_start).count();
      Row r{duration<double>(now - start).count(), scaler.live_workers(), got / span,
            std::min(1.0, waited / span)};
      std::printf("%8.1f %8lld %12.1f %9.1f%%\n", r.t, static_cast<long long>(r.workers),
                  r.elements_per_s, 100 * r.wait_share);
      std::fflush(stdout);
      rows.push_back(r);
      row_start = now;
      waited = 0;
      got = 0;
    }
  }
  { ElementStream done = std::move(stream).value(); }
  scaler.stop(milliseconds{35000});
  auto failures = scaler.failures();
  if (!failure.ok())
    return bad(failure.with_context("reading"));
  for (const auto& f : failures)
    std::fprintf(stderr, "bench autoscale: %s\n", f.c_str());

  // The end: the last quarter of the run (at least 5 rows).
  const std::size_t tail = std::min(rows.size(), std::max<std::size_t>(5, rows.size() / 4));
  double wait = 0;
  int64_t lo = 64, hi = 0;
  for (std::size_t i = rows.size() - tail; i < rows.size(); ++i) {
    wait += rows[i].wait_share / static_cast<double>(tail);
    lo = std::min(lo, rows[i].workers);
    hi = std::max(hi, rows[i].workers);
  }
  std::printf("changes   :");
  for (const auto& ev : scaler.events())
    std::printf(" %.1f s %lld->%lld;", ev.at_s, static_cast<long long>(ev.from),
                static_cast<long long>(ev.to));
  std::printf("%s\n", scaler.events().empty() ? " none" : "");
  std::printf("end       : over the last %zu s the trainer waited %.1f%% of its time (%s 10%%) "
              "with %lld..%lld workers (%s)\n",
              tail, 100 * wait, wait < 0.10 ? "below" : "NOT below", static_cast<long long>(lo),
              static_cast<long long>(hi), lo == hi ? "settled" : "still changing");
  std::printf("load      : %s (at the start; %u hardware threads)\n", load.c_str(),
              std::max(1u, std::thread::hardware_concurrency()));
  if (!csv_path.empty() || !png_path.empty()) {
    const std::string csv = csv_path.empty() ? log_dir + "/autoscale.csv" : csv_path;
    if (Status st = write_csv(csv, rows); !st.ok())
      return bad(st);
    if (!png_path.empty()) {
      if (Status st = plot(plotter, csv, png_path, static_cast<double>(rate)); !st.ok())
        return bad(st);
      std::printf("plot      : %s\n", png_path.c_str());
    }
  }
  return failures.empty() ? 0 : 1;
}

const Benchmark reg{"autoscale",
                    "the autoscaler on worker processes: a fixed-rate trainer's wait share and "
                    "the worker count over time",
                    bench_autoscale};

} // namespace
} // namespace conveyor::apps
