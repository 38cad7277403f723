// Task -> job: split distribution for DYNAMIC sharding (tf.data service's distributed_epoch).
//
// A task asks for splits of the epoch it is in (TF's GetSplit(repetition)), several per request:
// the job hands out each split of an epoch once across its tasks and tracks, per task, the
// splits handed out and not yet finished (every element acknowledged by consumers). A lost task's
// unfinished splits, and the unstarted splits a task returns, are handed out again. An epoch ends
// for a task (end_of_splits) once the epoch's splits are all handed out and, for per-split
// pipelines, all finished — so a split that comes back always finds a task to run it.
// A task whose pipeline ended reports task_done.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/protocol.hpp"
#include "messages/type_ids.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Split& x) {
  return f(caf::meta::type_name("Split"), x.epoch, x.index, x.begin, x.end, x.file, x.skip,
           x.source);
}
} // namespace conveyor

namespace conveyor::msg {

// (source, epoch, index) of a split: what identifies it across re-issues. `source` is the
// splittable source's index (pipeline/sharding/multi_source.hpp; 0 for one source).
using split_key = std::tuple<int64_t, int64_t, int64_t>;
inline split_key key_of(const Split& s) { return {s.source, s.epoch, s.index}; }

// task -> job: up to `max` splits of source `source` (tf.data's split_provider_index: a dataset
// with several splittable sources, zip or concatenate, has one provider per source, each with
// its own epochs) in the epoch the task's pipeline is in for that source (the task keeps a
// window of splits in flight). The job may hold the request up to `hold_ns` when it has
// nothing to hand out yet but the epoch is not over (another task still holds unfinished
// splits of it, which may come back); then it answers with neither splits nor end.
struct get_splits {
  task_id_t task = 0;
  int64_t epoch = 0;
  uint32_t max = 1;
  int64_t hold_ns = 0;
  int64_t source = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_splits& x) {
  return f(caf::meta::type_name("get_splits"), x.task, x.epoch, x.max, x.hold_ns, x.source);
}

// job -> task. `splits` may hold re-issued splits of the current epoch (their `epoch` and
// `index` are the original ones). end_of_splits: the epoch is over for this task;
// empty_epoch: the job handed out no split at all in it (the dataset is exhausted: the
// pipeline sees the end; otherwise a task that got nothing waits for the next epoch).
struct splits_reply {
  std::vector<Split> splits;
  bool end_of_splits = false;
  bool empty_epoch = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, splits_reply& x) {
  return f(caf::meta::type_name("splits_reply"), x.splits, x.end_of_splits, x.empty_epoch);
}

// task -> job: splits whose every element the consumers acknowledged (`finished`), and
// splits the task hands back: unstarted (`returned`, a task that drains or ends) or whose
// delivered-but-unacknowledged output was lost with a consumer connection (`lost`). Returned
// and lost splits are handed out again.
struct splits_update {
  task_id_t task = 0;
  std::vector<split_key> finished;
  std::vector<Split> returned;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, splits_update& x) {
  return f(caf::meta::type_name("splits_update"), x.task, x.finished, x.returned);
}

// task -> job: the task's pipeline reached its end (every element is in its buffer), or
// failed with `error` (non-empty; its consumers get the error with their next request).
// `drained`: DYNAMIC, the end came from its worker's drain (the task stopped taking splits and
// handed back the unstarted ones), not from the job running out of splits: the job's
// production is not over because this task ended.
struct task_done {
  task_id_t task = 0;
  std::string error;
  bool drained = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_done& x) {
  return f(caf::meta::type_name("task_done"), x.task, x.error, x.drained);
}

// job -> task, whole-epoch cross-trainer sharing: the trainers reading the job (joined: a first
// consumer of that trainer id joined the job; left: its last consumer left). The job tells
// every task of a trainer as it joins — and a new task of all of them — so that no task's cache
// evicts what a trainer has not read before that trainer's own first request arrives there.
struct cache_trainers {
  std::vector<std::string> joined;
  std::vector<std::string> left;
  std::string auth_token = {}; // the dispatcher's (the worker admits by token)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cache_trainers& x) {
  return f(caf::meta::type_name("cache_trainers"), x.joined, x.left, x.auth_token);
}

// The job, as its tasks see it.
using split_source_actor =
  caf::typed_actor<caf::replies_to<get_splits>::with<splits_reply>, caf::reacts_to<splits_update>,
                   caf::reacts_to<task_done>>;

} // namespace conveyor::msg
