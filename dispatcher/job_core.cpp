#include "dispatcher/job_core.hpp"

#include <algorithm>
#include <optional>

#include "node/hooks.hpp"

#include <limits>
#include <set>

#include "pipeline/graph/graph.hpp"
#include "pipeline/sharding/multi_source.hpp"

namespace conveyor::actors {

namespace {

// Whether the chain from `n` down is per-element ops over a source; `concatenation`: a
// `concatenate` is allowed too (each input checked the same way), and each leaf must be a
// splittable source (an input without one would be read whole by every task, outside any split).
bool per_split_from(const conveyor::Node* n, bool concatenation) {
  static const std::set<std::string> per_element = {"map", "filter", "flat_map", "repeat"};
  while (n != nullptr) {
    if (n->inputs.empty())
      return !concatenation || splittable_source_count(*n) == 1;
    if (concatenation && n->op == "concatenate") {
      for (const auto& input : n->inputs)
        if (!per_split_from(input.get(), true))
          return false;
      return true;
    }
    if (n->inputs.size() != 1 || per_element.count(n->op) == 0)
      return false;
    if (n->op == "map") {
      auto p = n->attrs.find("num_parallel_calls");
      if (p != n->attrs.end() && std::holds_alternative<int64_t>(p->second) &&
          std::get<int64_t>(p->second) != 1)
        return false;
    }
    n = n->inputs[0].get();
  }
  return true;
}

} // namespace

bool is_per_split(const Dataset& dataset) { return per_split_from(dataset.node().get(), false); }

bool is_per_split_concatenation(const Dataset& dataset) {
  return dataset.node() && splittable_source_count(*dataset.node()) > 1 &&
         per_split_from(dataset.node().get(), true);
}

JobCore::JobCore(std::unique_ptr<SplitProvider> provider, bool per_split) : per_split_(per_split) {
  if (provider) {
    sources_.emplace_back();
    sources_.back().provider = std::move(provider);
  }
}

JobCore::JobCore(std::vector<std::unique_ptr<SplitProvider>> providers, bool per_split)
  : per_split_(per_split) {
  for (auto& p : providers) {
    sources_.emplace_back();
    sources_.back().provider = std::move(p);
  }
}

int64_t JobCore::epoch(int64_t source) const {
  return source >= 0 && source < static_cast<int64_t>(sources_.size())
           ? sources_[static_cast<std::size_t>(source)].epoch
           : 0;
}

SplitPosition JobCore::position(int64_t source) const {
  return source >= 0 && source < static_cast<int64_t>(sources_.size())
           ? sources_[static_cast<std::size_t>(source)].provider->position()
           : SplitPosition{};
}

std::size_t JobCore::pending_reissue() const {
  std::size_t n = 0;
  for (const auto& src : sources_)
    n += src.requeue.size();
  return n;
}

bool JobCore::any_requeued() const {
  for (const auto& src : sources_)
    if (!src.requeue.empty())
      return true;
  return false;
}

bool JobCore::source_owns_any(int64_t source) const {
  auto o = owner_.lower_bound(
    SplitKey{source, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min()});
  return o != owner_.end() && std::get<0>(o->first) == source;
}

bool JobCore::add_task(msg::task_id_t id, msg::worker_id_t worker, std::string worker_address,
                       int64_t shard) {
  if (tasks_.count(id))
    return false;
  Task t;
  t.id = id;
  t.worker = worker;
  t.worker_address = std::move(worker_address);
  t.shard = shard;
  tasks_.emplace(id, std::move(t));
  // Not listed before it is assigned, but production is no longer over.
  ++version_;
  return true;
}

bool JobCore::task_assigned(msg::task_id_t id) {
  auto t = tasks_.find(id);
  if (t == tasks_.end() || t->second.assigned)
    return false;
  t->second.assigned = true;
  ++version_;
  return true;
}

bool JobCore::task_done(msg::task_id_t id, std::string error, bool drained) {
  auto t = tasks_.find(id);
  if (t == tasks_.end() || t->second.done)
    return false;
  t->second.done = true;
  t->second.drained = drained && error.empty();
  t->second.error = std::move(error);
  check_stranded();
  ++version_;
  return true;
}

bool JobCore::task_lost(msg::task_id_t id, const std::string& reason) {
  auto t = tasks_.find(id);
  if (t == tasks_.end())
    return false;
  // Hand the lost task's unfinished splits out again, in split order.
  std::size_t n = 0;
  // Planted bug (simulator builds of this file only, node/hooks.hpp).
  bool skip_one = hooks::kCompiledIn && hooks::forget_lost_split();
  for (auto& [key, split] : t->second.unfinished) {
    owner_.erase(key);
    if (skip_one && n++ == t->second.unfinished.size() - 1)
      continue; // test-only planted bug: the last one is forgotten
    requeue(std::move(split));
  }
  (void)reason;
  // A task that failed, then was lost: its consumers may not have read its error from it yet;
  // the job's list carries it, so the failure reaches them (never a plain "lost task").
  if (t->second.done && !t->second.error.empty() && error_.empty())
    fail_with(t->second);
  tasks_.erase(t);
  check_stranded();
  ++version_;
  return true;
}

msg::JournalSplit to_journal(const Split& s) {
  return msg::JournalSplit{s.epoch, s.index, s.begin, s.end, s.file, s.source};
}

Split from_journal(const msg::JournalSplit& s) {
  // Split::skip is not journaled: a restored resumed job runs such a split whole, and the
  // consumer drops what its read cursor covers.
  return Split{s.epoch, s.index, s.begin, s.end, s.file, 0, s.source};
}

// A task's error as the worker reported it, "code: message" (Status::to_string): the job fails
// with the same code.
void JobCore::fail_with(const Task& t) {
  error_ =
    "task " + std::to_string(t.id) + " on worker " + t.worker_address + " failed: " + t.error;
  error_code_ = ErrorCode::data_loss;
  for (int c = 1; c <= static_cast<int>(ErrorCode::resource_exhausted); ++c) {
    const std::string name = conveyor::to_string(static_cast<ErrorCode>(c));
    if (t.error.rfind(name + ": ", 0) == 0)
      error_code_ = static_cast<ErrorCode>(c);
  }
}

void JobCore::requeue(Split split) {
  // (a source out of range cannot own a split: owner_ only holds keys the job handed out)
  auto source = static_cast<std::size_t>(split.source);
  if (split.source < 0 || source >= sources_.size())
    return;
  ++reissued_;
  // In split order, whatever order they came back in: a task takes the lowest first. Two tasks
  // handing back their surplus (SplitFeed::take_surplus) in the other order made one read a
  // later split before an earlier one, and a deterministic reader held the later one whole
  // (issue 36).
  auto& queue = sources_[source].requeue;
  auto key = [](const Split& s) { return std::make_pair(s.epoch, s.index); };
  auto at = std::upper_bound(queue.begin(), queue.end(), split,
                             [&](const Split& a, const Split& b) { return key(a) < key(b); });
  queue.insert(at, std::move(split));
}

// Splits that came back but that no task will ever ask for: every live task ended. (Per-split
// pipelines never get here: their tasks wait at the end of an epoch until every split finished.)
void JobCore::check_stranded() {
  if (!any_requeued() || !error_.empty())
    return;
  bool any_task = false;
  for (const auto& [id, t] : tasks_) {
    if (t.done && t.drained)
      continue; // it stopped taking splits; a fresh task (its worker's next process) will
    if (!t.done)
      return;
    any_task = true;
  }
  if (!any_task)
    return; // no worker now (or only drained ones): the splits wait for one to come back
  ++version_;
  // A task that failed is why its splits are stranded: its error is the job's, not data_loss.
  for (const auto& [id, t] : tasks_)
    if (t.done && !t.error.empty()) {
      fail_with(t);
      return;
    }
  error_ = std::to_string(pending_reissue()) +
           " split(s) of a lost task cannot be read again: every other task of the job already "
           "ended (the pipeline is not per-split; see README, fault tolerance)";
}

const JobCore::Task* JobCore::task(msg::task_id_t id) const {
  auto t = tasks_.find(id);
  return t == tasks_.end() ? nullptr : &t->second;
}

std::vector<const JobCore::Task*> JobCore::listed() const {
  std::vector<const Task*> out;
  for (const auto& [id, t] : tasks_)
    if (t.assigned)
      out.push_back(&t);
  return out;
}

bool JobCore::production_ended() const {
  if (any_requeued())
    return false;
  // A task that ended because its worker drained says nothing about the job's splits: only
  // tasks that ran out of them do. With none (every task drained, e.g. the other workers were
  // lost) the job waits for a worker, as it does when all its workers are gone.
  bool any = false;
  for (const auto& [id, t] : tasks_) {
    if (t.done && t.drained)
      continue;
    if (!t.assigned || !t.done)
      return false;
    any = true;
  }
  return any && shards_pending().empty();
}

std::vector<int64_t> JobCore::shards_pending() const {
  std::vector<int64_t> pending;
  for (int64_t shard = 0; shard < static_cast<int64_t>(shard_workers_.size()); ++shard) {
    bool produced = std::any_of(tasks_.begin(), tasks_.end(), [&](const auto& entry) {
      const Task& t = entry.second;
      return t.shard == shard && t.assigned && t.done && !t.drained;
    });
    if (!produced)
      pending.push_back(shard);
  }
  return pending;
}

std::string JobCore::waiting_for() const {
  std::string out;
  for (int64_t shard : shards_pending()) {
    const bool running = std::any_of(tasks_.begin(), tasks_.end(), [&](const auto& entry) {
      return entry.second.shard == shard && !entry.second.done;
    });
    if (running)
      continue; // its task is producing: nothing to report
    out += (out.empty() ? "" : "; ") + std::string{"shard "} + std::to_string(shard) + " of " +
           std::to_string(shard_workers_.size()) + " (worker " +
           shard_workers_[static_cast<std::size_t>(shard)] + ")";
  }
  if (!out.empty())
    out += ": no task of this job has read it to its end, and its worker is not registered "
           "(static sharding reads each shard on its own worker; the job waits for it)";
  return out;
}

Expected<JobCore::SplitAnswer> JobCore::get_splits(msg::task_id_t task, int64_t epoch, uint32_t max,
                                                   int64_t source) {
  if (sources_.empty())
    return failed_precondition("the job is not DYNAMIC; it hands out no splits");
  if (source < 0 || source >= static_cast<int64_t>(sources_.size()))
    return invalid_argument("a task asked for splits of source " + std::to_string(source) +
                            " but the job's dataset has " + std::to_string(sources_.size()) +
                            " splittable source(s)");
  auto t = tasks_.find(task);
  if (t == tasks_.end())
    return failed_precondition("task " + std::to_string(task) + " is not part of the job");
  Source& src = sources_[static_cast<std::size_t>(source)];
  // The provider's splits say source 0; this job's are stamped with their source.
  auto next = [&](Split& s, bool& end) -> Status {
    CONVEYOR_RETURN_IF_ERROR(src.provider->get_next(s, end));
    s.source = source;
    return Status::OK();
  };
  SplitAnswer a;
  if (epoch < src.epoch) {
    a.end_of_splits = true;
    a.empty_epoch = src.handed_in_epoch[epoch] == 0;
    return a;
  }
  if (epoch == src.epoch + 1 && sources_.size() > 1) {
    // A task's `repeat` began its next pass while this source's epoch was not over for the job
    // (a zip that ended on its other input). tf.data resets every split provider of the
    // repeat's input at the end of a repetition: the epoch ends here for every task (one still
    // in it gets end_of_splits), its splits not handed out are not read, and the next begins.
    CONVEYOR_RETURN_IF_ERROR(src.provider->restore(SplitPosition{epoch, 0}));
    src.epoch = epoch;
    src.exhausted = false;
  }
  if (epoch > src.epoch)
    return failed_precondition("a task asked for splits of epoch " + std::to_string(epoch) +
                               " but the job is only in epoch " + std::to_string(src.epoch) +
                               (sources_.size() > 1 ? " of source " + std::to_string(source) : ""));
  max = std::max<uint32_t>(1, max);
  if (!has_reader(task)) {
    // Whether the epoch has a split left only the provider knows. Holding while it was merely not
    // exhausted held a task nobody reads forever once its readers' tasks had ended (a task that
    // got no split in an epoch asks for the next, which nothing else pulls to its end): the job
    // never ended. So ask: a split taken here waits at the front of the queue (handed out before
    // any other, so a journaled position never passes it unhanded) for a task some consumer reads.
    if (src.requeue.empty() && !src.exhausted) {
      Split s;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(next(s, end));
      if (end) {
        src.exhausted = true;
      } else {
        ++src.handed_in_epoch[src.epoch];
        src.requeue.push_front(std::move(s));
      }
    }
    if (!src.requeue.empty()) {
      a.hold = true; // splits it took would be stranded: wait for a reader or the epoch's end
      return a;
    }
  }
  while (a.splits.size() < max && !src.requeue.empty()) {
    a.splits.push_back(std::move(src.requeue.front()));
    src.requeue.pop_front();
  }
  while (a.splits.size() < max && !src.exhausted && !beyond_window(a.splits)) {
    Split s;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(next(s, end));
    if (end) {
      src.exhausted = true;
      break;
    }
    ++src.handed_in_epoch[src.epoch];
    a.splits.push_back(std::move(s));
  }
  handed_out_ += static_cast<int64_t>(a.splits.size());
  // Deterministic reads: the consumer hears of a new task of the lowest unfinished split with
  // its next task list (task_list::lowest_split_tasks).
  const auto lowest_before = lowest_split_owners();
  for (const auto& s : a.splits) {
    owner_[split_key_of(s)] = task;
    t->second.unfinished[split_key_of(s)] = s;
  }
  if (window_ > 0 && lowest_split_owners() != lowest_before)
    ++version_;
  if (!a.splits.empty())
    return a;
  if (per_split_ && source_owns_any(source)) {
    a.hold = true; // the epoch's last splits may still come back
    return a;
  }
  a.end_of_splits = true;
  a.empty_epoch = src.handed_in_epoch[src.epoch] == 0;
  ++src.epoch;
  src.exhausted = false;
  return a;
}

Status JobCore::restore_splits(int64_t epoch, int64_t handed_out, const SplitPosition& position,
                               std::vector<Split> outstanding) {
  if (sources_.empty())
    return failed_precondition("the job is not DYNAMIC; it has no split position");
  if (handed_out < 0)
    return invalid_argument("a split position with a negative count");
  CONVEYOR_RETURN_IF_ERROR(restore_source(0, epoch, position));
  handed_out_ = handed_out;
  if (hooks::kCompiledIn && hooks::forget_held_split() && !outstanding.empty())
    outstanding.pop_back(); // planted in simulator builds only (node/hooks.hpp)
  for (auto& s : outstanding) {
    if (s.source < 0 || s.source >= static_cast<int64_t>(sources_.size()))
      return invalid_argument("a journaled split of source " + std::to_string(s.source) +
                              " but the job's dataset has " + std::to_string(sources_.size()) +
                              " splittable source(s)");
    requeue(std::move(s));
  }
  return Status::OK();
}

Status JobCore::restore_source(int64_t source, int64_t epoch, const SplitPosition& position) {
  if (source < 0 || source >= static_cast<int64_t>(sources_.size()))
    return invalid_argument("a journaled split position of source " + std::to_string(source) +
                            " but the job's dataset has " + std::to_string(sources_.size()) +
                            " splittable source(s)");
  if (epoch < 0)
    return invalid_argument("a split position with a negative epoch");
  Source& src = sources_[static_cast<std::size_t>(source)];
  CONVEYOR_RETURN_IF_ERROR(src.provider->restore(position));
  src.epoch = epoch;
  src.exhausted = false;
  // The epoch had splits before the restart (an empty epoch ends a repeat() of nothing).
  if (position.epoch == epoch && position.next_index > 0)
    src.handed_in_epoch[epoch] = position.next_index;
  return Status::OK();
}

bool JobCore::splits_update(msg::task_id_t task, const std::vector<SplitKey>& finished,
                            const std::vector<Split>& returned, std::vector<SplitKey>* accepted) {
  bool changed = false;
  auto t = tasks_.find(task);
  for (const auto& key : finished) {
    auto o = owner_.find(key);
    if (o == owner_.end() || o->second != task)
      continue; // handed to another task since (this one was lost meanwhile)
    owner_.erase(o);
    if (t != tasks_.end())
      t->second.unfinished.erase(key);
    if (accepted)
      accepted->push_back(key);
    if (window_ > 0) { // the consumer hears of it with its next task list
      finished_.push_back(key);
      ++version_;
    }
    changed = true;
  }
  for (const auto& s : returned) {
    SplitKey key = split_key_of(s);
    auto o = owner_.find(key);
    if (o == owner_.end() || o->second != task)
      continue;
    owner_.erase(o);
    if (t != tasks_.end())
      t->second.unfinished.erase(key);
    requeue(s);
    changed = true;
  }
  if (changed)
    check_stranded();
  return changed;
}

bool JobCore::beyond_window(const std::vector<Split>& taking) const {
  // Deterministic reads are per-split, so their pipeline has one splittable source.
  if (window_ <= 0 || sources_.size() != 1)
    return false;
  const Source& src = sources_.front();
  // The provider's next split: its position names it (a resuming provider may skip past it to a
  // later one, so this can only hold back less than the window, never a split behind it).
  const SplitPosition next = src.provider->position();
  if (next.epoch != src.epoch)
    return false;
  std::optional<int64_t> lowest;
  auto low = [&](int64_t epoch, int64_t index) {
    if (epoch == src.epoch && (!lowest || index < *lowest))
      lowest = index;
  };
  if (!owner_.empty())
    low(std::get<1>(owner_.begin()->first), std::get<2>(owner_.begin()->first));
  for (const auto& s : src.requeue)
    low(s.epoch, s.index);
  for (const auto& s : taking)
    low(s.epoch, s.index);
  return lowest && next.next_index - *lowest > window_;
}

std::vector<std::pair<int64_t, int64_t>> JobCore::finished_since(int64_t known) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t from = std::max(known, finished_base_) - finished_base_;
  for (auto k = finished_.begin() + std::min<int64_t>(from, static_cast<int64_t>(finished_.size()));
       k != finished_.end(); ++k)
    out.emplace_back(std::get<1>(*k), std::get<2>(*k));
  return out;
}

void JobCore::forget_finished(int64_t known) {
  while (finished_base_ < known && !finished_.empty()) {
    finished_.pop_front();
    ++finished_base_;
  }
}

void JobCore::restore_finished(const std::vector<SplitKey>& log) {
  finished_.assign(log.begin(), log.end());
  finished_base_ = 0;
  ++version_;
}

std::vector<msg::task_id_t> JobCore::lowest_split_owners() const {
  if (window_ <= 0 || sources_.size() != 1 || owner_.empty())
    return {};
  const SplitKey lowest = owner_.begin()->first; // (source, epoch, index) order
  for (const auto& s : sources_.front().requeue)
    if (std::make_pair(s.epoch, s.index) < std::make_pair(std::get<1>(lowest), std::get<2>(lowest)))
      return {}; // a lower split waits to be handed out again: its next task is not known
  return {owner_.begin()->second};
}

msg::consumer_id_t JobCore::join(int64_t now_ns) {
  auto id = next_consumer_++;
  consumers_[id] = now_ns;
  ++joined_;
  return id;
}

void JobCore::touch(msg::consumer_id_t id, int64_t now_ns) {
  if (auto c = consumers_.find(id); c != consumers_.end())
    c->second = now_ns;
}

bool JobCore::set_reading(msg::consumer_id_t id, const std::vector<msg::task_id_t>& tasks) {
  if (!consumers_.count(id))
    return false;
  bool gained = false;
  for (auto task : tasks)
    gained |= need_reader_.count(task) > 0 && !has_reader(task);
  reading_[id] = std::set<msg::task_id_t>(tasks.begin(), tasks.end());
  return gained;
}

bool JobCore::has_reader(msg::task_id_t id) const {
  if (!need_reader_.count(id))
    return true;
  for (const auto& [consumer, tasks] : reading_)
    if (tasks.count(id))
      return true;
  return false;
}

bool JobCore::leave(msg::consumer_id_t id, bool finished) {
  if (!consumers_.erase(id))
    return false;
  reading_.erase(id);
  if (!finished)
    ++left_unfinished_;
  return true;
}

std::vector<msg::consumer_id_t> JobCore::expire(int64_t now_ns, int64_t timeout_ns) {
  std::vector<msg::consumer_id_t> out;
  for (const auto& [id, seen] : consumers_)
    if (now_ns - seen > timeout_ns)
      out.push_back(id);
  for (auto id : out)
    leave(id, false);
  return out;
}

} // namespace conveyor::actors
