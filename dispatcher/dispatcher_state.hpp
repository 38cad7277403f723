// The dispatcher's cluster state: datasets, workers, jobs and tasks. Pure: it changes only
// through apply(update record) (messages/journal_records.hpp) and knows nothing of actors,
// clocks or networks — the dispatcher actor validates a request, decides ids and time, makes
// the record, has the journal (dispatcher/journal.hpp) make it durable, applies it, then acts on it;
// a restarted dispatcher replays the snapshot and the journal through the same apply().
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "messages/journal_records.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

struct DatasetEntry {
  msg::dataset_id_t id;
  std::string fingerprint;
  std::string definition;
  Compression compression = Compression::automatic;
};

struct WorkerEntry {
  msg::worker_id_t id = 0;
  std::string address;
  int64_t registered_us = 0;
};

// Where the split provider of one splittable source of a DYNAMIC job stands (msg::SplitPositionRecord).
struct SourceSplitPosition {
  int64_t source = 0;
  int64_t epoch = 0; // the job's epoch of that source
  int64_t provider_epoch = 0;
  int64_t next_index = 0;
  friend bool operator==(const SourceSplitPosition& a, const SourceSplitPosition& b) {
    return a.source == b.source && a.epoch == b.epoch && a.provider_epoch == b.provider_epoch &&
           a.next_index == b.next_index;
  }
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SourceSplitPosition& x) {
  return f(x.source, x.epoch, x.provider_epoch, x.next_index);
}

// One trainer's cursor as a resumed coordinated job keeps it (msg::CoordinatedResumeRecord).
struct ResumeShare {
  int64_t consumer_index = 0;
  std::vector<msg::OffSlot> slots;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ResumeShare& x) {
  return f(x.consumer_index, x.slots);
}

struct JobEntry {
  msg::job_id_t id = 0;
  msg::dataset_id_t dataset;
  std::string name; // empty = private
  ShardingPolicy policy = ShardingPolicy::off;
  int64_t num_consumers = -1;
  std::string target_workers;
  int64_t created_us = 0;
  // Named jobs: the iteration of the name this job reads (tf.data's key is the job name and the
  // consumer's iteration index). A released named job stays (released, no tasks) until job GC
  // forgets it (ForgetJobRecord), so a consumer asking for its iteration later gets end of
  // sequence instead of the data again.
  int64_t repetition = 0;
  int64_t split_size = 0; // DYNAMIC: elements per range split (0 = the dispatcher's default)
  // DYNAMIC: the seed of list_files(shuffle=True) sources given none, drawn when the job is made
  // (a resumed one takes its cursor's), so a restored or resumed job lists the files in the
  // same order and its split indices name the same files. -1: none drawn (OFF jobs).
  int64_t file_seed = -1;
  msg::CacheSharing cross_trainer_cache = msg::CacheSharing::none;
  int64_t expected_consumers = 1; // named jobs: consumers that share each repetition
  std::string tenant = "default"; // its share of the workers' executor threads, and its weight
  int64_t tenant_weight = 1;
  bool finished = false;
  bool released = false;
  std::set<msg::task_id_t> tasks; // the job's live tasks (removed and released ones are erased)
  // DYNAMIC: the last journaled split hand-out position (msg::SplitPositionRecord).
  bool has_split_position = false;
  int64_t split_epoch = 0;
  int64_t split_provider_epoch = 0;
  int64_t split_next_index = 0;
  int64_t splits_handed_out = 0;
  // DYNAMIC: splits handed out and not finished (journaled), ordered by (source, epoch, index).
  // After a restart these are handed out again: the tasks that held them went down with the
  // dispatcher.
  std::vector<msg::JournalSplit> outstanding_splits;
  // DYNAMIC over several splittable sources: the positions of sources 1.. (split_epoch,
  // split_provider_epoch and split_next_index above are source 0's), ordered by source.
  std::vector<SourceSplitPosition> source_positions;
  // Deterministic reads (0 = not): the job's window, and its finished-split log from the first
  // entry its consumer may not have had (msg::SplitPositionRecord::finished_known) up to the
  // entry before finished_log_next. A restored job serves this log again, so that its consumer
  // learns of every split that finished before the restart.
  int64_t deterministic_window = 0;
  std::vector<msg::JournalSplitKey> finished_log;
  int64_t finished_log_next = 0;
  // An OFF read resumed from a read cursor (msg::CreateJobRecord::off_slots): its slots in the
  // order tasks take them, and how many were taken (removed tasks' too: a lost OFF task's slot is
  // not served again). A worker beyond them gets no task of the job.
  std::vector<msg::OffSlot> off_slots;
  int64_t off_slots_taken = 0;
  bool all_off_slots_taken() const {
    return !off_slots.empty() && off_slots_taken >= static_cast<int64_t>(off_slots.size());
  }
  // A coordinated read resumed from read cursors (msg::CreateJobRecord::resumed_from, -1: not
  // one): the job they were saved in, and each consumer index's shares as its trainer brought
  // them (msg::CoordinatedResumeRecord). Its slots (off_slots) are the least over all N, so it
  // gets no task before every index brought its cursor.
  int64_t resumed_from = -1;
  std::vector<ResumeShare> resume_shares; // by consumer index

  bool awaiting_cursors() const {
    return resumed_from >= 0 && static_cast<int64_t>(resume_shares.size()) < num_consumers;
  }
};

struct TaskEntry {
  msg::task_id_t id = 0;
  msg::job_id_t job = 0;
  msg::worker_id_t worker = 0;
  bool finished = false;
  bool removed = false; // unused: removed tasks are erased
  std::string error;
  // A resumed OFF read's task: the slot it serves and the elements it skips (-1: none).
  int64_t off_slot = -1;
  int64_t off_skip = 0;
};

// A distributed snapshot (msg::CreateSnapshotRecord ...): its streams and their splits.
struct SnapshotStreamEntry {
  std::vector<msg::JournalSplit> splits; // handed to the stream, by sequence number
  bool ended = false;                    // no split after these
  bool done = false;                     // all of its splits are in committed chunks
  msg::worker_id_t writer = 0;           // the worker writing it, as last journaled (0: none yet)
};
struct SnapshotEntry {
  std::string path;
  msg::dataset_id_t dataset;
  uint8_t compression = 0;
  int64_t chunk_bytes = 0;
  int64_t split_size = 0;
  bool per_split = false;
  int64_t created_us = 0;
  std::vector<SnapshotStreamEntry> streams;
  // The split provider's position after the last split handed out; exhausted: it ran out.
  int64_t provider_epoch = 0;
  int64_t next_index = 0;
  bool exhausted = false;
  bool finished = false;
  std::string error; // finished: empty = DONE
};

struct RepetitionEntry {
  msg::dataset_id_t dataset;
  std::string name;
  int64_t count = 0;
};

// The whole state as plain data: what a journal snapshot stores (dispatcher/journal.hpp).
struct StateSnapshot {
  std::vector<DatasetEntry> datasets;
  std::vector<WorkerEntry> workers;
  std::vector<JobEntry> jobs;
  std::vector<TaskEntry> tasks;
  uint64_t next_dataset_number = 1000;
  msg::worker_id_t next_worker_id = 1;
  msg::job_id_t next_job_id = 1;
  msg::task_id_t next_task_id = 1;
  // Named jobs: how many repetitions of (dataset, name) were created (the next one's number).
  std::vector<RepetitionEntry> repetitions;
  std::vector<SnapshotEntry> snapshots; // distributed snapshots, finished ones too
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DatasetEntry& x) {
  return f(x.id, x.fingerprint, x.definition, x.compression);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerEntry& x) {
  return f(x.id, x.address, x.registered_us);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JobEntry& x) {
  return f(x.id, x.dataset, x.name, x.policy, x.num_consumers, x.target_workers, x.created_us,
           x.repetition, x.split_size, x.cross_trainer_cache, x.expected_consumers, x.tenant,
           x.tenant_weight, x.file_seed, x.finished, x.released, x.tasks, x.has_split_position,
           x.split_epoch, x.split_provider_epoch, x.split_next_index, x.splits_handed_out,
           x.outstanding_splits, x.source_positions, x.deterministic_window, x.finished_log,
           x.finished_log_next, x.off_slots, x.off_slots_taken, x.resumed_from, x.resume_shares);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TaskEntry& x) {
  return f(x.id, x.job, x.worker, x.finished, x.removed, x.error, x.off_slot, x.off_skip);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RepetitionEntry& x) {
  return f(x.dataset, x.name, x.count);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SnapshotStreamEntry& x) {
  return f(x.splits, x.ended, x.done, x.writer);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SnapshotEntry& x) {
  return f(x.path, x.dataset, x.compression, x.chunk_bytes, x.split_size, x.per_split, x.created_us,
           x.streams, x.provider_epoch, x.next_index, x.exhausted, x.finished, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StateSnapshot& x) {
  return f(x.datasets, x.workers, x.jobs, x.tasks, x.next_dataset_number, x.next_worker_id,
           x.next_job_id, x.next_task_id, x.repetitions, x.snapshots);
}

class DispatcherState {
public:
  // Applies one record. A record that contradicts the state (an id that exists, an unknown
  // reference) is refused with failed_precondition / not_found naming it, and changes nothing.
  Status apply(const msg::Update& update);

  // The whole state, and the state rebuilt from one (replaces everything; invalid_argument /
  // data_loss when the snapshot contradicts itself).
  StateSnapshot snapshot() const;
  Status restore(const StateSnapshot& snapshot);
  // Same content (datasets, live workers, jobs, tasks, next ids): replay == live state.
  friend bool operator==(const DispatcherState& a, const DispatcherState& b);

  // --- lookups (nullptr when unknown)
  const DatasetEntry* dataset(const msg::dataset_id_t& id) const;
  // The dataset registered with this definition and compression (the same definition with
  // another compression is another dataset, as in tf.data, where compression is part of it).
  const DatasetEntry*
  dataset_by_fingerprint(const std::string& fingerprint,
                         Compression compression = Compression::automatic) const;
  const WorkerEntry* worker(msg::worker_id_t id) const; // live workers only
  const WorkerEntry* worker_by_address(const std::string& address) const;
  std::vector<const WorkerEntry*> workers() const;
  const JobEntry* job(msg::job_id_t id) const;
  // The job of iteration `iteration` of a name, released ones included (until forgotten).
  const JobEntry* named_job(const msg::dataset_id_t& dataset, const std::string& name,
                            int64_t iteration) const;
  // The name's newest job that is not released (nullptr when none).
  const JobEntry* live_named_job(const msg::dataset_id_t& dataset, const std::string& name) const;
  // The iteration after every one of the name created so far (what "the next" one is).
  int64_t next_iteration(const msg::dataset_id_t& dataset, const std::string& name) const;
  // Released named jobs kept for their iteration (job GC forgets them).
  std::vector<const JobEntry*> released_named_jobs() const;
  std::vector<const JobEntry*> unfinished_jobs() const; // neither finished nor released
  // Every job of a name, of any dataset and iteration (released ones too, until forgotten).
  std::vector<const JobEntry*> jobs_named(const std::string& name) const;
  const TaskEntry* task(msg::task_id_t id) const;
  // Live (not removed) tasks.
  std::vector<const TaskEntry*> tasks_of_worker(msg::worker_id_t worker) const;
  std::vector<const TaskEntry*> tasks_of_job(msg::job_id_t job) const;
  // Distributed snapshots by directory (dispatcher_state_snapshots.cpp).
  const SnapshotEntry* snapshot_at(const std::string& path) const;
  std::vector<const SnapshotEntry*> snapshots() const;

  // --- the ids the dispatcher puts into its next records
  msg::dataset_id_t next_dataset_id() const;
  msg::worker_id_t next_worker_id() const { return next_worker_id_; }
  msg::job_id_t next_job_id() const { return next_job_id_; }
  msg::task_id_t next_task_id() const { return next_task_id_; }

private:
  Status apply_one(const msg::RegisterDatasetRecord& r);
  Status apply_one(const msg::RegisterWorkerRecord& r);
  Status apply_one(const msg::RemoveWorkerRecord& r);
  Status apply_one(const msg::CreateJobRecord& r);
  Status apply_one(const msg::CreateTaskRecord& r);
  Status apply_one(const msg::FinishTaskRecord& r);
  Status apply_one(const msg::FinishJobRecord& r);
  Status apply_one(const msg::ReleaseJobRecord& r);
  Status apply_one(const msg::SplitPositionRecord& r);
  Status apply_one(const msg::CreateNamedJobRecord& r);
  Status apply_one(const msg::ForgetJobRecord& r);
  Status apply_one(const msg::CreateSnapshotRecord& r);
  Status apply_one(const msg::AddSnapshotStreamRecord& r);
  Status apply_one(const msg::SnapshotSplitsRecord& r);
  Status apply_one(const msg::SnapshotStreamDoneRecord& r);
  Status apply_one(const msg::FinishSnapshotRecord& r);
  Status apply_one(const msg::SnapshotStreamWriterRecord& r);
  Status apply_one(const msg::CoordinatedResumeRecord& r);
  SnapshotEntry* unfinished_snapshot(const std::string& path, Status& why);
  // Stream `stream` of the unfinished snapshot at `path` (null and `why` otherwise).
  SnapshotStreamEntry* unfinished_stream(const std::string& path, int64_t stream, Status& why);
  Status create_job(const msg::CreateJobRecord& r, int64_t iteration); // iteration < 0: the next

  std::map<msg::dataset_id_t, DatasetEntry> datasets_;
  std::map<std::string, msg::dataset_id_t> dataset_by_fingerprint_; // (fingerprint_key)
  std::map<msg::worker_id_t, WorkerEntry> workers_;                 // live
  std::map<msg::job_id_t, JobEntry> jobs_;
  using NamedKey = std::tuple<msg::dataset_id_t, std::string, int64_t>; // dataset, name, iteration
  std::map<NamedKey, msg::job_id_t> named_jobs_; // released ones too, until forgotten
  std::map<std::pair<msg::dataset_id_t, std::string>, int64_t> repetitions_;
  std::map<msg::task_id_t, TaskEntry> tasks_;
  std::map<std::string, SnapshotEntry> snapshots_;
  uint64_t next_dataset_number_ = 1000;
  msg::worker_id_t next_worker_id_ = 1;
  msg::job_id_t next_job_id_ = 1;
  msg::task_id_t next_task_id_ = 1;
};

} // namespace conveyor::actors
