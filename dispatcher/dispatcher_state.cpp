#include "dispatcher/dispatcher_state.hpp"

#include "dispatcher/coordinated_resume.hpp"

#include <algorithm>
#include <climits>
#include <tuple>

namespace conveyor::actors {

using namespace conveyor::msg;

namespace {
// The fingerprint index's key: AUTO keeps the bare fingerprint, another compression is suffixed.
std::string fingerprint_key(const std::string& fingerprint, Compression compression) {
  if (compression == Compression::automatic)
    return fingerprint;
  return fingerprint + "/" + to_string(compression);
}

// A deterministic job's finished-split log grows by the record's entries and forgets those its
// consumer had. A record lost in a crash of the job's request leaves a gap: numbering the kept
// entries back from the newest then counts them too high, which keeps more, never fewer.
void log_finished(JobEntry& j, const SplitPositionRecord& r) {
  auto& log = j.finished_log;
  log.insert(log.end(), r.finished.begin(), r.finished.end());
  j.finished_log_next =
    std::max(j.finished_log_next, r.finished_first + static_cast<int64_t>(r.finished.size()));
  const int64_t first = j.finished_log_next - static_cast<int64_t>(log.size());
  const int64_t drop =
    std::clamp<int64_t>(r.finished_known - first, 0, static_cast<int64_t>(log.size()));
  log.erase(log.begin(), log.begin() + drop);
}
} // namespace

Status DispatcherState::apply(const Update& update) {
  return std::visit([this](const auto& record) { return apply_one(record); }, update);
}

Status DispatcherState::apply_one(const RegisterDatasetRecord& r) {
  if (r.dataset.empty())
    return invalid_argument("dataset id must not be empty");
  if (datasets_.count(r.dataset))
    return failed_precondition("dataset id \"" + r.dataset + "\" is already registered");
  datasets_[r.dataset] =
    DatasetEntry{r.dataset, r.fingerprint, r.definition, static_cast<Compression>(r.compression)};
  // The first id keeps the fingerprint.
  dataset_by_fingerprint_.emplace(
    fingerprint_key(r.fingerprint, static_cast<Compression>(r.compression)), r.dataset);
  // Generated ids are decimal numbers; never hand out one that a user requested.
  if (!r.dataset.empty() &&
      std::all_of(r.dataset.begin(), r.dataset.end(),
                  [](char c) { return c >= '0' && c <= '9'; }) &&
      r.dataset.size() < 19)
    next_dataset_number_ = std::max<uint64_t>(next_dataset_number_, std::stoull(r.dataset) + 1);
  return Status::OK();
}

Status DispatcherState::apply_one(const RegisterWorkerRecord& r) {
  if (r.worker == 0)
    return invalid_argument("worker id 0 is reserved");
  if (workers_.count(r.worker))
    return failed_precondition("worker id " + std::to_string(r.worker) + " is already registered");
  if (worker_by_address(r.address))
    return failed_precondition("a worker at " + r.address + " is already registered");
  workers_[r.worker] = WorkerEntry{r.worker, r.address, r.time_us};
  next_worker_id_ = std::max(next_worker_id_, r.worker + 1);
  return Status::OK();
}

Status DispatcherState::apply_one(const RemoveWorkerRecord& r) {
  if (!workers_.erase(r.worker))
    return not_found("worker " + std::to_string(r.worker) + " is not registered");
  // Its tasks are gone: erased (a job lists only its live tasks; nothing grows per task).
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second.worker == r.worker) {
      if (auto j = jobs_.find(it->second.job); j != jobs_.end())
        j->second.tasks.erase(it->first);
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::OK();
}

Status DispatcherState::apply_one(const CreateJobRecord& r) { return create_job(r, -1); }

Status DispatcherState::apply_one(const CreateNamedJobRecord& r) {
  if (r.job.job_name.empty())
    return invalid_argument("job " + std::to_string(r.job.job) +
                            ": a named job's record has no job name");
  if (r.iteration < 0)
    return invalid_argument("job " + std::to_string(r.job.job) + ": iteration " +
                            std::to_string(r.iteration) + " is negative");
  return create_job(r.job, r.iteration);
}

Status DispatcherState::create_job(const CreateJobRecord& r, int64_t iteration) {
  if (jobs_.count(r.job))
    return failed_precondition("job " + std::to_string(r.job) + " already exists");
  if (!datasets_.count(r.dataset))
    return not_found("dataset id \"" + r.dataset + "\" is not registered");
  // Older records (a plain CreateJobRecord) of a name read its next repetition.
  if (!r.job_name.empty() && iteration < 0)
    iteration = next_iteration(r.dataset, r.job_name);
  if (!r.job_name.empty() && named_jobs_.count({r.dataset, r.job_name, iteration}))
    return failed_precondition("a job named \"" + r.job_name + "\" already exists for dataset " +
                               r.dataset + " and iteration " + std::to_string(iteration));
  JobEntry job;
  job.id = r.job;
  job.dataset = r.dataset;
  job.name = r.job_name;
  job.policy = static_cast<ShardingPolicy>(r.policy);
  job.num_consumers = r.num_consumers;
  job.target_workers = r.target_workers;
  job.created_us = r.time_us;
  job.split_size = r.split_size;
  job.cross_trainer_cache = static_cast<msg::CacheSharing>(r.cross_trainer_cache);
  job.expected_consumers = r.expected_consumers;
  job.tenant = r.tenant;
  job.tenant_weight = r.tenant_weight;
  job.file_seed = r.file_seed;
  job.deterministic_window = r.deterministic_window;
  if (!r.off_slots.empty() && job.policy != ShardingPolicy::off)
    return invalid_argument("job " + std::to_string(r.job) + ": read-cursor slots are for OFF " +
                            "jobs, this one is " + std::string{to_string(job.policy)});
  job.off_slots = r.off_slots;
  if (r.resumed_from >= 0 &&
      (job.policy != ShardingPolicy::off || job.num_consumers <= 0 || !r.off_slots.empty()))
    return invalid_argument("job " + std::to_string(r.job) +
                            ": only a coordinated OFF job resumes from its trainers' cursors, "
                            "its slots coming with them");
  job.resumed_from = r.resumed_from;
  if (!r.job_name.empty()) {
    named_jobs_[{r.dataset, r.job_name, iteration}] = r.job;
    job.repetition = iteration;
    auto& count = repetitions_[{r.dataset, r.job_name}];
    count = std::max(count, iteration + 1);
  }
  jobs_[r.job] = std::move(job);
  next_job_id_ = std::max(next_job_id_, r.job + 1);
  return Status::OK();
}

Status DispatcherState::apply_one(const CreateTaskRecord& r) {
  if (tasks_.count(r.task))
    return failed_precondition("task " + std::to_string(r.task) + " already exists");
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  if (job->second.finished || job->second.released)
    return failed_precondition("job " + std::to_string(r.job) + " is finished; it gets no tasks");
  if (!workers_.count(r.worker))
    return not_found("worker " + std::to_string(r.worker) + " is not registered");
  for (auto id : job->second.tasks) {
    const auto& t = tasks_.at(id);
    if (t.worker == r.worker && !t.removed)
      return failed_precondition("job " + std::to_string(r.job) + " already has task " +
                                 std::to_string(id) + " on worker " + std::to_string(r.worker));
  }
  auto& entry = job->second;
  if (entry.awaiting_cursors())
    return failed_precondition("job " + std::to_string(r.job) + ": its resumed coordinated read " +
                               "has " + std::to_string(entry.resume_shares.size()) + " of its " +
                               std::to_string(entry.num_consumers) +
                               " trainers' cursors; it gets tasks once all are there");
  if (entry.all_off_slots_taken())
    return failed_precondition("job " + std::to_string(r.job) + ": each of the " +
                               std::to_string(entry.off_slots.size()) +
                               " slot(s) of its resumed OFF read has its task already");
  TaskEntry task{r.task, r.job, r.worker, false, false, {}};
  if (!entry.off_slots.empty()) { // the next slot (in the order the job's record gave them)
    const auto& slot = entry.off_slots[static_cast<std::size_t>(entry.off_slots_taken++)];
    task.off_slot = slot.slot;
    task.off_skip = slot.skip;
  }
  tasks_[r.task] = std::move(task);
  entry.tasks.insert(r.task);
  next_task_id_ = std::max(next_task_id_, r.task + 1);
  return Status::OK();
}

Status DispatcherState::apply_one(const CoordinatedResumeRecord& r) {
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  auto& entry = job->second;
  if (entry.resumed_from < 0)
    return failed_precondition("job " + std::to_string(r.job) +
                               " was not resumed from coordinated read cursors");
  if (r.consumer_index < 0 || r.consumer_index >= entry.num_consumers)
    return invalid_argument("job " + std::to_string(r.job) + ": consumer_index " +
                            std::to_string(r.consumer_index) + " is not one of its " +
                            std::to_string(entry.num_consumers) + " consumers");
  if (!entry.awaiting_cursors()) // (a trainer of the decided job joins it; nothing changes)
    return Status::OK();
  auto& shares = entry.resume_shares;
  auto at = std::find_if(shares.begin(), shares.end(), [&](const ResumeShare& s) {
    return s.consumer_index >= r.consumer_index;
  });
  if (at != shares.end() && at->consumer_index == r.consumer_index)
    at->slots = r.shares; // (the index again: its newer cursor)
  else
    shares.insert(at, ResumeShare{r.consumer_index, r.shares});
  if (!entry.awaiting_cursors()) {
    std::vector<std::vector<OffSlot>> all;
    for (const auto& s : shares)
      all.push_back(s.slots);
    entry.off_slots = resumed_slots(all);
  }
  return Status::OK();
}

Status DispatcherState::apply_one(const FinishTaskRecord& r) {
  auto task = tasks_.find(r.task);
  if (task == tasks_.end())
    return not_found("task " + std::to_string(r.task) + " does not exist");
  task->second.finished = true;
  task->second.error = r.error;
  return Status::OK();
}

Status DispatcherState::apply_one(const FinishJobRecord& r) {
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  job->second.finished = true;
  return Status::OK();
}

Status DispatcherState::apply_one(const ReleaseJobRecord& r) {
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  // Released jobs are erased with their tasks: the dispatcher's state does not grow per job.
  // A named job stays, released and without tasks, until job GC forgets it: its iteration is
  // over, and a consumer asking for it gets end of sequence (tf.data keeps finished iterations
  // until GC too), not the data again.
  for (auto id : job->second.tasks)
    tasks_.erase(id);
  if (!job->second.name.empty()) {
    job->second.tasks.clear();
    job->second.finished = true;
    job->second.released = true;
    job->second.has_split_position = false;
    job->second.outstanding_splits.clear();
    job->second.source_positions.clear();
    job->second.resumed_from = -1; // trainers that resume from its cursors meet in a new job
    job->second.resume_shares.clear();
    return Status::OK();
  }
  jobs_.erase(job);
  return Status::OK();
}

Status DispatcherState::apply_one(const ForgetJobRecord& r) {
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  if (!job->second.released)
    return failed_precondition("job " + std::to_string(r.job) +
                               " is not released; only a released job can be forgotten");
  named_jobs_.erase({job->second.dataset, job->second.name, job->second.repetition});
  jobs_.erase(job);
  return Status::OK();
}

Status DispatcherState::apply_one(const SplitPositionRecord& r) {
  auto job = jobs_.find(r.job);
  if (job == jobs_.end())
    return not_found("job " + std::to_string(r.job) + " does not exist");
  auto& j = job->second;
  if (j.released)
    return failed_precondition("job " + std::to_string(r.job) +
                               " is released; it hands out no splits");
  if (j.policy != ShardingPolicy::dynamic)
    return failed_precondition("job " + std::to_string(r.job) +
                               " is not DYNAMIC; it has no splits");
  // A record that only reports finished splits leaves the position alone: the job may have
  // moved on with answers whose records are not in the journal yet.
  if (r.source < 0)
    return invalid_argument("a split position of source " + std::to_string(r.source) +
                            "; sources are numbered from 0");
  if (!r.handed.empty() || r.finished.empty()) {
    j.has_split_position = true;
    j.splits_handed_out = r.handed_out;
    if (r.source == 0) {
      j.split_epoch = r.epoch;
      j.split_provider_epoch = r.provider_epoch;
      j.split_next_index = r.next_index;
    } else {
      auto& ps = j.source_positions;
      auto p = std::lower_bound(
        ps.begin(), ps.end(), r.source,
        [](const SourceSplitPosition& x, int64_t source) { return x.source < source; });
      SourceSplitPosition pos{r.source, r.epoch, r.provider_epoch, r.next_index};
      if (p != ps.end() && p->source == r.source)
        *p = pos;
      else
        ps.insert(p, pos);
    }
  }
  using Key = std::tuple<int64_t, int64_t, int64_t>; // (source, epoch, index)
  auto& out = j.outstanding_splits;
  auto at = [&out](const Key& key) {
    return std::lower_bound(out.begin(), out.end(), key, [](const JournalSplit& s, const Key& k) {
      return Key{s.source, s.epoch, s.index} < k;
    });
  };
  auto same = [](const JournalSplit& s, const Key& k) {
    return Key{s.source, s.epoch, s.index} == k;
  };
  for (const auto& s : r.handed) { // a re-issued split replaces its earlier hand-out
    Key key{s.source, s.epoch, s.index};
    auto i = at(key);
    if (i != out.end() && same(*i, key))
      *i = s;
    else
      out.insert(i, s);
  }
  for (const auto& k : r.finished) {
    Key key{k.source, k.epoch, k.index};
    if (auto i = at(key); i != out.end() && same(*i, key))
      out.erase(i);
  }
  if (j.deterministic_window > 0 && r.finished_first >= 0)
    log_finished(j, r);
  return Status::OK();
}

StateSnapshot DispatcherState::snapshot() const {
  StateSnapshot s;
  for (const auto& [id, d] : datasets_)
    s.datasets.push_back(d);
  for (const auto& [id, w] : workers_)
    s.workers.push_back(w);
  for (const auto& [id, j] : jobs_)
    s.jobs.push_back(j);
  for (const auto& [id, t] : tasks_)
    s.tasks.push_back(t);
  s.next_dataset_number = next_dataset_number_;
  s.next_worker_id = next_worker_id_;
  s.next_job_id = next_job_id_;
  s.next_task_id = next_task_id_;
  for (const auto& [key, count] : repetitions_)
    s.repetitions.push_back(RepetitionEntry{key.first, key.second, count});
  for (const auto& [path, snap] : snapshots_)
    s.snapshots.push_back(snap);
  return s;
}

Status DispatcherState::restore(const StateSnapshot& s) {
  DispatcherState fresh;
  for (const auto& d : s.datasets) {
    if (d.id.empty() || fresh.datasets_.count(d.id))
      return data_loss("snapshot: dataset id \"" + d.id + "\" is empty or repeated");
    fresh.datasets_[d.id] = d;
    fresh.dataset_by_fingerprint_.emplace(fingerprint_key(d.fingerprint, d.compression), d.id);
  }
  for (const auto& w : s.workers)
    if (!fresh.workers_.emplace(w.id, w).second)
      return data_loss("snapshot: worker " + std::to_string(w.id) + " is repeated");
  for (const auto& j : s.jobs) {
    if (!fresh.jobs_.emplace(j.id, j).second)
      return data_loss("snapshot: job " + std::to_string(j.id) + " is repeated");
    if (!fresh.datasets_.count(j.dataset))
      return data_loss("snapshot: job " + std::to_string(j.id) + " names unknown dataset " +
                       j.dataset);
    if (!j.name.empty() &&
        !fresh.named_jobs_.emplace(NamedKey{j.dataset, j.name, j.repetition}, j.id).second)
      return data_loss("snapshot: job " + std::to_string(j.id) + " repeats iteration " +
                       std::to_string(j.repetition) + " of job name \"" + j.name + "\"");
  }
  for (const auto& t : s.tasks) {
    if (!fresh.tasks_.emplace(t.id, t).second)
      return data_loss("snapshot: task " + std::to_string(t.id) + " is repeated");
    if (!fresh.jobs_.count(t.job))
      return data_loss("snapshot: task " + std::to_string(t.id) + " names unknown job " +
                       std::to_string(t.job));
  }
  fresh.next_dataset_number_ = s.next_dataset_number;
  fresh.next_worker_id_ = s.next_worker_id;
  fresh.next_job_id_ = s.next_job_id;
  fresh.next_task_id_ = s.next_task_id;
  for (const auto& r : s.repetitions)
    fresh.repetitions_[{r.dataset, r.name}] = r.count;
  for (const auto& snap : s.snapshots) {
    if (!fresh.datasets_.count(snap.dataset))
      return data_loss("snapshot: the distributed snapshot at " + snap.path +
                       " names unknown dataset " + snap.dataset);
    if (!fresh.snapshots_.emplace(snap.path, snap).second)
      return data_loss("snapshot: the distributed snapshot at " + snap.path + " is repeated");
  }
  *this = std::move(fresh);
  return Status::OK();
}

namespace {
bool same_dataset(const DatasetEntry& a, const DatasetEntry& b) {
  return a.id == b.id && a.fingerprint == b.fingerprint && a.definition == b.definition &&
         a.compression == b.compression;
}
bool same_worker(const WorkerEntry& a, const WorkerEntry& b) {
  return a.id == b.id && a.address == b.address && a.registered_us == b.registered_us;
}
bool same_slots(const std::vector<OffSlot>& a, const std::vector<OffSlot>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const OffSlot& x, const OffSlot& y) {
           return x.slot == y.slot && x.skip == y.skip;
         });
}
bool same_job(const JobEntry& a, const JobEntry& b) {
  return a.id == b.id && a.dataset == b.dataset && a.name == b.name && a.policy == b.policy &&
         a.num_consumers == b.num_consumers && a.target_workers == b.target_workers &&
         a.created_us == b.created_us && a.repetition == b.repetition &&
         a.split_size == b.split_size && a.cross_trainer_cache == b.cross_trainer_cache &&
         a.expected_consumers == b.expected_consumers && a.tenant == b.tenant &&
         a.tenant_weight == b.tenant_weight && a.file_seed == b.file_seed &&
         a.finished == b.finished && a.released == b.released && a.tasks == b.tasks &&
         a.has_split_position == b.has_split_position && a.split_epoch == b.split_epoch &&
         a.split_provider_epoch == b.split_provider_epoch &&
         a.split_next_index == b.split_next_index && a.splits_handed_out == b.splits_handed_out &&
         a.source_positions == b.source_positions &&
         a.deterministic_window == b.deterministic_window &&
         a.finished_log_next == b.finished_log_next && a.off_slots_taken == b.off_slots_taken &&
         a.resumed_from == b.resumed_from && a.resume_shares.size() == b.resume_shares.size() &&
         std::equal(a.resume_shares.begin(), a.resume_shares.end(), b.resume_shares.begin(),
                    [](const ResumeShare& x, const ResumeShare& y) {
                      return x.consumer_index == y.consumer_index && same_slots(x.slots, y.slots);
                    }) &&
         same_slots(a.off_slots, b.off_slots) && a.finished_log.size() == b.finished_log.size() &&
         std::equal(a.finished_log.begin(), a.finished_log.end(), b.finished_log.begin(),
                    [](const JournalSplitKey& x, const JournalSplitKey& y) {
                      return x.epoch == y.epoch && x.index == y.index && x.source == y.source;
                    }) &&
         a.outstanding_splits.size() == b.outstanding_splits.size() &&
         std::equal(a.outstanding_splits.begin(), a.outstanding_splits.end(),
                    b.outstanding_splits.begin(), [](const JournalSplit& x, const JournalSplit& y) {
                      return x.source == y.source && x.epoch == y.epoch && x.index == y.index &&
                             x.begin == y.begin && x.end == y.end && x.file == y.file;
                    });
}
bool same_task(const TaskEntry& a, const TaskEntry& b) {
  return a.id == b.id && a.job == b.job && a.worker == b.worker && a.finished == b.finished &&
         a.removed == b.removed && a.error == b.error && a.off_slot == b.off_slot &&
         a.off_skip == b.off_skip;
}
bool same_snapshot(const SnapshotEntry& a, const SnapshotEntry& b) {
  auto same_split = [](const JournalSplit& x, const JournalSplit& y) {
    return x.epoch == y.epoch && x.index == y.index && x.begin == y.begin && x.end == y.end &&
           x.file == y.file;
  };
  auto same_stream = [&](const SnapshotStreamEntry& x, const SnapshotStreamEntry& y) {
    return x.ended == y.ended && x.done == y.done && x.writer == y.writer &&
           x.splits.size() == y.splits.size() &&
           std::equal(x.splits.begin(), x.splits.end(), y.splits.begin(), same_split);
  };
  return a.path == b.path && a.dataset == b.dataset && a.compression == b.compression &&
         a.chunk_bytes == b.chunk_bytes && a.split_size == b.split_size &&
         a.per_split == b.per_split && a.created_us == b.created_us &&
         a.provider_epoch == b.provider_epoch && a.next_index == b.next_index &&
         a.exhausted == b.exhausted && a.finished == b.finished && a.error == b.error &&
         a.streams.size() == b.streams.size() &&
         std::equal(a.streams.begin(), a.streams.end(), b.streams.begin(), same_stream);
}
template <class Map, class Eq>
bool same_map(const Map& a, const Map& b, Eq eq) {
  if (a.size() != b.size())
    return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !eq(i->second, j->second))
      return false;
  return true;
}
} // namespace

bool operator==(const DispatcherState& a, const DispatcherState& b) {
  return same_map(a.datasets_, b.datasets_, same_dataset) &&
         a.dataset_by_fingerprint_ == b.dataset_by_fingerprint_ &&
         same_map(a.workers_, b.workers_, same_worker) && same_map(a.jobs_, b.jobs_, same_job) &&
         a.named_jobs_ == b.named_jobs_ && a.repetitions_ == b.repetitions_ &&
         same_map(a.tasks_, b.tasks_, same_task) &&
         a.next_dataset_number_ == b.next_dataset_number_ &&
         a.next_worker_id_ == b.next_worker_id_ && a.next_job_id_ == b.next_job_id_ &&
         a.next_task_id_ == b.next_task_id_ && same_map(a.snapshots_, b.snapshots_, same_snapshot);
}

const DatasetEntry* DispatcherState::dataset(const dataset_id_t& id) const {
  auto i = datasets_.find(id);
  return i == datasets_.end() ? nullptr : &i->second;
}

const DatasetEntry* DispatcherState::dataset_by_fingerprint(const std::string& fp,
                                                            Compression compression) const {
  auto i = dataset_by_fingerprint_.find(fingerprint_key(fp, compression));
  return i == dataset_by_fingerprint_.end() ? nullptr : dataset(i->second);
}

const WorkerEntry* DispatcherState::worker(worker_id_t id) const {
  auto i = workers_.find(id);
  return i == workers_.end() ? nullptr : &i->second;
}

const WorkerEntry* DispatcherState::worker_by_address(const std::string& address) const {
  for (const auto& [id, w] : workers_)
    if (w.address == address)
      return &w;
  return nullptr;
}

std::vector<const WorkerEntry*> DispatcherState::workers() const {
  std::vector<const WorkerEntry*> out;
  for (const auto& [id, w] : workers_)
    out.push_back(&w);
  return out;
}

const JobEntry* DispatcherState::job(job_id_t id) const {
  auto i = jobs_.find(id);
  return i == jobs_.end() ? nullptr : &i->second;
}

const JobEntry* DispatcherState::named_job(const dataset_id_t& dataset, const std::string& name,
                                           int64_t iteration) const {
  auto i = named_jobs_.find({dataset, name, iteration});
  return i == named_jobs_.end() ? nullptr : job(i->second);
}

std::vector<const JobEntry*> DispatcherState::jobs_named(const std::string& name) const {
  std::vector<const JobEntry*> out;
  for (const auto& [key, id] : named_jobs_)
    if (std::get<1>(key) == name)
      if (const auto* j = job(id))
        out.push_back(j);
  return out;
}

const JobEntry* DispatcherState::live_named_job(const dataset_id_t& dataset,
                                                const std::string& name) const {
  const JobEntry* newest = nullptr;
  for (auto i = named_jobs_.lower_bound({dataset, name, INT64_MIN});
       i != named_jobs_.end() && std::get<0>(i->first) == dataset && std::get<1>(i->first) == name;
       ++i)
    if (const auto* j = job(i->second); j && !j->released)
      newest = j;
  return newest;
}

int64_t DispatcherState::next_iteration(const dataset_id_t& dataset,
                                        const std::string& name) const {
  auto i = repetitions_.find({dataset, name});
  return i == repetitions_.end() ? 0 : i->second;
}

std::vector<const JobEntry*> DispatcherState::released_named_jobs() const {
  std::vector<const JobEntry*> out;
  for (const auto& [id, j] : jobs_)
    if (j.released && !j.name.empty())
      out.push_back(&j);
  return out;
}

std::vector<const JobEntry*> DispatcherState::unfinished_jobs() const {
  std::vector<const JobEntry*> out;
  for (const auto& [id, j] : jobs_)
    if (!j.finished && !j.released)
      out.push_back(&j);
  return out;
}

const TaskEntry* DispatcherState::task(task_id_t id) const {
  auto i = tasks_.find(id);
  return i == tasks_.end() ? nullptr : &i->second;
}

std::vector<const TaskEntry*> DispatcherState::tasks_of_worker(worker_id_t worker) const {
  std::vector<const TaskEntry*> out;
  for (const auto& [id, t] : tasks_)
    if (t.worker == worker && !t.removed)
      out.push_back(&t);
  return out;
}

std::vector<const TaskEntry*> DispatcherState::tasks_of_job(job_id_t job) const {
  std::vector<const TaskEntry*> out;
  auto j = jobs_.find(job);
  if (j == jobs_.end())
    return out;
  for (auto id : j->second.tasks) {
    const auto& t = tasks_.at(id);
    if (!t.removed)
      out.push_back(&t);
  }
  return out;
}

dataset_id_t DispatcherState::next_dataset_id() const {
  uint64_t n = next_dataset_number_;
  while (datasets_.count(std::to_string(n)))
    ++n;
  return std::to_string(n);
}

} // namespace conveyor::actors
