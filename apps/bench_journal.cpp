// `conveyor bench journal`: the dispatcher journal's cost (dispatcher/journal.hpp) on this disk.
//   (a) append throughput with group fsync: one thread appends as fast as it can; the writer
//       thread groups what queued up while it synced
//   (b) one record at a time: append, wait until durable, next (a strictly sequential client;
//       = one fsync per record)
//   (c) replay: open the journal of (a) again (read + CRC check + decode + apply every record)
//   (d) start-up after compaction: snapshot of the same state, then open again
// Records are a dispatcher's typical mix: per job a CreateJob, a task per worker, split
// positions, task and job completions.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdlib.h>

#include "dispatcher/journal.hpp"
#include "apps/bench.hpp"
#include "apps/cli_common.hpp"

namespace conveyor::apps {
namespace {

using namespace conveyor::msg;
using Clock = std::chrono::steady_clock;

constexpr CommandInfo kInfo{
  "bench journal", "[--records N] [--sequential N] [--dir DIR]",
  "Measures the dispatcher journal: appends per second with group fsync, one-at-a-time durable\n"
  "appends, replay time of N records, and start-up time after compaction."};

// A valid history of about n records.
std::vector<Update> workload(int64_t n) {
  std::vector<Update> out;
  out.reserve(static_cast<std::size_t>(n) + 64);
  out.push_back(RegisterDatasetRecord{"1000", "fp", std::string(300, 'd'), 0, 1});
  constexpr int kWorkers = 8;
  for (worker_id_t w = 1; w <= kWorkers; ++w)
    out.push_back(RegisterWorkerRecord{w, "127.0.0.1:" + std::to_string(7000 + w), 1});
  task_id_t task = 1;
  for (job_id_t job = 1; static_cast<int64_t>(out.size()) < n; ++job) {
    out.push_back(CreateJobRecord{job, "1000", "job" + std::to_string(job), 1, -1, "AUTO", 2});
    task_id_t first = task;
    for (worker_id_t w = 1; w <= kWorkers; ++w)
      out.push_back(CreateTaskRecord{task++, job, w, 3});
    for (int64_t s = 1; s <= 64; ++s)
      out.push_back(SplitPositionRecord{job, 0, 0, s, s, 4, {}, {}});
    for (task_id_t t = first; t < task; ++t)
      out.push_back(FinishTaskRecord{t, "", 5});
    out.push_back(FinishJobRecord{job, 6});
  }
  out.resize(static_cast<std::size_t>(n));
  return out;
}

int run_bench_journal(const std::vector<std::string>& args) {
  int64_t records = 100000;
  int64_t sequential = 300;
  std::string dir;
  po::options_description options("journal benchmark options");
  // clang-format off
  options.add_options()
      ("records,n", po::value(&records)->default_value(records)->value_name("N"),
       "records appended in (a) and replayed in (c)")
      ("sequential", po::value(&sequential)->default_value(sequential)->value_name("N"),
       "records appended one at a time in (b)")
      ("dir", po::value(&dir)->default_value("")->value_name("DIR"),
       "directory to use (default: a fresh one under the temp dir, removed afterwards); it "
       "must be on the disk a dispatcher's --work-dir would use");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = check_at_least("--records", records, 100); !st.ok())
    return bad(st);
  if (auto st = check_at_least("--sequential", sequential, 1); !st.ok())
    return bad(st);
  if (records > 10000000)
    return bad(invalid_argument("`--records` must be at most 10000000"));
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "conveyor-bench-journal-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      return bad(io_error("cannot create a temp dir"));
    dir = pattern;
  } else if (std::filesystem::exists(dir) && !std::filesystem::is_empty(dir)) {
    return bad(invalid_argument("`--dir` " + dir + " must be empty or absent"));
  }
  struct Cleanup {
    std::string d;
    bool on;
    ~Cleanup() {
      std::error_code ec;
      if (on)
        std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir, own_dir};

  auto history = workload(records);
  std::printf("conveyor bench journal: %lld records (%s), dir %s\n\n",
              static_cast<long long>(records), "job/task/split mix", dir.c_str());
  actors::JournalOptions jo;
  jo.dir = dir + "/a";
  jo.compact_after_records = records * 10; // no compaction during (a)
  {
    actors::DispatcherState state;
    auto j = actors::Journal::open(jo, state);
    if (!j.ok())
      return bad(j.status());
    auto t0 = Clock::now();
    for (const auto& r : history)
      (*j)->append(r, nullptr);
    if (auto s = (*j)->flush(); !s.ok())
      return bad(s);
    double secs = seconds_since(t0);
    auto groups = (*j)->groups_synced();
    std::printf("(a) append, group fsync:      %10.0f records/s  (%.3f s, %llu fsync groups, "
                "%.0f records/group)\n",
                static_cast<double>(records) / secs, secs, static_cast<unsigned long long>(groups),
                static_cast<double>(records) / static_cast<double>(std::max<uint64_t>(groups, 1)));
  }
  {
    actors::JournalOptions so = jo;
    so.dir = dir + "/b";
    actors::DispatcherState state;
    auto j = actors::Journal::open(so, state);
    if (!j.ok())
      return bad(j.status());
    auto t0 = Clock::now();
    for (int64_t i = 0; i < sequential; ++i) {
      (*j)->append(history[static_cast<std::size_t>(i % records)], nullptr);
      if (auto s = (*j)->flush(); !s.ok())
        return bad(s);
      if (i % records == records - 1)
        break; // (the history is only valid once; enough samples anyway)
    }
    double secs = seconds_since(t0);
    std::printf("(b) append, one at a time:    %10.0f records/s  (%.3f ms per durable append)\n",
                static_cast<double>(sequential) / secs,
                secs * 1000 / static_cast<double>(sequential));
  }
  actors::DispatcherState replayed;
  {
    auto t0 = Clock::now();
    actors::JournalReplay info;
    auto j = actors::Journal::open(jo, replayed, &info);
    if (!j.ok())
      return bad(j.status());
    double secs = seconds_since(t0);
    std::printf("(c) replay:                   %10.3f s for %lld records (%.0f records/s)%s\n",
                secs, static_cast<long long>(info.records),
                static_cast<double>(info.records) / secs,
                secs < 1.0 ? "" : "  ABOVE the 1 s target");
    auto t1 = Clock::now();
    if (auto s = (*j)->compact(replayed); !s.ok())
      return bad(s);
    std::printf("(d) compaction:               %10.3f s to write the snapshot\n",
                seconds_since(t1));
  }
  {
    auto t0 = Clock::now();
    actors::DispatcherState again;
    actors::JournalReplay info;
    auto j = actors::Journal::open(jo, again, &info);
    if (!j.ok())
      return bad(j.status());
    double secs = seconds_since(t0);
    std::printf("    start-up after compaction: %9.3f s (snapshot of %zu jobs, %lld records after "
                "it)%s\n",
                secs, again.snapshot().jobs.size(), static_cast<long long>(info.records),
                again == replayed ? "" : "  STATE DIFFERS");
    if (!(again == replayed))
      return bad(internal_error("the state after compaction differs from the replayed one"));
  }
  return kExitOk;
}

const Benchmark reg{"journal", "dispatcher journal: appends/s with group fsync, replay time",
                    run_bench_journal};

} // namespace
} // namespace conveyor::apps
