// The dispatcher journal (dispatcher/journal.hpp): round trip, replay == live state, torn tail,
// corrupt record (file + offset), compaction, group fsync callback order. Real files in a temp dir.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "dispatcher/coordinated_resume.hpp"
#include "dispatcher/journal.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "test/unit/journal/journal_files.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::msg;
using namespace conveyor::testing;
namespace fs = std::filesystem;

namespace {

// A valid history touching every record type: n rounds of dataset, 2 workers, a job with a
// task per worker, a split position, a finished task, a removed worker, a finished job.
std::vector<Update> history(int rounds) {
  std::vector<Update> out;
  worker_id_t w = 1;
  task_id_t t = 1;
  for (int i = 0; i < rounds; ++i) {
    auto ds = std::to_string(1000 + i);
    out.push_back(RegisterDatasetRecord{ds, "fp" + ds, std::string("def\0ined", 8) + ds, 1, i});
    worker_id_t w1 = w++, w2 = w++;
    out.push_back(RegisterWorkerRecord{w1, "127.0.0.1:" + std::to_string(w1), i});
    out.push_back(RegisterWorkerRecord{w2, "127.0.0.1:" + std::to_string(w2), i});
    job_id_t job = static_cast<job_id_t>(i + 1);
    if (i % 2) // a named job of its own iteration (format 8)
      out.push_back(
        CreateNamedJobRecord{CreateJobRecord{job, ds, "named" + ds, 1, -1, "AUTO", i}, i});
    else
      out.push_back(CreateJobRecord{job, ds, "", 1, -1, "AUTO", i});
    task_id_t t1 = t++, t2 = t++;
    out.push_back(CreateTaskRecord{t1, job, w1, i});
    out.push_back(CreateTaskRecord{t2, job, w2, i});
    out.push_back(SplitPositionRecord{job, 0, 0, i + 3, i + 3, i, {}, {}});
    out.push_back(FinishTaskRecord{t1, i % 3 ? "" : "boom", i});
    out.push_back(RemoveWorkerRecord{w1, "no heartbeat", i});
    if (i % 2)
      out.push_back(FinishJobRecord{job, i});
    else
      out.push_back(ReleaseJobRecord{job, i});
  }
  return out;
}

DispatcherState apply_all(const std::vector<Update>& records) {
  DispatcherState s;
  for (const auto& r : records)
    REQUIRE(s.apply(r).ok());
  return s;
}

// Each record comes back from the codec as it went in.
void check_codec_roundtrip(const std::vector<Update>& records) {
  for (const auto& r : records) {
    auto back = Journal::decode(Journal::encode(r));
    REQUIRE(back.ok());
    CHECK(Journal::encode(*back) == Journal::encode(r));
  }
}

// `live` through the snapshot codec and restore(): an equal state (returned for more checks).
DispatcherState restored_from_snapshot(const DispatcherState& live) {
  auto snapshot = Journal::decode_snapshot(Journal::encode_snapshot(live.snapshot()));
  REQUIRE(snapshot.ok());
  DispatcherState restored;
  REQUIRE(restored.restore(*snapshot).ok());
  CHECK(restored == live);
  return restored;
}

// Appends every record and waits until all are durable.
void write_all(Journal& j, const std::vector<Update>& records) {
  for (const auto& r : records)
    j.append(r, [](const Status& s) { REQUIRE(s.ok()); });
  REQUIRE(j.flush().ok());
}

std::unique_ptr<Journal> open_ok(const std::string& dir, DispatcherState& state,
                                 JournalReplay* replay = nullptr) {
  auto j = Journal::open(JournalOptions{dir}, state, replay);
  REQUIRE_MESSAGE(j.ok(), j.status().to_string());
  return std::move(j).value();
}

// `records` written to a fresh journal in `dir`, then replayed into a new state.
DispatcherState replayed_through_journal(const std::string& dir,
                                         const std::vector<Update>& records) {
  {
    DispatcherState state;
    auto j = open_ok(dir, state);
    write_all(*j, records);
  }
  DispatcherState replayed;
  open_ok(dir, replayed);
  return replayed;
}

int64_t file_size(const std::string& path) { return static_cast<int64_t>(fs::file_size(path)); }

} // namespace

TEST_CASE("every record type survives encode and decode") {
  for (const auto& r : history(3)) {
    auto bytes = Journal::encode(r);
    auto back = Journal::decode(bytes);
    REQUIRE(back.ok());
    CHECK(back->index() == r.index());
    CHECK(Journal::encode(*back) == bytes);
    // Any truncation is detected, never decoded into something else.
    for (std::size_t cut = 0; cut < bytes.size(); ++cut)
      CHECK_FALSE(Journal::decode(std::string_view(bytes).substr(0, cut)).ok());
  }
  auto unknown = Journal::decode(std::string(1, char(200)));
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("unknown record type 200") != std::string::npos);
}

TEST_CASE("a reopened journal replays into the live state") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  auto records = history(20);
  DispatcherState live = apply_all(records);
  {
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    CHECK(state == DispatcherState{});
    write_all(*j, records);
  }
  DispatcherState replayed;
  JournalReplay info;
  auto j = open_ok(dir.path(), replayed, &info);
  CHECK(info.records == static_cast<int64_t>(records.size()));
  CHECK(info.truncated_bytes == 0);
  CHECK_FALSE(info.snapshot_loaded);
  CHECK(replayed == live);
  CHECK(replayed.snapshot().jobs.size() == 10); // released jobs (every other round) are erased
  // Appending after a reopen continues the same history.
  auto more = history(21);
  std::vector<Update> tail(more.begin() + static_cast<long>(records.size()), more.end());
  write_all(*j, tail);
  j.reset();
  DispatcherState again;
  open_ok(dir.path(), again);
  CHECK(again == apply_all(more));
  CHECK_FALSE(again == live);
}

TEST_CASE("a torn tail is truncated with a warning, and appending goes on") {
  testing::TempDir dir;
  auto records = history(5);
  std::string segment;
  int64_t good_size = 0;
  {
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    write_all(*j, records);
    segment = Journal::segment_path(dir.path(), j->generation());
  }
  good_size = file_size(segment);
  // A crash in the middle of an append: the next record only partly written.
  auto extra = Journal::encode(Update{RegisterDatasetRecord{"late", "fpl", "d", 0, 9}});
  // The real next frame, written by a journal, then cut: what a crash mid-write leaves.
  std::string next_frame;
  {
    std::string saved = read_bytes(segment);
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    j->append(RegisterDatasetRecord{"late", "fpl", "d", 0, 9}, nullptr);
    REQUIRE(j->flush().ok());
    j.reset();
    next_frame = read_bytes(segment).substr(saved.size());
    write_bytes(segment, saved);
  }
  REQUIRE(next_frame.size() == static_cast<std::size_t>(kFrame) + extra.size());
  SUBCASE("the header and half the payload") {
    std::ofstream out(segment, std::ios::binary | std::ios::app);
    out << next_frame.substr(0, kFrame + extra.size() / 2);
  }
  SUBCASE("the header alone") {
    std::ofstream out(segment, std::ios::binary | std::ios::app);
    out << next_frame.substr(0, kFrame);
  }
  SUBCASE("three header bytes") {
    std::ofstream out(segment, std::ios::binary | std::ios::app);
    out << next_frame.substr(0, 3);
  }
  auto torn_size = file_size(segment);
  REQUIRE(torn_size > good_size);
  DispatcherState state;
  JournalReplay info;
  auto j = open_ok(dir.path(), state, &info);
  CHECK(info.truncated_bytes == torn_size - good_size);
  CHECK(file_size(segment) == good_size);
  CHECK(state == apply_all(records));
  j->append(RegisterDatasetRecord{"late", "fpl", "d", 0, 9}, nullptr);
  REQUIRE(j->flush().ok());
  j.reset();
  DispatcherState again;
  open_ok(dir.path(), again);
  CHECK(again.dataset("late"));
}

TEST_CASE("a corrupt record before the tail stops start-up naming the file and offset") {
  testing::TempDir dir;
  auto records = history(4);
  std::string segment;
  {
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    write_all(*j, records);
    segment = Journal::segment_path(dir.path(), j->generation());
  }
  // A payload byte of the third record.
  int64_t offset = offset_of(records, 2);
  {
    std::fstream f(segment, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(offset + kFrame + 2);
    char c = 0;
    f.get(c);
    f.seekp(offset + kFrame + 2);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  DispatcherState state;
  auto j = Journal::open(JournalOptions{dir.path()}, state);
  REQUIRE_FALSE(j.ok());
  CHECK(j.status().code() == ErrorCode::data_loss);
  CHECK(j.status().message().rfind(segment + " at byte " + std::to_string(offset) +
                                     " (record 3, number 3 in this file): the record's payload "
                                     "checksum does not match",
                                   0) == 0);
  // Nothing was truncated: the evidence stays for the operator.
  CHECK(file_size(segment) > offset + 100);
}

TEST_CASE("a record the state refuses stops start-up too") {
  testing::TempDir dir;
  {
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    j->append(CreateJobRecord{1, "nope", "", 0, -1, "AUTO", 0}, nullptr);
    REQUIRE(j->flush().ok());
  }
  DispatcherState state;
  auto j = Journal::open(JournalOptions{dir.path()}, state);
  REQUIRE_FALSE(j.ok());
  CHECK(j.status().message().find("at byte 32 (record 1, number 1 in this file): the state "
                                  "refused the record") != std::string::npos);
}

TEST_CASE("compaction: a snapshot plus a new segment replays to the same state") {
  testing::TempDir dir;
  auto records = history(30);
  std::size_t half = records.size() / 2;
  {
    DispatcherState state;
    auto j = open_ok(dir.path(), state);
    auto g0 = j->generation();
    for (std::size_t i = 0; i < half; ++i) {
      j->append(records[i], nullptr);
      REQUIRE(state.apply(records[i]).ok());
    }
    REQUIRE(j->compact(state).ok());
    CHECK(j->generation() == g0 + 1);
    CHECK(fs::exists(Journal::snapshot_path(dir.path(), g0 + 1)));
    CHECK_FALSE(fs::exists(Journal::segment_path(dir.path(), g0)));
    for (std::size_t i = half; i < records.size(); ++i) {
      j->append(records[i], nullptr);
      REQUIRE(state.apply(records[i]).ok());
    }
    REQUIRE(j->flush().ok());
  }
  DispatcherState replayed;
  JournalReplay info;
  auto j = open_ok(dir.path(), replayed, &info);
  CHECK(info.snapshot_loaded);
  CHECK(info.records == static_cast<int64_t>(records.size() - half));
  CHECK(replayed == apply_all(records));
  j.reset();
  // An unfinished snapshot (crash before the rename) is ignored and removed.
  { std::ofstream(Journal::snapshot_path(dir.path(), 99) + ".tmp") << "garbage"; }
  DispatcherState again;
  open_ok(dir.path(), again);
  CHECK(again == replayed);
  CHECK_FALSE(fs::exists(Journal::snapshot_path(dir.path(), 99) + ".tmp"));
  // A corrupt snapshot is an error naming it.
  auto snap = Journal::snapshot_path(dir.path(), info.generation);
  {
    std::fstream f(snap, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(40);
    f.put('X');
  }
  DispatcherState broken;
  auto bad = Journal::open(JournalOptions{dir.path()}, broken);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().rfind(snap + " at byte 32: ", 0) == 0);
}

TEST_CASE("group fsync: callbacks run in append order, after their group is on disk") {
  testing::TempDir dir;
  DispatcherState state;
  auto j = open_ok(dir.path(), state);
  auto segment = Journal::segment_path(dir.path(), j->generation());
  auto records = history(100); // 1000 records
  std::mutex mu;
  std::condition_variable cv;
  bool release_first = false;
  std::vector<uint64_t> order;
  std::atomic<bool> size_ok{true};
  int64_t expected_end = kHeader;
  for (std::size_t i = 0; i < records.size(); ++i) {
    expected_end += kFrame + static_cast<int64_t>(Journal::encode(records[i]).size());
    auto seq = i + 1;
    auto end = expected_end;
    j->append(records[i], [&, seq, end](const Status& s) {
      REQUIRE(s.ok());
      if (file_size(segment) < end) // the record is on disk before its callback
        size_ok = false;
      std::unique_lock<std::mutex> lock{mu};
      order.push_back(seq);
      if (seq == 1) // hold the first group until every other record is queued
        cv.wait(lock, [&] { return release_first; });
    });
  }
  {
    std::lock_guard<std::mutex> guard{mu};
    release_first = true;
  }
  cv.notify_all();
  REQUIRE(j->flush().ok());
  CHECK(size_ok);
  REQUIRE(order.size() == records.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    REQUIRE(order[i] == i + 1);
  // The first record was a group of its own (or with few others); the rest were grouped.
  CHECK(j->groups_synced() <= 3);
}

TEST_CASE("named-job repetitions, split sizes and the cross-trainer cache mode survive replay and "
          "snapshots") {
  using conveyor::msg::CacheSharing;
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  records.push_back(CreateJobRecord{1, "1000", "trainer", 1, -1, "AUTO", 1, 512});
  records.push_back(
    ReleaseJobRecord{1, 2}); // kept until forgotten; the name's next reading is repetition 1
  records.push_back(CreateJobRecord{2, "1000", "trainer", 1, -1, "AUTO", 3, 256});
  records.push_back(CreateJobRecord{4, "1000", "cached", 0, -1, "AUTO", 3, 0,
                                    static_cast<uint8_t>(CacheSharing::window)});
  records.push_back(CreateJobRecord{5, "1000", "epoch", 0, -1, "AUTO", 3, 0,
                                    static_cast<uint8_t>(CacheSharing::whole_epoch), 1, "team-a",
                                    3});
  records.push_back(
    CreateNamedJobRecord{CreateJobRecord{6, "1000", "trainer", 1, -1, "AUTO", 3, 256}, 7});
  records.push_back(ReleaseJobRecord{6, 4});
  records.push_back(ForgetJobRecord{6, 5}); // job GC: iteration 7 may run again
  DispatcherState live = apply_all(records);
  REQUIRE(live.job(1) != nullptr);
  CHECK(live.job(1)->released); // an ended iteration of a name stays until job GC
  CHECK(live.job(6) == nullptr);
  CHECK(live.named_job("1000", "trainer", 7) == nullptr);
  REQUIRE(live.job(2) != nullptr);
  CHECK(live.job(2)->repetition == 1);
  CHECK(live.job(2)->split_size == 256);
  CHECK(live.job(2)->cross_trainer_cache == CacheSharing::none);
  REQUIRE(live.job(4) != nullptr);
  CHECK(live.job(4)->cross_trainer_cache == CacheSharing::window);
  REQUIRE(live.job(5) != nullptr);
  CHECK(live.job(5)->cross_trainer_cache == CacheSharing::whole_epoch);
  // Through a snapshot (compaction) and through the journal's codec.
  auto bytes = Journal::encode_snapshot(live.snapshot());
  auto snapshot = Journal::decode_snapshot(bytes);
  REQUIRE(snapshot.ok());
  DispatcherState restored;
  REQUIRE(restored.restore(*snapshot).ok());
  CHECK(restored == live);
  REQUIRE(restored.job(4) != nullptr);
  CHECK(restored.job(4)->cross_trainer_cache == CacheSharing::window);
  REQUIRE(restored.job(5) != nullptr);
  CHECK(restored.job(5)->cross_trainer_cache == CacheSharing::whole_epoch);
  CHECK(restored.job(5)->tenant == "team-a"); // format 9: the job's tenant and weight
  CHECK(restored.job(5)->tenant_weight == 3);
  CHECK(restored.job(4)->tenant == "default");
  REQUIRE(restored.apply(ReleaseJobRecord{2, 4}).ok());
  REQUIRE(restored.apply(CreateJobRecord{3, "1000", "trainer", 1, -1, "AUTO", 5, 0}).ok());
  REQUIRE(restored.job(3) != nullptr);
  CHECK(restored.job(3)->repetition == 8); // not 0: the count survived the snapshot
  CHECK(restored.named_job("1000", "trainer", 0)->released); // and the ended iterations
  CHECK(restored.named_job("1000", "trainer", 1)->released);
  CHECK(restored.snapshot().jobs.size() == 5);
  for (const Update& r : {Update{records[5]}, Update{records[6]}, Update{records[8]}}) {
    // (the format-8 records, and one with a tenant: format 9)
    auto back = Journal::decode(Journal::encode(r));
    REQUIRE(back.ok());
    CHECK(Journal::encode(*back) == Journal::encode(r));
  }
}

TEST_CASE("splits held at a crash survive replay and snapshots") {
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  records.push_back(CreateJobRecord{1, "1000", "", 1, -1, "AUTO", 1, 10});
  records.push_back(
    SplitPositionRecord{1, 0, 0, 2, 2, 2, {{0, 0, 0, 10, ""}, {0, 1, 10, 20, "f.txt"}}, {}});
  records.push_back(SplitPositionRecord{1, 0, 0, 0, 0, 3, {}, {{0, 0}}});
  DispatcherState live = apply_all(records);
  REQUIRE(live.job(1) != nullptr);
  REQUIRE(live.job(1)->outstanding_splits.size() == 1);
  CHECK(live.job(1)->outstanding_splits[0].file == "f.txt");
  check_codec_roundtrip(records); // the codec keeps both lists
  DispatcherState restored = restored_from_snapshot(live);
  REQUIRE(restored.job(1)->outstanding_splits.size() == 1);
  CHECK(restored.job(1)->outstanding_splits[0].begin == 10);
}

TEST_CASE("splits of several sources: each source's position and held splits survive replay and "
          "snapshots (format 12)") {
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  records.push_back(CreateJobRecord{1, "1000", "", 1, -1, "AUTO", 1, 10});
  // Source 0 hands out (0, 0); source 1 hands out its own (0, 0) and (0, 1): the same epoch and
  // index, another split.
  records.push_back(SplitPositionRecord{1, 0, 0, 1, 1, 2, {{0, 0, 0, 10, "", 0}}, {}, 0});
  records.push_back(
    SplitPositionRecord{1, 0, 0, 2, 3, 3, {{0, 0, 0, 10, "", 1}, {0, 1, 10, 20, "", 1}}, {}, 1});
  records.push_back(SplitPositionRecord{1, 0, 0, 0, 0, 4, {}, {{0, 0, 1}}}); // source 1's (0, 0)
  DispatcherState live = apply_all(records);
  const auto* job = live.job(1);
  REQUIRE(job != nullptr);
  CHECK(job->split_next_index == 1); // source 0's position
  REQUIRE(job->source_positions.size() == 1);
  CHECK(job->source_positions[0].source == 1);
  CHECK(job->source_positions[0].next_index == 2);
  CHECK(job->splits_handed_out == 3);
  REQUIRE(job->outstanding_splits.size() == 2); // source 0's (0, 0) and source 1's (0, 1)
  CHECK(job->outstanding_splits[0].source == 0);
  CHECK(job->outstanding_splits[0].index == 0);
  CHECK(job->outstanding_splits[1].source == 1);
  CHECK(job->outstanding_splits[1].index == 1);
  check_codec_roundtrip(records);
  DispatcherState restored = restored_from_snapshot(live);
  REQUIRE(restored.job(1)->source_positions.size() == 1);
  CHECK(restored.job(1)->source_positions[0].next_index == 2);
  // A negative source is refused, not filed under source 0.
  CHECK_FALSE(
    restored.apply(SplitPositionRecord{1, 0, 0, 3, 4, 5, {{0, 2, 20, 30, "", -1}}, {}, -1}).ok());
}

TEST_CASE("a deterministic job's window and finished-split log survive replay and snapshots, "
          "keeping the entries from the first its consumer may lack (format 14)") {
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  CreateJobRecord create{1, "1000", "", 1, -1, "AUTO", 1, 10};
  create.deterministic_window = 16;
  records.push_back(create);
  records.push_back(SplitPositionRecord{
    1, 0, 0, 3, 3, 2, {{0, 0, 0, 10, ""}, {0, 1, 10, 20, ""}, {0, 2, 20, 30, ""}}, {}});
  // Splits 1 and 0 finish (log entries 0 and 1); the consumer had none of the log yet.
  records.push_back(SplitPositionRecord{1, 0, 0, 0, 0, 3, {}, {{0, 1}, {0, 0}}, 0, 0, 0});
  // Split 2 finishes (entry 2) once the consumer had entries 0 and 1: they are forgotten.
  records.push_back(SplitPositionRecord{1, 0, 0, 0, 0, 4, {}, {{0, 2}}, 0, 2, 2});
  DispatcherState live = apply_all(records);
  const auto* job = live.job(1);
  REQUIRE(job != nullptr);
  CHECK(job->deterministic_window == 16);
  REQUIRE(job->finished_log.size() == 1);
  CHECK(job->finished_log[0].index == 2);
  CHECK(job->finished_log_next == 3);
  CHECK(job->outstanding_splits.empty());
  check_codec_roundtrip(records);
  DispatcherState restored = restored_from_snapshot(live);
  CHECK(restored.job(1)->deterministic_window == 16);
  REQUIRE(restored.job(1)->finished_log.size() == 1);

  SUBCASE("a record lost in between keeps more of the log, never less") {
    DispatcherState s = apply_all({records[0], records[1], records[2], records[3]});
    // Entries 2..4 were never journaled; entry 5 comes with the consumer at 3.
    REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 0, 0, 5, {}, {{0, 5}}, 0, 5, 3}).ok());
    // Counted back from the newest, entries 0 and 1 are numbered 3 and 4: both kept.
    CHECK(s.job(1)->finished_log.size() == 3);
    CHECK(s.job(1)->finished_log_next == 6);
  }
  SUBCASE("a job that is not deterministic keeps no log") {
    DispatcherState s = apply_all(
      {records[0], CreateJobRecord{1, "1000", "", 1, -1, "AUTO", 1, 10}, records[2], records[3]});
    CHECK(s.job(1)->finished_log.empty());
  }
}

TEST_CASE("a resumed OFF read's slots survive replay and snapshots: each task keeps the slot its "
          "record gave it, and no task is made beyond them (format 15)") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  for (worker_id_t w = 1; w <= 3; ++w)
    records.push_back(RegisterWorkerRecord{w, "127.0.0.1:" + std::to_string(w), 0});
  CreateJobRecord create{1, "1000", "", static_cast<uint8_t>(ShardingPolicy::off), -1, "AUTO", 1};
  create.off_slots = {OffSlot{7, 40}, OffSlot{9, ReadCursor::kSkipAll}};
  records.push_back(create);
  records.push_back(CreateTaskRecord{1, 1, 2, 2});             // the slots go in the record's order
  records.push_back(RemoveWorkerRecord{2, "no heartbeat", 3}); // a lost task keeps its slot taken
  records.push_back(CreateTaskRecord{2, 1, 1, 4});
  DispatcherState live = apply_all(records);
  REQUIRE(live.task(2) != nullptr);
  CHECK(live.task(1) == nullptr);
  CHECK(live.task(2)->off_slot == 9);
  CHECK(live.task(2)->off_skip == ReadCursor::kSkipAll);
  CHECK(live.job(1)->all_off_slots_taken());
  // Every slot has had its task: a third worker gets none (the record is refused, nothing changes).
  DispatcherState refused = live;
  auto third = refused.apply(CreateTaskRecord{3, 1, 3, 5});
  CHECK(third.code() == ErrorCode::failed_precondition);
  CHECK_MESSAGE(
    third.message().find("each of the 2 slot(s) of its resumed OFF read has its task") !=
      std::string::npos,
    third.message());
  CHECK(refused == live);
  // Replayed from the journal, and restored from a snapshot: the same slots and tasks.
  DispatcherState replayed = replayed_through_journal(dir.path(), records);
  CHECK(replayed == live);
  REQUIRE(replayed.task(2) != nullptr);
  CHECK(replayed.task(2)->off_slot == 9);
  DispatcherState restored = restored_from_snapshot(live);
  CHECK(restored.job(1)->off_slots_taken == 2);

  SUBCASE("the first task takes the first slot") {
    DispatcherState s = apply_all({records[0], records[2], records[4], records[5]});
    CHECK(s.task(1)->off_slot == 7);
    CHECK(s.task(1)->off_skip == 40);
    CHECK_FALSE(s.job(1)->all_off_slots_taken());
  }
  SUBCASE("slots are for OFF jobs only") {
    CreateJobRecord dynamic = create;
    dynamic.policy = static_cast<uint8_t>(ShardingPolicy::dynamic);
    DispatcherState s = apply_all({records[0]});
    auto st = s.apply(dynamic);
    CHECK(st.code() == ErrorCode::invalid_argument);
    CHECK(s.job(1) == nullptr);
  }
}

// A trainer of a coordinated read by 2 (slots 5 and 6) after `rounds` rounds, served in turn,
// saved in job 17.
ReadCursor coordinated_after(int64_t index, int64_t rounds) {
  ReadCursor c = ReadCursor::coordinated("fp", 2, index);
  for (int64_t r = 0; r < rounds; ++r)
    REQUIRE(c.consume(0, 5 + r % 2, r / 2, false));
  c.set_job(17);
  return c;
}

TEST_CASE("a resumed coordinated read starts at the least of its N trainers' cursors, in any "
          "order they come, and that survives replay and snapshots (format 16)") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  // Trainer 1 saved at round 9 (slot 5: 5 local rounds, slot 6: 4), trainer 0 at round 6 (3, 3).
  const auto ahead = coordinated_shares(coordinated_after(1, 9));
  const auto behind = coordinated_shares(coordinated_after(0, 6));
  REQUIRE(ahead.size() == 2);
  CHECK(ahead[0].skip == 10); // 5 rounds of 2 elements
  std::vector<Update> records;
  records.push_back(RegisterDatasetRecord{"1000", "fp", "def", 1, 0});
  for (worker_id_t w = 1; w <= 3; ++w)
    records.push_back(RegisterWorkerRecord{w, "127.0.0.1:" + std::to_string(w), 0});
  CreateJobRecord create{1, "1000", "coord", static_cast<uint8_t>(ShardingPolicy::off),
                         2, "AUTO", 1};
  create.resumed_from = 17;
  records.push_back(CreateNamedJobRecord{create, 0});
  records.push_back(CoordinatedResumeRecord{1, 1, ahead, 2}); // the one ahead comes first
  DispatcherState waiting = apply_all(records);
  CHECK(waiting.job(1)->awaiting_cursors());
  // No task before both cursors are there.
  auto early = DispatcherState{waiting}.apply(CreateTaskRecord{1, 1, 1, 3});
  CHECK(early.code() == ErrorCode::failed_precondition);
  CHECK_MESSAGE(early.message().find("has 1 of its 2 trainers' cursors") != std::string::npos,
                early.message());
  records.push_back(CoordinatedResumeRecord{1, 0, behind, 3});
  records.push_back(CreateTaskRecord{1, 1, 1, 4});
  records.push_back(CreateTaskRecord{2, 1, 2, 4});
  DispatcherState live = apply_all(records);
  const auto* job = live.job(1);
  REQUIRE(job != nullptr);
  CHECK_FALSE(job->awaiting_cursors());
  REQUIRE(job->off_slots.size() == 2); // the one behind decides: 3 rounds of each slot
  CHECK(job->off_slots[0].slot == 5);
  CHECK(job->off_slots[0].skip == 6);
  CHECK(job->off_slots[1].skip == 6);
  CHECK(live.task(2)->off_slot == 6);
  CHECK(job->all_off_slots_taken()); // a third worker gets none
  check_codec_roundtrip(records);
  DispatcherState replayed = replayed_through_journal(dir.path(), records);
  CHECK(replayed == live);
  DispatcherState restored = restored_from_snapshot(waiting);
  CHECK(restored.job(1)->resumed_from == 17);
  CHECK(restored.job(1)->resume_shares.size() == 1);
  restored_from_snapshot(live);

  SUBCASE("a trainer that comes after the start is decided joins at or ahead of it") {
    CHECK(late_join_refusal(job->off_slots, coordinated_after(1, 6)).empty());
    CHECK(late_join_refusal(job->off_slots, coordinated_after(1, 11)).empty());
    auto why = late_join_refusal(job->off_slots, coordinated_after(1, 4));
    CHECK_MESSAGE(why.find("consumer_index 1 is at round 4") != std::string::npos, why);
    CHECK_MESSAGE(why.find("2 local rounds consumed, the job skips 3") != std::string::npos, why);
  }
  SUBCASE("the least over the cursors: a slot one lacks starts at 0, ended slots are dropped") {
    std::vector<std::vector<OffSlot>> shares{
      {OffSlot{5, ReadCursor::kSkipAll}, OffSlot{6, 8}},
      {OffSlot{5, ReadCursor::kSkipAll}, OffSlot{6, 4}, OffSlot{7, 2}}};
    auto slots = resumed_slots(shares);
    REQUIRE(slots.size() == 2);
    CHECK(slots[0].slot == 6);
    CHECK(slots[0].skip == 4);
    CHECK(slots[1].slot == 7);
    CHECK(slots[1].skip == 0);
    // Every slot ended: one task that produces nothing.
    const std::vector<OffSlot> ended{OffSlot{5, ReadCursor::kSkipAll}};
    slots = resumed_slots(std::vector<std::vector<OffSlot>>{ended});
    REQUIRE(slots.size() == 1);
    CHECK(slots[0].skip == ReadCursor::kSkipAll);
    // Saved before any task: a fresh read.
    CHECK(resumed_slots(std::vector<std::vector<OffSlot>>(2)).empty());
  }
  SUBCASE("released: the key is gone (trainers resuming later make a new job)") {
    DispatcherState s = live;
    REQUIRE(s.apply(ReleaseJobRecord{1, 5}).ok());
    CHECK(s.job(1)->resumed_from == -1);
    CHECK(s.job(1)->resume_shares.empty());
  }
  SUBCASE("only a coordinated OFF job has trainers' cursors") {
    DispatcherState s = apply_all({records[0]});
    CreateJobRecord plain = create;
    plain.num_consumers = -1;
    CHECK(s.apply(plain).code() == ErrorCode::invalid_argument);
    DispatcherState t = apply_all({records[0], records[1], records[2], records[3], records[4]});
    CHECK(t.apply(CoordinatedResumeRecord{1, 2, ahead, 3}).code() == ErrorCode::invalid_argument);
  }
}
