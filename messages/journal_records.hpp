// The dispatcher's state changes as explicit update records (after TF's dispatcher_state.h /
// journal.proto). The dispatcher decides every id and time BEFORE it makes a record, so applying
// records (dispatcher/dispatcher_state.hpp) is a pure function and the journal (dispatcher/journal.hpp)
// replays them exactly. No CAF here; each record has a field-by-field inspect for serializers.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "messages/protocol.hpp"

namespace conveyor::msg {

struct RegisterDatasetRecord {
  dataset_id_t dataset;
  std::string fingerprint;
  std::string definition;  // to_binary form
  uint8_t compression = 0; // conveyor::Compression
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegisterDatasetRecord& x) {
  return f(x.dataset, x.fingerprint, x.definition, x.compression, x.time_us);
}

struct RegisterWorkerRecord {
  worker_id_t worker = 0;
  std::string address;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegisterWorkerRecord& x) {
  return f(x.worker, x.address, x.time_us);
}

// Also removes the worker's tasks (each job loses the task on that worker).
struct RemoveWorkerRecord {
  worker_id_t worker = 0;
  std::string reason;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoveWorkerRecord& x) {
  return f(x.worker, x.reason, x.time_us);
}

// A resumed OFF read's slot (pipeline/sharding/read_cursor.hpp): the read-cursor slot a task
// serves and how many of its elements it skips, those the cursor's reader consumed
// (ReadCursor::kSkipAll: the slot's task had ended; it produces nothing).
struct OffSlot {
  int64_t slot = 0;
  int64_t skip = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, OffSlot& x) {
  return f(x.slot, x.skip);
}

struct CreateJobRecord {
  job_id_t job = 0;
  dataset_id_t dataset;
  std::string job_name;       // empty = private job
  uint8_t policy = 0;         // conveyor::ShardingPolicy
  int64_t num_consumers = -1; // -1 = not coordinated
  std::string target_workers;
  int64_t time_us = 0;
  int64_t split_size = 0; // DYNAMIC: elements per range split, decided at creation (0 = default)
  uint8_t cross_trainer_cache = 0; // msg::CacheSharing: its tasks serve trainers from a cache
  int64_t expected_consumers = 1;  // consumers that share each repetition of a named job
  std::string tenant = "default";  // its share of the workers' threads (get_or_create_job)
  int64_t tenant_weight = 1;
  int64_t file_seed = -1; // DYNAMIC: list_files(shuffle=True) without a seed orders by it
  // Deterministic reads (get_or_create_job.deterministic_window; journal format 14): the window
  // a restored job keeps handing out splits within. 0 = not deterministic.
  int64_t deterministic_window = 0;
  // An OFF read resumed from a read cursor (journal format 15): its slots, in the order its tasks
  // take them (each CreateTaskRecord of the job the next one); empty = not resumed.
  std::vector<OffSlot> off_slots = {};
  // A coordinated read resumed from read cursors (journal format 16): the job the cursors were
  // saved in, by which its N trainers meet in this job (-1: not one). Its slots come with the
  // trainers' cursors (CoordinatedResumeRecord), not here.
  int64_t resumed_from = -1;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CreateJobRecord& x) {
  return f(x.job, x.dataset, x.job_name, x.policy, x.num_consumers, x.target_workers, x.time_us,
           x.split_size, x.cross_trainer_cache, x.expected_consumers, x.tenant, x.tenant_weight,
           x.file_seed, x.deterministic_window, x.off_slots, x.resumed_from);
}

// A trainer of a resumed coordinated read (CreateJobRecord.resumed_from) brought its cursor:
// per slot, the elements its rounds cover (rounds x N; ReadCursor::kSkipAll: the slot ended).
// Once all N indices brought theirs, the job's slots are the least of them (journal format 16).
struct CoordinatedResumeRecord {
  job_id_t job = 0;
  int64_t consumer_index = 0;
  std::vector<OffSlot> shares;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CoordinatedResumeRecord& x) {
  return f(x.job, x.consumer_index, x.shares, x.time_us);
}

struct CreateTaskRecord {
  task_id_t task = 0;
  job_id_t job = 0;
  worker_id_t worker = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CreateTaskRecord& x) {
  return f(x.task, x.job, x.worker, x.time_us);
}

struct FinishTaskRecord {
  task_id_t task = 0;
  std::string error; // empty = ended normally
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishTaskRecord& x) {
  return f(x.task, x.error, x.time_us);
}

struct FinishJobRecord {
  job_id_t job = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishJobRecord& x) {
  return f(x.job, x.time_us);
}

// The job had no consumers for job_gc_timeout; it counts as finished from now on.
struct ReleaseJobRecord {
  job_id_t job = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReleaseJobRecord& x) {
  return f(x.job, x.time_us);
}

// A split as the journal keeps it (pipeline/sharding/split_provider.hpp Split, without CAF annotations).
struct JournalSplit {
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t begin = 0;
  int64_t end = 0;
  std::string file;
  int64_t source = 0; // the splittable source (Split::source; journal format 12)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JournalSplit& x) {
  return f(x.epoch, x.index, x.begin, x.end, x.file, x.source);
}
struct JournalSplitKey {
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t source = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JournalSplitKey& x) {
  return f(x.epoch, x.index, x.source);
}

// DYNAMIC: where a job's split hand-out stands (journal hook for the job actor). `epoch` is the
// job's (SplitAssigner's) epoch; provider_epoch/next_index the split provider's position
// (pipeline/sharding/split_provider.hpp SplitPosition); handed_out counts splits handed out so far. The
// job actor sends it to the dispatcher (msg::persist_splits) and hands the split out only once
// the dispatcher answered, i.e. once the record is durable. A restarted dispatcher restores the
// job's split provider to the last recorded position.
// `handed`: the splits this answer hands out (new or re-issued); `finished`: splits whose every
// element a consumer acknowledged since the last record. Handed and not finished = held by a
// task when the dispatcher went down: a restarted dispatcher hands those out again (the
// consumer drops what it already has of them), so a DYNAMIC epoch survives a dispatcher crash.
// A dataset with several splittable sources has one provider per source: `source` names the one
// whose position epoch/provider_epoch/next_index are (an answer hands out splits of one source);
// handed_out counts all sources (journal format 12).
// Deterministic jobs (journal format 14): `finished` are also entries of the job's finished-split
// log (JobCore::finished_since), which its consumer reads to learn that a split is over:
// finished_first numbers the first of them in that log (-1: not a deterministic job's), and the
// consumer had every entry before finished_known, so a restored job keeps only the entries from
// there on (its consumer reads the restored log from its start).
struct SplitPositionRecord {
  job_id_t job = 0;
  int64_t epoch = 0;
  int64_t provider_epoch = 0;
  int64_t next_index = 0;
  int64_t handed_out = 0;
  int64_t time_us = 0;
  std::vector<JournalSplit> handed;
  std::vector<JournalSplitKey> finished;
  int64_t source = 0;
  int64_t finished_first = -1;
  int64_t finished_known = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SplitPositionRecord& x) {
  return f(x.job, x.epoch, x.provider_epoch, x.next_index, x.handed_out, x.time_us, x.handed,
           x.finished, x.source, x.finished_first, x.finished_known);
}

// A named job's iteration (tf.data keys a named job by job name and the consumer's iteration
// index): the job `job` reads iteration `iteration` of its name (journal format 7; a plain
// CreateJobRecord of a name, as older journals hold, takes the name's next repetition number).
struct CreateNamedJobRecord {
  CreateJobRecord job;
  int64_t iteration = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CreateNamedJobRecord& x) {
  return f(x.job, x.iteration);
}

// A released named job's iteration is forgotten (job GC): the name's iteration may be created
// again. Until then a consumer asking for that iteration gets end of sequence (format 7).
struct ForgetJobRecord {
  job_id_t job = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForgetJobRecord& x) {
  return f(x.job, x.time_us);
}

// Distributed snapshots (journal format 10; messages/snapshot_stream.hpp). A snapshot is keyed
// by its directory. Its streams are created as workers take them; each stream reads its own
// sequence of splits from the snapshot's one split provider, journaled before a worker sees
// them, so that whoever writes the stream again reads the same splits.
struct CreateSnapshotRecord {
  std::string path;
  dataset_id_t dataset;
  uint8_t compression = 0; // conveyor::Compression of the chunks
  int64_t chunk_bytes = 0;
  int64_t split_size = 0; // elements per range split
  bool per_split = false; // dispatcher/job_core.hpp is_per_split
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CreateSnapshotRecord& x) {
  return f(x.path, x.dataset, x.compression, x.chunk_bytes, x.split_size, x.per_split, x.time_us);
}

// Stream `stream` (the next number) of the snapshot exists.
struct AddSnapshotStreamRecord {
  std::string path;
  int64_t stream = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AddSnapshotStreamRecord& x) {
  return f(x.path, x.stream, x.time_us);
}

// Splits handed to a stream: its sequence numbers first_seq, first_seq + 1, ...; `end`: the
// provider ran out, the stream gets no split after these. provider_epoch/next_index: the
// provider's position after them (a restart restores it).
struct SnapshotSplitsRecord {
  std::string path;
  int64_t stream = 0;
  int64_t first_seq = 0;
  std::vector<JournalSplit> splits;
  bool end = false;
  int64_t provider_epoch = 0;
  int64_t next_index = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SnapshotSplitsRecord& x) {
  return f(x.path, x.stream, x.first_seq, x.splits, x.end, x.provider_epoch, x.next_index,
           x.time_us);
}

// The stream's every split is in committed chunks (its worker said so).
struct SnapshotStreamDoneRecord {
  std::string path;
  int64_t stream = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SnapshotStreamDoneRecord& x) {
  return f(x.path, x.stream, x.time_us);
}

// The snapshot ended: DONE is on disk (error empty) or it failed with `error` (ERROR on disk).
struct FinishSnapshotRecord {
  std::string path;
  std::string error;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishSnapshotRecord& x) {
  return f(x.path, x.error, x.time_us);
}

// Worker `worker` writes stream `stream` (handed to it, taken over, or adopted from its report),
// so that a restarted dispatcher gives the stream back to it when it registers again instead of
// to whichever worker asks first.
struct SnapshotStreamWriterRecord {
  std::string path;
  int64_t stream = 0;
  worker_id_t worker = 0;
  int64_t time_us = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SnapshotStreamWriterRecord& x) {
  return f(x.path, x.stream, x.worker, x.time_us);
}

// The variant's alternative index is the record's tag in the journal (dispatcher/journal.hpp):
// append new record types at the END only, never reorder (old journals must stay readable).
using Update =
  std::variant<RegisterDatasetRecord, RegisterWorkerRecord, RemoveWorkerRecord, CreateJobRecord,
               CreateTaskRecord, FinishTaskRecord, FinishJobRecord, ReleaseJobRecord,
               SplitPositionRecord, CreateNamedJobRecord, ForgetJobRecord, CreateSnapshotRecord,
               AddSnapshotStreamRecord, SnapshotSplitsRecord, SnapshotStreamDoneRecord,
               FinishSnapshotRecord, SnapshotStreamWriterRecord, CoordinatedResumeRecord>;

} // namespace conveyor::msg
