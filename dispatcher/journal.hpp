// The dispatcher's journal (tf.data service's work_dir journal): every state change is a
// msg::Update record (messages/journal_records.hpp) appended here and made durable BEFORE it
// takes effect; a restarted dispatcher replays the newest snapshot and then the journal through
// DispatcherState::apply. No CAF here.
//
// Files in the work dir (G = a generation number, 20 decimal digits):
//   snapshot-G.bin   the whole DispatcherState as of the start of generation G
//   journal-G.log    the records appended since that snapshot (one segment per generation)
// All integers little-endian; crc(x) = masked CRC32C of x. Both files start with a 32-byte header:
//   magic[8] ("CVJOURN1" / "CVSNAPS1") | uint32 version (kJournalFormatVersion) | uint32 0 |
//   uint64 seq | uint32 crc(the 24 bytes before) | uint32 0
// seq is the sequence number of the segment's first record / of the record after the snapshot.
// Records are numbered 1, 2, ... over the journal's whole life. Then frames:
//   uint32 length | uint64 seq | uint32 crc(length + seq) | uint32 crc(payload) | payload[length]
// A segment holds exactly the records seq, seq+1, ...; a snapshot holds one frame.
// A record's payload is uint8 tag (the Update alternative's index) + its fields, each encoded
// through the record's inspect() (fixed-width integers, length-prefixed strings and lists).
//
// Durability (group fsync): append() encodes the record and queues it; a writer thread writes
// every queued record with one write, fdatasync()s once for the whole group, then calls each
// record's callback in append order. A callback therefore runs only after its record (and all
// records before it) are on disk. Appends made while a group is being synced form the next group.
//
// Files appear whole: a segment is written with its header to a .tmp file, synced and renamed, so
// a segment under its real name always has a complete header. compact() writes the snapshot to a
// .tmp file, creates the next (empty) segment, then renames the snapshot into place and deletes
// older files; a crash between leaves an empty segment G+1 beside snapshot G, which open() removes.
//
// Start-up rule (a journal never lies): the newest snapshot G (if any) and exactly segment G are
// read; every record must carry a good header checksum and the next sequence number. The only
// damage tolerated is a torn tail: an incomplete LAST record, i.e. fewer than 20 bytes after the
// last good record, or a record whose header is intact (checksum and sequence number good) and
// whose payload runs past the end of the file. That is what a crash inside the one unacknowledged
// write leaves; it is truncated with a warning naming the file, offset and record. Anything else
// (a bad header or payload checksum, even in a complete last record; zeros or garbage after the
// records; a wrong sequence number; a segment shorter than its header or with the wrong first
// record; a missing segment or snapshot) is damage: open() fails with data_loss naming the file,
// byte offset and record number, and changes no file. With JournalOptions::recover it moves the
// damaged segment aside (journal-G.log.damaged-<UTC time>), keeps the longest valid prefix in a
// new journal-G.log and logs how many bytes (and intact-looking records) were dropped. Cutting a
// segment exactly at a record boundary cannot be told from records never written: no checksum
// can see it. Version 6 work dirs (no sequence numbers) are refused with a clear error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dispatcher/dispatcher_state.hpp"
#include "messages/journal_records.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// 2: job lifecycle (split_size, repetitions); 3: splits held at a crash; 4: cross-trainer cache flag;
// 5: the cache's sharing mode (window or whole epoch) instead of the flag; 6: (unchanged records);
// 7: sequence numbers in every frame and file header, header checksums, segments created whole;
// 8: named jobs keyed by iteration (CreateNamedJobRecord) and kept after their end until job GC
// (ForgetJobRecord); 9: a job's tenant and weight (CreateJobRecord, JobEntry); 10: distributed
// snapshots (CreateSnapshotRecord ... FinishSnapshotRecord, StateSnapshot.snapshots); 11: who
// writes each snapshot stream (SnapshotStreamWriterRecord, SnapshotStreamEntry.writer); 12: DYNAMIC
// over several splittable sources (the source of SplitPositionRecord, JournalSplit and
// JournalSplitKey; JobEntry.source_positions); 13: a DYNAMIC job's file order seed
// (CreateJobRecord.file_seed, JobEntry.file_seed); 14: deterministic reads' window and
// finished-split log (CreateJobRecord.deterministic_window, SplitPositionRecord.finished_first/
// finished_known, JobEntry.deterministic_window/finished_log/finished_log_next); 15: a resumed
// OFF read's slots (CreateJobRecord.off_slots, JobEntry.off_slots/off_slots_taken,
// TaskEntry.off_slot/off_skip); 16: a resumed coordinated read's key and its trainers' cursors
// (CreateJobRecord.resumed_from, CoordinatedResumeRecord, JobEntry.resumed_from/resume_shares).
// Older work dirs are refused with the version they have (the records' layout changed in 11, 12,
// 13, 14, 15 and 16).
inline constexpr uint32_t kJournalFormatVersion = 16;

struct JournalOptions {
  std::string dir;
  // fdatasync every group (turn off only in tests of the format).
  bool sync = true;
  // Records in the current segment after which should_compact() says so.
  int64_t compact_after_records = 100000;
  // Damage in the segment: move it aside and start from its longest valid prefix (logged),
  // instead of refusing to start. A damaged snapshot is never "recovered".
  bool recover = false;
};

// What open() found.
struct JournalReplay {
  bool snapshot_loaded = false;
  uint64_t generation = 0;
  int64_t records = 0;         // journal records replayed (after the snapshot)
  int64_t truncated_bytes = 0; // torn tail cut off the last segment
  uint64_t next_record = 1;    // sequence number the next appended record gets
  // With JournalOptions::recover, when damage was found: where the damaged segment went and
  // how many of its bytes are not in the new one.
  std::string moved_aside;
  int64_t recovered_dropped_bytes = 0;
  double seconds = 0; // time spent reading and applying
};

// What the dispatcher actor needs of a journal: the file journal below, or the simulator's disk
// (sim/sim_journal.hpp), which loses unsynced records when its dispatcher crashes.
class JournalWriter {
public:
  using Done = std::function<void(const Status&)>;
  virtual ~JournalWriter() = default;
  // Queues `update`; `on_durable` runs once it is on disk (OK) or the journal failed (error).
  // Returns the record's sequence number (1, 2, ...).
  virtual uint64_t append(const msg::Update& update, Done on_durable) = 0;
  virtual bool should_compact() const = 0;
  // Snapshot of `state` (which includes every appended record), then a fresh log.
  virtual Status compact(const DispatcherState& state) = 0;
  // Where it lives, for messages.
  virtual const std::string& dir() const = 0;
};

class Journal final : public JournalWriter {
public:
  // Opens (creating) the work dir, restores `state` from the newest snapshot and replays the
  // segments after it. Errors: io_error (cannot create/read/write the dir), data_loss (a bad
  // record or snapshot: "<file> at byte <offset>: ..."), or a record the state refused.
  static Expected<std::unique_ptr<Journal>> open(JournalOptions options, DispatcherState& state,
                                                 JournalReplay* replay = nullptr);
  ~Journal() override; // writes and syncs what is queued, then stops the writer thread
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Queues `update`; `on_durable` runs (on the writer thread) once its group is on disk, with
  // OK, or with the io_error that made the journal fail (then every later append fails too).
  // Returns the record's sequence number (1, 2, ... per process).
  uint64_t append(const msg::Update& update, Done on_durable) override;
  // Blocks until everything appended so far is durable; the journal's error if it failed.
  Status flush();
  // Snapshot of `state` (which must include every appended record: call it from the thread
  // that appends and applies), then a new segment; older files are deleted.
  Status compact(const DispatcherState& state) override;
  bool should_compact() const override {
    return segment_records_ >= options_.compact_after_records;
  }

  const std::string& dir() const override { return options_.dir; }
  uint64_t generation() const { return generation_; }
  // Groups synced so far (to check that appends are grouped).
  uint64_t groups_synced() const;

  // The record codec (tests, tools).
  static std::string encode(const msg::Update& update);
  static Expected<msg::Update> decode(std::string_view payload);
  static std::string encode_snapshot(const StateSnapshot& snapshot);
  static Expected<StateSnapshot> decode_snapshot(std::string_view payload);
  // Paths of a generation's files.
  static std::string segment_path(const std::string& dir, uint64_t generation);
  static std::string snapshot_path(const std::string& dir, uint64_t generation);

private:
  explicit Journal(JournalOptions options);
  void writer_loop();
  // Makes `fd_` generation `g`'s segment: created whole (header with `first_seq` + `records`),
  // or (valid_bytes >= 0) the existing one cut to valid_bytes.
  Status open_segment(uint64_t g, uint64_t first_seq, int64_t valid_bytes,
                      std::string_view records = {});

  JournalOptions options_;
  uint64_t generation_ = 0;
  int64_t segment_records_ = 0; // touched by the appending thread only
  int fd_ = -1;                 // current segment; writer thread (and compact under flush)

  mutable std::mutex mu_;
  std::condition_variable wake_writer_;
  std::condition_variable synced_cv_;
  std::string pending_;
  std::vector<Done> pending_done_;
  uint64_t appended_ = 0;
  uint64_t next_record_ = 1; // the journal's sequence number for the next record
  uint64_t durable_ = 0;
  uint64_t groups_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  Status failed_;
  std::thread writer_;
};

} // namespace conveyor::actors
