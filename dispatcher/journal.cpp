#include "dispatcher/journal.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <type_traits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatcher/journal_format.hpp"
#include "node/log.hpp"
#include "pipeline/io/tfrecord.hpp" // crc32c
#include "pipeline/runtime/thread_name.hpp"

namespace conveyor::actors {

namespace fs = std::filesystem;
using namespace journal_format;

namespace {

constexpr const char* kLog = "journal";

} // namespace

std::string Journal::segment_path(const std::string& dir, uint64_t generation) {
  return (fs::path(dir) / generation_name("journal", generation, ".log")).string();
}

std::string Journal::snapshot_path(const std::string& dir, uint64_t generation) {
  return (fs::path(dir) / generation_name("snapshot", generation, ".bin")).string();
}

// --- open and replay

Journal::Journal(JournalOptions options) : options_(std::move(options)) {}

namespace {

std::string utc_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm t{};
  ::gmtime_r(&now, &t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &t);
  return buf;
}

// Damage found at start-up, and what JournalOptions::recover needs to get past it.
struct Damage {
  bool found = false;
  bool recoverable = false;       // in the segment (or a missing one); never a bad snapshot
  std::vector<std::string> aside; // files to move aside
  bool rebuild = false;           // write segment `generation` again from `prefix`
  uint64_t generation = 0;
  uint64_t first_seq = 1; // the rebuilt segment's first record
  std::string prefix;     // the good frames before the damage
  int64_t records_kept = 0;
  int64_t dropped_bytes = 0; // bytes of the damaged file not in the rebuilt one
  int64_t intact_after = 0;  // frames with a good header after the damage (lost too)
};

// Everything start-up decided, before any file is changed.
struct Plan {
  DispatcherState state;
  uint64_t generation = 0;
  uint64_t next_seq = 1;
  bool create = false; // a fresh work dir: segment 0 is created
  int64_t valid = 0;   // bytes of segment `generation` to keep (a torn tail is cut)
  int64_t truncated = 0;
  int64_t records = 0;
  bool snapshot_loaded = false;
  std::vector<std::string> remove; // covered by the snapshot, or unfinished
};

std::string plural(int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Reads and checks a file header; `what` is "journal segment" or "snapshot". Sets `seq`.
Status check_header(const std::string& path, std::string_view d, const char (&magic)[8],
                    const std::string& what, uint64_t& seq) {
  auto short_file = [&] {
    return data_loss(path + " at byte 0: the " + what + " is " + plural(int64_t(d.size()), "byte") +
                     ", shorter than its " + std::to_string(kHeaderBytes) +
                     "-byte header (files are created whole, so this is damage, not a crash)");
  };
  if (d.size() < 12)
    return short_file();
  if (std::memcmp(d.data(), magic, 8) != 0)
    return data_loss(path + " at byte 0: not a conveyor " + what + " (bad magic)");
  uint32_t version = get_u32(d.data() + 8);
  if (version != kJournalFormatVersion)
    return data_loss(path + " at byte 8: " + what + " format version " + std::to_string(version) +
                     " (this build reads version " + std::to_string(kJournalFormatVersion) +
                     (version < kJournalFormatVersion
                        ? " only: the work dir was written by an older conveyor; run that version "
                          "on it, or start this one on an empty --work-dir)"
                        : ": written by a newer conveyor?)"));
  if (d.size() < kHeaderBytes)
    return short_file();
  if (masked(d.data(), 24) != get_u32(d.data() + 24))
    return data_loss(path + " at byte 24: the " + what +
                     " header's checksum does not match (corrupt header)");
  seq = get_u64(d.data() + 16);
  return Status::OK();
}

// Frames after `from` whose header checksum holds: records that damage at `from` hides.
int64_t intact_headers_after(std::string_view d, std::size_t from) {
  int64_t n = 0;
  for (std::size_t p = from + 1; p + kFrameBytes <= d.size(); ++p)
    if (masked(d.data() + p, 12) == get_u32(d.data() + p + 12))
      ++n;
  return n;
}

// Replays segment `path` into `state`; its first record must be `expect`, which ends as the
// number of the next record. `valid`: the bytes of good records (a torn tail after them is
// logged). Damage: data_loss naming file, offset and record; `damage` says how to get past it.
Status replay_segment(const std::string& path, uint64_t g, uint64_t& expect, DispatcherState& state,
                      int64_t& records, int64_t& valid, Damage& damage) {
  auto data = read_file(path);
  if (!data.ok())
    return data.status();
  std::string_view d = *data;
  const uint64_t first_expected = expect;
  int64_t in_file = 0;
  auto damaged = [&](std::size_t pos, const std::string& where, const std::string& why) {
    damage.found = damage.recoverable = damage.rebuild = true;
    damage.aside = {path};
    damage.generation = g;
    damage.first_seq = first_expected;
    if (pos > kHeaderBytes)
      damage.prefix.assign(d.substr(kHeaderBytes, pos - kHeaderBytes));
    damage.records_kept = in_file;
    damage.dropped_bytes =
      static_cast<int64_t>(d.size()) - (pos >= kHeaderBytes ? static_cast<int64_t>(pos) : 0);
    damage.intact_after = pos >= kHeaderBytes ? intact_headers_after(d, pos) : 0;
    return data_loss(path + " at byte " + std::to_string(pos) + where + ": " + why +
                     ". The dispatcher stops and changes no file; `--journal-recover` moves the "
                     "file aside and keeps the " +
                     plural(in_file, "record") + " before byte " +
                     std::to_string(pos >= kHeaderBytes ? pos : 0));
  };
  uint64_t first = 0;
  if (auto s = check_header(path, d, kSegmentMagic, "journal segment", first); !s.ok()) {
    (void)damaged(0, "", ""); // only records what recovery does: the whole file goes aside
    return data_loss(s.message() +
                     ". The dispatcher stops and changes no file; "
                     "`--journal-recover` moves the file aside and starts an empty segment");
  }
  if (first != expect)
    return damaged(16, "",
                   "the segment starts at record " + std::to_string(first) + " but " +
                     (expect == 1 ? std::string{"a journal starts at record 1"}
                                  : "the snapshot ends before record " + std::to_string(expect)));
  std::size_t pos = kHeaderBytes;
  while (pos < d.size()) {
    const std::size_t left = d.size() - pos;
    const std::string where = " (record " + std::to_string(expect) + ", number " +
                              std::to_string(in_file + 1) + " in this file)";
    auto torn = [&](const std::string& why) {
      log::warning(kLog, path + ": truncating an incomplete last record at byte " +
                           std::to_string(pos) + where + ": " + why + "; " +
                           plural(int64_t(left), "byte") +
                           " dropped (the dispatcher stopped in the middle of this append, which "
                           "was never acknowledged)");
    };
    if (left < kFrameBytes) {
      torn("only " + plural(int64_t(left), "byte") + " of its " + std::to_string(kFrameBytes) +
           "-byte header");
      break;
    }
    const char* f = d.data() + pos;
    const uint32_t len = get_u32(f);
    const uint64_t seq = get_u64(f + 4);
    if (masked(f, 12) != get_u32(f + 12))
      return damaged(pos, where,
                     all_zero(d.substr(pos))
                       ? "zeros instead of a record header up to the end of the file"
                       : "the record header's checksum does not match (corrupt length or "
                         "sequence number, or not a record)");
    if (seq != expect)
      return damaged(pos, where,
                     "sequence number " + std::to_string(seq) + " where " + std::to_string(expect) +
                       " was expected (a record is missing, repeated or misplaced)");
    if (len > kMaxRecordBytes)
      return damaged(pos, where, "a record length of " + std::to_string(len) + " bytes");
    if (kFrameBytes + len > left) {
      torn("its " + std::to_string(len) + "-byte payload has only " +
           std::to_string(left - kFrameBytes) + " before the end of the file");
      break;
    }
    auto payload = d.substr(pos + kFrameBytes, len);
    if (masked(payload.data(), payload.size()) != get_u32(f + 16))
      return damaged(pos, where,
                     "the record's payload checksum does not match (corrupt record; a complete "
                     "record with a bad checksum is damage, even the last one)");
    auto update = Journal::decode(payload);
    if (!update.ok())
      return damaged(pos, where, update.status().message());
    if (auto s = state.apply(*update); !s.ok())
      return damaged(pos, where, "the state refused the record: " + s.to_string());
    ++records;
    ++in_file;
    ++expect;
    pos += kFrameBytes + len;
  }
  valid = static_cast<int64_t>(pos);
  return Status::OK();
}

Status load_snapshot(const std::string& path, DispatcherState& state, uint64_t& next_seq) {
  auto data = read_file(path);
  if (!data.ok())
    return data.status();
  std::string_view d = *data;
  CONVEYOR_RETURN_IF_ERROR(check_header(path, d, kSnapshotMagic, "snapshot", next_seq));
  std::size_t pos = kHeaderBytes;
  if (d.size() - pos < kFrameBytes)
    return data_loss(path + " at byte " + std::to_string(pos) + ": the snapshot has no record");
  const char* f = d.data() + pos;
  uint32_t len = get_u32(f);
  if (masked(f, 12) != get_u32(f + 12) || get_u64(f + 4) != next_seq)
    return data_loss(path + " at byte " + std::to_string(pos) +
                     ": the snapshot record's header is corrupt");
  if (kFrameBytes + static_cast<std::size_t>(len) != d.size() - pos)
    return data_loss(path + " at byte " + std::to_string(pos) +
                     ": the snapshot's length field does not match the file");
  auto payload = d.substr(pos + kFrameBytes, len);
  if (masked(payload.data(), payload.size()) != get_u32(f + 16))
    return data_loss(path + " at byte " + std::to_string(pos) +
                     ": the snapshot's CRC32C does not match (corrupt snapshot)");
  auto snapshot = Journal::decode_snapshot(payload);
  if (!snapshot.ok())
    return data_loss(path + " at byte " + std::to_string(pos) + ": " + snapshot.status().message());
  if (auto s = state.restore(*snapshot); !s.ok())
    return data_loss(path + " at byte " + std::to_string(pos) + ": " + s.message());
  return Status::OK();
}

// Reads the work dir into `plan` without changing anything.
Status read_work_dir(const std::string& dir, Plan& plan, Damage& damage) {
  std::error_code ec;
  std::set<uint64_t> snapshots, segments;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    auto name = entry.path().filename().string();
    uint64_t g = 0;
    if (parse_generation(name, "snapshot", ".bin", g))
      snapshots.insert(g);
    else if (parse_generation(name, "journal", ".log", g))
      segments.insert(g);
    else if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
      plan.remove.push_back(entry.path().string()); // never renamed into place, never used
  }
  if (ec)
    return io_error("cannot list the work dir " + dir + ": " + ec.message());
  const uint64_t g = snapshots.empty() ? 0 : *snapshots.rbegin();
  plan.generation = g;
  if (!snapshots.empty()) {
    if (auto s = load_snapshot(Journal::snapshot_path(dir, g), plan.state, plan.next_seq);
        !s.ok()) {
      damage.found = true; // not recoverable: the snapshot is the base of everything after it
      return s;
    }
    plan.snapshot_loaded = true;
  }
  const std::string base =
    snapshots.empty() ? std::string{"no snapshot"} : Journal::snapshot_path(dir, g);
  for (auto s : segments) {
    auto path = Journal::segment_path(dir, s);
    if (s < g) {
      plan.remove.push_back(path); // covered by the snapshot
      continue;
    }
    if (s == g)
      continue;
    // compact() creates segment g+1 (empty) before it renames snapshot g+1 into place.
    uint64_t first = 0;
    auto d = read_file(path);
    if (s == g + 1 && d.ok() && d->size() == kHeaderBytes &&
        check_header(path, *d, kSegmentMagic, "journal segment", first).ok() &&
        first == plan.next_seq) {
      plan.remove.push_back(path); // an interrupted compaction, nothing was appended there
      continue;
    }
    damage.found = damage.recoverable = true;
    damage.aside.push_back(path);
    damage.dropped_bytes = d.ok() ? static_cast<int64_t>(d->size()) : 0;
    return data_loss(path + " at byte 0: a segment newer than the newest snapshot (" + base +
                     "): the snapshot it continues is missing. The dispatcher stops and changes "
                     "no file; `--journal-recover` moves the segment aside");
  }
  if (!segments.count(g)) {
    if (snapshots.empty() && segments.empty()) {
      plan.create = true; // a new work dir
      return Status::OK();
    }
    damage.found = damage.recoverable = damage.rebuild = true;
    damage.generation = g;
    damage.first_seq = plan.next_seq;
    return data_loss(Journal::segment_path(dir, g) + " at byte 0: the segment is missing, but " +
                     base + " says the journal continues there from record " +
                     std::to_string(plan.next_seq) +
                     ". The dispatcher stops; `--journal-recover` starts a new segment there");
  }
  auto path = Journal::segment_path(dir, g);
  CONVEYOR_RETURN_IF_ERROR(
    replay_segment(path, g, plan.next_seq, plan.state, plan.records, plan.valid, damage));
  auto size = static_cast<int64_t>(fs::file_size(path, ec));
  plan.truncated = ec ? 0 : size - plan.valid;
  return Status::OK();
}

// --journal-recover: moves the damaged files aside and writes the good prefix as the segment.
Status recover(const std::string& dir, const Damage& damage, const Status& why, bool sync,
               JournalReplay& r) {
  const auto stamp = utc_stamp();
  for (const auto& path : damage.aside) {
    std::string to = path + ".damaged-" + stamp;
    std::error_code ec;
    for (int i = 1; fs::exists(to, ec) && i < 1000; ++i)
      to = path + ".damaged-" + stamp + "-" + std::to_string(i);
    if (::rename(path.c_str(), to.c_str()) != 0)
      return io_error("moving the damaged " + path + " aside to " + to + ": " + errno_text());
    r.moved_aside = to;
  }
  if (damage.rebuild) {
    std::string file = header(kSegmentMagic, damage.first_seq) + damage.prefix;
    CONVEYOR_RETURN_IF_ERROR(
      write_whole_file(dir, Journal::segment_path(dir, damage.generation), file, sync));
  } else if (sync) {
    CONVEYOR_RETURN_IF_ERROR(sync_dir(dir));
  }
  r.recovered_dropped_bytes = damage.dropped_bytes;
  // The damage itself, without the advice to use the flag that is being used.
  const auto& m = why.message();
  const auto damage_only = m.substr(0, std::min(m.find(". The dispatcher stops"), m.size()));
  log::warning(kLog,
               "--journal-recover: " + damage_only + " -- " +
                 (r.moved_aside.empty() ? std::string{"nothing to move aside"}
                                        : "moved the file to " + r.moved_aside) +
                 "; kept " + plural(damage.records_kept, "record") +
                 " of that segment, "
                 "dropped " +
                 plural(damage.dropped_bytes, "byte") +
                 (damage.intact_after > 0
                    ? " (holding at least " + plural(damage.intact_after, "intact-looking record") +
                        " after the damage, kept in the moved file)"
                    : std::string{}));
  return Status::OK();
}

} // namespace

Expected<std::unique_ptr<Journal>> Journal::open(JournalOptions options, DispatcherState& state,
                                                 JournalReplay* replay) {
  auto started = std::chrono::steady_clock::now();
  if (options.dir.empty())
    return invalid_argument("the journal needs a directory");
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec)
    return io_error("cannot create the work dir " + options.dir + ": " + ec.message());

  std::unique_ptr<Journal> j{new Journal(std::move(options))};
  const auto& dir = j->options_.dir;
  JournalReplay r;
  auto plan = std::make_unique<Plan>();
  Damage damage;
  if (auto s = read_work_dir(dir, *plan, damage); !s.ok()) {
    if (!j->options_.recover || !damage.found)
      return s;
    if (!damage.recoverable)
      return s.with_context("--journal-recover cannot repair a snapshot");
    CONVEYOR_RETURN_IF_ERROR(recover(dir, damage, s, j->options_.sync, r));
    plan = std::make_unique<Plan>();
    Damage again;
    CONVEYOR_RETURN_IF_ERROR(read_work_dir(dir, *plan, again));
  }
  for (const auto& path : plan->remove)
    fs::remove(path, ec);
  j->generation_ = plan->generation;
  j->next_record_ = plan->next_seq;
  CONVEYOR_RETURN_IF_ERROR(
    j->open_segment(plan->generation, plan->next_seq, plan->create ? -1 : plan->valid));
  j->segment_records_ = 0;
  state = std::move(plan->state);
  r.snapshot_loaded = plan->snapshot_loaded;
  r.records = plan->records;
  r.truncated_bytes = plan->truncated;
  r.generation = plan->generation;
  r.next_record = plan->next_seq;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (replay)
    *replay = r;
  j->writer_ = std::thread([p = j.get()] { p->writer_loop(); });
  return j;
}

Status Journal::open_segment(uint64_t g, uint64_t first_seq, int64_t valid_bytes,
                             std::string_view records) {
  auto path = segment_path(options_.dir, g);
  if (valid_bytes < 0) {
    std::string file = header(kSegmentMagic, first_seq);
    file.append(records);
    CONVEYOR_RETURN_IF_ERROR(write_whole_file(options_.dir, path, file, options_.sync));
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return io_error("cannot open " + path + ": " + errno_text());
  auto fail = [&](Status s) {
    ::close(fd);
    return s;
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return fail(io_error("examining " + path + ": " + errno_text()));
  if (valid_bytes >= 0 && st.st_size > valid_bytes) { // cut the torn tail
    if (::ftruncate(fd, valid_bytes) != 0)
      return fail(io_error("truncating " + path + ": " + errno_text()));
    if (options_.sync && ::fsync(fd) != 0)
      return fail(io_error("syncing " + path + ": " + errno_text()));
  }
  if (::lseek(fd, 0, SEEK_END) < 0)
    return fail(io_error("seeking in " + path + ": " + errno_text()));
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
  return Status::OK();
}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    stop_ = true;
  }
  wake_writer_.notify_all();
  if (writer_.joinable())
    writer_.join();
  if (fd_ >= 0)
    ::close(fd_);
}

// --- appending (group fsync)

// --- appending (group fsync)

uint64_t Journal::append(const msg::Update& update, Done on_durable) {
  auto payload = encode(update);
  std::unique_lock<std::mutex> lock{mu_};
  auto seq = ++appended_;
  if (!failed_.ok()) {
    Status s = failed_;
    lock.unlock();
    if (on_durable)
      on_durable(s);
    return seq;
  }
  append_frame(pending_, next_record_++, payload);
  pending_done_.push_back(std::move(on_durable));
  ++segment_records_;
  lock.unlock();
  wake_writer_.notify_one();
  return seq;
}

void Journal::writer_loop() {
  name_this_thread("conveyor-jrnl");
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    wake_writer_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (pending_.empty() && stop_)
      return;
    std::string group;
    group.swap(pending_);
    std::vector<Done> done;
    done.swap(pending_done_);
    writing_ = true;
    Status s = failed_;
    int fd = fd_;
    auto path = segment_path(options_.dir, generation_);
    lock.unlock();
    if (s.ok())
      s = write_all(fd, group.data(), group.size(), path);
    if (s.ok() && options_.sync && ::fdatasync(fd) != 0)
      s = io_error("syncing " + path + ": " + errno_text());
    if (!s.ok())
      log::error(kLog, "the journal failed: " + s.to_string() +
                         " (changes are no longer durable; the dispatcher refuses them)");
    for (auto& d : done)
      if (d)
        d(s);
    lock.lock();
    if (!s.ok() && failed_.ok())
      failed_ = s;
    durable_ += done.size();
    ++groups_;
    writing_ = false;
    synced_cv_.notify_all();
  }
}

Status Journal::flush() {
  std::unique_lock<std::mutex> lock{mu_};
  // Records that failed at append() never reach the writer; count what was queued.
  synced_cv_.wait(lock, [this] { return pending_.empty() && !writing_; });
  return failed_;
}

uint64_t Journal::groups_synced() const {
  std::lock_guard<std::mutex> guard{mu_};
  return groups_;
}

// --- compaction

Status Journal::compact(const DispatcherState& state) {
  CONVEYOR_RETURN_IF_ERROR(flush());
  const uint64_t next = generation_ + 1;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> guard{mu_};
    seq = next_record_; // the appending thread is here: nothing is queued after the flush
  }
  const auto final_path = snapshot_path(options_.dir, next);
  const auto tmp_path = final_path + ".tmp";
  const auto next_segment = segment_path(options_.dir, next);
  std::string file = header(kSnapshotMagic, seq);
  append_frame(file, seq, encode_snapshot(state.snapshot()));
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("cannot create " + tmp_path + ": " + errno_text());
  Status s = write_all(fd, file.data(), file.size(), tmp_path);
  if (s.ok() && ::fsync(fd) != 0)
    s = io_error("syncing " + tmp_path + ": " + errno_text());
  ::close(fd);
  // The next segment exists before its snapshot does: a snapshot without its segment is damage.
  if (s.ok())
    s = write_whole_file(options_.dir, next_segment, header(kSegmentMagic, seq), options_.sync);
  if (s.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0)
    s = io_error("renaming " + tmp_path + " to " + final_path + ": " + errno_text());
  if (s.ok())
    s = sync_dir(options_.dir);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove(tmp_path, ec);
    if (!fs::exists(final_path, ec))
      fs::remove(next_segment, ec);
    return s;
  }
  // The snapshot covers everything so far: continue in the new segment. The writer is idle
  // (flushed) and only the appending thread, which is here, queues work.
  {
    std::lock_guard<std::mutex> guard{mu_};
    uint64_t old = generation_;
    CONVEYOR_RETURN_IF_ERROR(open_segment(next, seq, static_cast<int64_t>(kHeaderBytes)));
    generation_ = next;
    segment_records_ = 0;
    std::error_code ec;
    fs::remove(segment_path(options_.dir, old), ec);
    fs::remove(snapshot_path(options_.dir, old), ec);
  }
  log::info(kLog, "compacted the journal into " + final_path);
  return Status::OK();
}

} // namespace conveyor::actors
